"""The package as users install it (issue #28): the extra 'mcmc' declared and named when
missing, one version everywhere, a citation that says when it was released. In process;
the wheel itself is built, installed read-only and run in tests/test_installed_wheel.py."""

from __future__ import annotations

import importlib
import re
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
import yaml

import dpcounts
from dpcounts import extras

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
MCMC_MODULES = (
    "dpcounts.studies.pseudo_posterior.models",
    "dpcounts.studies.pseudo_posterior.nuts",
)


def requirement_name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0).lower()


def test_the_mcmc_extra_declares_what_the_mcmc_modules_import():
    declared = {requirement_name(r) for r in PYPROJECT["project"]["optional-dependencies"]["mcmc"]}
    assert declared == {"jax", "numpyro"}
    assert declared <= set(extras.EXTRAS["mcmc"])
    core = {requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert not declared & core, "the extra's packages are not core dependencies"


@pytest.fixture
def without_jax(monkeypatch):
    """JAX and NumPyro absent (as after `pip install dpcounts`), and the MCMC modules not yet
    imported; sys.modules is restored afterwards."""
    for name in list(sys.modules):
        if name.partition(".")[0] in extras.EXTRAS["mcmc"] or name in MCMC_MODULES:
            monkeypatch.delitem(sys.modules, name)
    for name in extras.EXTRAS["mcmc"]:
        monkeypatch.setitem(sys.modules, name, None)  # `import jax` raises ModuleNotFoundError


@pytest.mark.parametrize("module", MCMC_MODULES)
def test_an_mcmc_module_without_jax_names_the_extra_to_install(without_jax, module):
    with pytest.raises(ModuleNotFoundError) as raised:
        importlib.import_module(module)
    text = str(raised.value)
    assert "pip install 'dpcounts[mcmc]'" in text and module in text
    assert raised.value.name in ("jax", "jax.numpy", "numpyro")


def test_nuts_without_jax_names_the_extra_and_exact_fits_need_none(without_jax):
    from dpcounts.studies.pseudo_posterior.fitting import MCMCSettings, fit_weighted

    y, weights = np.array([3, 5, 4, 6]), np.ones(4)
    settings = MCMCSettings(chains=2, warmup=10, samples=10)
    fit = fit_weighted(y, weights, "poisson", settings, np.random.default_rng(0))
    assert fit is not None  # conjugate: drawn exactly, no JAX
    with pytest.raises(ModuleNotFoundError, match=re.escape("pip install 'dpcounts[mcmc]'")):
        fit_weighted(y, weights, "negbin", settings, np.random.default_rng(0))


def test_an_unrelated_missing_module_is_reraised_as_it_was():
    error = ModuleNotFoundError("No module named 'elsewhere'", name="elsewhere")
    with pytest.raises(ModuleNotFoundError) as raised:
        extras.raise_missing("mcmc", "dpcounts.x", error)
    assert raised.value is error


def test_one_version_in_pyproject_the_package_and_the_citation():
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert PYPROJECT["project"]["version"] == dpcounts.__version__ == str(citation["version"])
    assert dpcounts.__version__ == "0.2.0"


def test_the_citation_says_when_it_was_released():
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    released = citation["date-released"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(released)), released
    for key in ("cff-version", "title", "authors", "license", "version"):
        assert key in citation
