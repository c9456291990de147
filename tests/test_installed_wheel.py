"""dpcounts as `pip install` leaves it (issue #28): a wheel of this tree, installed into a
fresh venv and made read-only, imports every module (the extra 'mcmc''s name when JAX is
absent) and releases with `dpcounts synthesize`, wherever numba can or cannot keep its
compiled code (dpcounts.compile_cache).

The venv sees the dependencies through a .pth line to this interpreter's site-packages
(nothing is downloaded; dpcounts's own editable install there is not seen: a path added
by a .pth line does not run that folder's .pth files). As root, permission bits do not
stop writes, so the package folder (and, where asked, the home) is mounted read-only in a
private mount namespace (`unshare -m`)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.process]

REPO = Path(__file__).resolve().parents[1]
MCMC_MODULES = {
    "dpcounts.studies.pseudo_posterior.models",
    "dpcounts.studies.pseudo_posterior.nuts",
}
#: Public prior rates by age (not the table's own: those are refused).
TABLE = """region,age,count,population,prior_rate
north,young,3,4000,0.0015
north,old,40,2000,0.02
south,young,5,5000,0.0015
south,old,31,1500,0.02
"""
SYNTHESIZE = [
    "synthesize", "--input", "counts.csv", "--keys", "region", "age", "--strata",
    "cross-product", "--dataset", "counts", "--epsilon", "2", "--mechanism", "truncated",
    "--sets", "2", "--prior-source", "national rates by age, published 1999 (test)", "--quiet",
]  # fmt: skip

#: Every module of the installed package, imported; prints {name: error or null} as JSON.
#: With "block", JAX and NumPyro are absent (as after `pip install dpcounts`).
IMPORT_ALL = """\
import importlib, json, pkgutil, sys
if sys.argv[1] == "block":
    for name in ("jax", "jaxlib", "numpyro"):
        sys.modules[name] = None
import dpcounts
outcome = {"dpcounts": dpcounts.__file__}
for info in pkgutil.walk_packages(dpcounts.__path__, "dpcounts."):
    if info.name.endswith(".__main__"):  # `python -m dpcounts`: importing it runs the CLI
        continue
    try:
        importlib.import_module(info.name)
        outcome[info.name] = None
    except Exception as error:
        outcome[info.name] = f"{type(error).__name__}: {error}"
print(json.dumps(outcome))
"""


class Install:
    def __init__(self, root: Path):
        self.root = root
        self.venv = root / "venv"
        self.python = self.venv / "bin" / "python"
        purelib = subprocess.run(
            [self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        self.site = Path(purelib)
        self.package = self.site / "dpcounts"

    def env(self, home: Path, **extra: str) -> dict:
        drop = ("PYTHONPATH", "DPCOUNTS_TEST_LANE", "NUMBA_CACHE_DIR", "XDG_CACHE_HOME")
        env = {k: v for k, v in os.environ.items() if k not in drop}
        return env | {"HOME": str(home), "MPLCONFIGDIR": str(self.root / "mpl")} | extra

    def run(self, cmd: list, cwd: Path, env: dict, read_only: tuple[Path, ...] = ()):
        """``cmd`` with the package folder and ``read_only`` not writable."""
        folders = (self.package, *read_only)
        if os.geteuid() == 0:
            mounts = " && ".join(
                f"mount --bind {q} {q} && mount -o remount,bind,ro {q} {q}"
                for q in map(shlex.quote, map(str, folders))
            )
            cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                   f'{mounts} && exec "$@"', "sh", *map(str, cmd)]  # fmt: skip
        else:
            for folder in read_only:
                folder.chmod(0o555)
        try:
            return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=600)  # fmt: skip
        finally:
            for folder in read_only:
                folder.chmod(0o755)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Install:
    root = tmp_path_factory.mktemp("wheel")
    tree = root / "tree"
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, tree / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(REPO / "src", tree / "src", ignore=ignore)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    # the build backend (setuptools) comes from the index, as for `make`'s `pip install -e .`
    subprocess.run([*pip, "wheel", "--no-deps", ".", "-w", root / "dist"], cwd=tree, check=True)
    (wheel,) = (root / "dist").glob("dpcounts-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", root / "venv"], check=True)
    subprocess.run([*pip, "--python", root / "venv/bin/python", "install", "--no-deps",
                    "--no-index", wheel], check=True)  # fmt: skip
    install = Install(root)
    dependencies = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (install.site / "zz_dpcounts_test_dependencies.pth").write_text("\n".join(dependencies) + "\n")
    subprocess.run(["chmod", "-R", "a-w", install.package], check=True)
    probe = install.run(
        [install.python, "-c", f"open({str(install.package / 'probe')!r}, 'w')"],
        cwd=root, env=install.env(root),
    )  # fmt: skip
    if probe.returncode == 0:
        pytest.skip("cannot make the installed package read-only here (root without unshare)")
    assert "Read-only file system" in probe.stderr or "Permission denied" in probe.stderr, probe
    return install


def import_all(install: Install, mode: str) -> dict:
    result = install.run([install.python, "-c", IMPORT_ALL, mode], cwd=install.root,
                         env=install.env(install.root))  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_venv_runs_the_installed_wheel_not_this_checkout(installed):
    outcome = import_all(installed, "keep")
    assert Path(outcome["dpcounts"]).resolve().is_relative_to(installed.venv.resolve())
    command = [installed.venv / "bin/dpcounts", "--version"]
    env = installed.env(installed.root)
    version = subprocess.run(command, capture_output=True, text=True, env=env)
    assert version.stdout.strip() == "dpcounts 0.2.0", version


def test_every_module_of_the_installed_package_imports(installed):
    outcome = import_all(installed, "keep")
    failed = {name: error for name, error in outcome.items() if name != "dpcounts" and error}
    assert not failed, failed
    assert MCMC_MODULES <= set(outcome) and len(outcome) > 50


def test_without_jax_only_the_mcmc_modules_fail_and_they_name_the_extra(installed):
    outcome = import_all(installed, "block")
    failed = {name: error for name, error in outcome.items() if name != "dpcounts" and error}
    assert set(failed) == MCMC_MODULES, failed
    for name, error in failed.items():
        assert error.startswith("ModuleNotFoundError") and name in error, error
        assert "pip install 'dpcounts[mcmc]'" in error, error


@pytest.mark.parametrize("cache", ["user cache", "NUMBA_CACHE_DIR", "nowhere"])
def test_a_read_only_install_releases(installed, tmp_path, cache):
    """A read-only site-packages: numba keeps the compiled sampler in ~/.cache/numba, or
    in $NUMBA_CACHE_DIR when set, or (home read-only too) nowhere, with a warning."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "counts.csv").write_text(TABLE)
    extra = {"NUMBA_CACHE_DIR": str(tmp_path / "numba")} if cache == "NUMBA_CACHE_DIR" else {}
    env = installed.env(home, **extra)
    read_only = (home,) if cache == "nowhere" else ()
    cmd = [installed.venv / "bin/dpcounts", *SYNTHESIZE, "--out", "release"]
    result = installed.run(cmd, cwd=work, env=env, read_only=read_only)
    assert result.returncode == 0, result.stderr[-4000:]
    assert (work / "release").is_dir() and "wrote release" in result.stdout
    assert not list(installed.package.rglob("*.nbi")), "numba wrote into the read-only package"
    where = {"user cache": home / ".cache" / "numba", "NUMBA_CACHE_DIR": tmp_path / "numba"}
    if cache in where:
        assert list(where[cache].rglob("tree_draw.*.nbi")), f"no compiled code in {where[cache]}"
        assert "NUMBA_CACHE_DIR" not in result.stderr
    else:
        assert not list(home.rglob("*.nbi"))
        assert "numba cannot cache" in result.stderr and "NUMBA_CACHE_DIR" in result.stderr
