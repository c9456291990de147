"""docs/analyse.md runs as written (issue #54, item 4): its marked shell blocks make the
practice release (pennLC, five sets, CSV, a fixed test seed) in a temporary folder and run
`dpcounts estimate`, its Python block calls `estimate`, and its R block (base R and epitools)
analyses each set and combines them. The R crude rates equal `estimate`'s, and its
age-adjusted rates equal the same combining rules applied in Python to
:func:`dpcounts.studies.intervals.age_adjusted_interval` set by set; the number the page
quotes of the practice release is the release's own. Without Rscript or epitools the R
tests are skipped, saying how to install them (as tests/test_intervals_epitools.py)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcounts.data.pennsylvania import PENNLC_AGE_BANDS
from dpcounts.data.standard_population import load_standard_population, standard_weights
from dpcounts.inference.combining import combine
from dpcounts.release.estimate import estimate
from dpcounts.studies.intervals import age_adjusted_interval

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "analyse.md"
#: The line before every fenced block of the page that this test runs.
MARKER = "<!-- run by tests/test_analyse_docs.py -->"
LEVEL = 0.9  # the page's --level and level
RELATIVE = 1e-9
#: Bounds are compared where nu_f is at least this: below it the t quantile passes 1e40, and
#: R's qt and SciPy's t.ppf part there (neither is then accurate, nor the interval of use).
MIN_DF = 0.02


def _blocks() -> list[tuple[str, str]]:
    """(language, code) of every marked block of the page, in order."""
    pattern = re.escape(MARKER) + r"\n```(\w+)\n(.*?)```"
    return re.findall(pattern, PAGE.read_text(), flags=re.S)


def _code(language: str) -> list[str]:
    return [code for lang, code in _blocks() if lang == language]


def test_the_page_marks_every_block_it_shows():
    """Every fenced block of the page is marked, so none is left unrun: the release and the
    estimate (sh), the Python example, the R analysis."""
    fences = re.findall(r"^```(\w+)\n", PAGE.read_text(), flags=re.M)
    assert [lang for lang, _ in _blocks()] == fences == ["sh", "sh", "python", "r"]


@pytest.fixture(scope="module")
def practice(tmp_path_factory) -> Path:
    """A folder where the page's shell blocks ran, as written, from a copy of the project's
    layout (this venv, the shipped data), its ledger and private folder its own."""
    here = tmp_path_factory.mktemp("analyse")
    (here / ".venv").symlink_to(Path(sys.executable).parents[1])
    (here / "data").symlink_to(REPO / "data")
    env = dict(os.environ, DPCOUNTS_LEDGER=str(here.parent / "ledger.jsonl"),
               XDG_DATA_HOME=str(here.parent / "data_home"))  # fmt: skip
    for block in _code("sh"):
        run = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=here, env=env,
                             capture_output=True, text=True, timeout=600)  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
    return here


@pytest.fixture(scope="module")
def python_rates(practice) -> pd.DataFrame:
    """The page's Python block, run in the practice folder: its ``rates``."""
    (block,) = _code("python")
    namespace: dict = {}
    with contextlib.chdir(practice):
        exec(compile(block, str(PAGE), "exec"), namespace)
    return namespace["rates"]


@pytest.fixture(scope="module")
def rscript():
    """Rscript with epitools, or a skip saying how to install them."""
    how = "run `bash tools/ensure_r.sh` as root on Debian (r-base-core, r-cran-epitools)"
    path = shutil.which("Rscript")
    if path is None:
        pytest.skip(f"no Rscript on PATH: the page's R analysis is not run; {how}")
    loads = subprocess.run([path, "-e", "suppressPackageStartupMessages(library(epitools))"],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    if loads.returncode != 0:
        pytest.skip(f"R has no epitools package: the page's R analysis is not run; {how}")
    return path


@pytest.fixture(scope="module")
def r_rates(practice, rscript) -> pd.DataFrame:
    """The page's R block, run by Rscript in the practice folder: the table it writes."""
    (block,) = _code("r")
    (practice / "analysis.R").write_text(block)
    run = subprocess.run([rscript, "analysis.R"], cwd=practice, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    return pd.read_csv(practice / "county_rates_r.csv")


def _assert_same(r: pd.DataFrame, ours: pd.DataFrame, what: str) -> None:
    """R's estimate, lower and upper against ours, county by county: the estimate to
    :data:`RELATIVE` everywhere, the bounds where nu_f >= :data:`MIN_DF` (most counties)."""
    r = r.set_index("county").loc[ours["county"]]
    assert len(r) == len(ours) == 67, what
    np.testing.assert_allclose(r["estimate"], ours["estimate"], rtol=RELATIVE, err_msg=what)
    kept = (ours["df"] >= MIN_DF).to_numpy()
    assert kept.sum() >= 60, (what, kept.sum())  # the bounds of nearly every county compared
    scale = RELATIVE * ours["estimate"].max()  # a lower bound near 0 cancels digits
    for bound in ("lower", "upper"):
        theirs, mine = r[bound].to_numpy()[kept], ours[bound].to_numpy()[kept]
        np.testing.assert_allclose(
            theirs, mine, rtol=RELATIVE, atol=scale, err_msg=f"{what}: {bound}"
        )


@pytest.mark.slow
@pytest.mark.process
def test_the_shell_and_python_give_one_table(practice, python_rates):
    """The practice release is what the page says (five sets, a test seed, its manifest
    pointing to `dpcounts estimate`), and the shell's county_rates.csv (six digits) is the
    Python block's table."""
    manifest = pd.read_json(practice / "release" / "manifest.json", typ="series")
    assert manifest["sets"] == 5 and manifest["purpose"].startswith("reproducible test")
    assert (practice / "release" / "synthetic.csv").exists()
    # the manifest's layout of the sets tells its reader where to go (issue #54, item 5)
    layout = manifest["files"]["synthetic"]["layout"]
    assert "dpcounts estimate RELEASE --by KEYS" in layout and "docs/analyse.md" in layout
    shell = pd.read_csv(practice / "county_rates.csv")
    assert list(shell.columns) == list(python_rates.columns)
    assert shell["county"].tolist() == python_rates["county"].tolist()
    numbers = ["estimate", "lower", "upper", "variance", "df"]
    np.testing.assert_allclose(shell[numbers], python_rates[numbers].astype(float), rtol=1e-5)
    assert shell["adjusted"].tolist() == python_rates["adjusted"].tolist()


@pytest.mark.slow
@pytest.mark.process
def test_the_page_quotes_the_practice_release(practice):
    """The page's "N of the 67 counties get nu_f below 1": the practice release's own
    count, by the combining rules."""
    (quoted,) = re.findall(r"(\d+) of the (\d+) counties get nu_f below 1",
                           " ".join(PAGE.read_text().split()))  # fmt: skip
    rates = estimate(practice / "release", ["county"], level=LEVEL, method="combining")
    assert (int(quoted[0]), int(quoted[1])) == ((rates["df"] < 1).sum(), len(rates))


@pytest.mark.slow
@pytest.mark.process
def test_r_crude_rates_are_estimates(r_rates, practice):
    """The R block's combined crude rate of each county is `estimate`'s (method
    combining), both branches of the rules met (a t interval, and the adjustment)."""
    ours = estimate(practice / "release", ["county"], level=LEVEL, method="combining")
    assert ours["adjusted"].any() and not ours["adjusted"].all()
    _assert_same(r_rates[r_rates["measure"] == "crude"], ours, "crude")


@pytest.mark.slow
@pytest.mark.process
def test_r_age_adjusted_rates_are_the_rules_on_each_sets_fay_feuer_rate(r_rates, practice):
    """The R block's combined age-adjusted rate of each county equals the combining rules
    applied in Python to age_adjusted_interval of each set (race and sex pooled within each
    age band; the US 2000 standard in pennLC's bands), with each set's Poisson variance
    sum(w_i^2 y_i) of dpcounts.studies.intervals' docstring."""
    sets = pd.read_csv(practice / "release" / "synthetic.csv")
    ages = list(PENNLC_AGE_BANDS)
    standard = standard_weights(
        load_standard_population(REPO / "data" / "us_standard_population_2000.csv"),
        PENNLC_AGE_BANDS,
    )[ages].to_numpy()
    summed = sets.groupby(["set", "county", "age"])[["count", "population"]].sum()
    counts = summed["count"].unstack("age")[ages]  # (set, county) x age
    counties = sorted(sets["county"].unique())
    m = sets["set"].nunique()
    y = counts.to_numpy(float).reshape(m, len(counties), len(ages))
    n = summed["population"].unstack("age")[ages].loc[0].loc[counties].to_numpy(float)
    assert counts.index.get_level_values("county")[: len(counties)].tolist() == counties
    rates = age_adjusted_interval(y, n, standard, level=LEVEL, per=1).adjusted  # (set, county)
    weight = standard / standard.sum() / n
    variances = (weight**2 * y).sum(axis=-1)
    combined = combine(rates, variances, level=LEVEL)
    ours = pd.DataFrame({"county": counties, "estimate": combined["estimate"] * 1e5,
                         "lower": np.maximum(combined["lower"], 0.0) * 1e5,
                         "upper": combined["upper"] * 1e5, "df": combined["df"]})  # fmt: skip
    assert combined["adjusted"].any() and not combined["adjusted"].all()
    _assert_same(r_rates[r_rates["measure"] == "age-adjusted"], ours, "age-adjusted")
