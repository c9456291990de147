"""Run the real workflow in a throw-away copy of the project (shared by workflow tests)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from dpcounts.config_check import check_config

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SNAKEMAKE = str(BIN / "snakemake")
TEST_CONFIG = "config/test/config.yaml"


def copy_project(dest: Path) -> Path:
    """Copy what a run needs (Snakefile, workflow, config, the environment files) and link
    the shipped data."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "environment.yml", "requirements.txt"):
        shutil.copy2(REPO / name, dest / name)
    for folder in ("workflow", "config"):
        shutil.copytree(REPO / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    os.symlink(REPO / "data", dest / "data")
    return dest


def no_history_reason(commit: str) -> str:
    return (
        f"needs the git history (commit {commit}), and {REPO} has no .git: a source archive "
        "or a downloaded ZIP. A git clone with its history (as CI has) runs this test."
    )


def export_commit(commit: str, dest: Path) -> Path:
    """The project at ``commit`` (git archive), extracted into ``dest``.

    Skips, saying why, where the checkout has no git history at all (no ``.git``: a
    release tarball or a "download ZIP"); fails, never skips, where it is a git checkout
    without the commit (a shallow clone) or git is not installed, so that CI, which has
    the history, cannot skip it by accident."""
    if not (REPO / ".git").exists():
        pytest.skip(no_history_reason(commit))
    try:
        found = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
            capture_output=True,
            text=True,
        )
    except FileNotFoundError:
        pytest.fail(f"git is not installed: this test needs it to export commit {commit}")
    if found.returncode != 0:
        pytest.fail(
            f"commit {commit} is not available in {REPO} "
            f"({found.stderr.strip() or 'unknown revision'}): a shallow clone? Fetch the "
            "history (git fetch --unshallow) and rerun; this test compares today's results "
            "with that commit's and cannot run without it."
        )
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", commit],
        capture_output=True,
        check=True,
    ).stdout
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def snakemake(
    workdir: Path, *args: str, timeout: float = 600, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run snakemake in ``workdir`` (``env``: extra environment variables); return the
    completed process (never raises on failure)."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {}))
    return subprocess.run(
        [SNAKEMAKE, *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def generated_files(workdir: Path) -> dict[str, bytes]:
    """Every non-hidden file under results/ and figures/, by relative path."""
    out = {}
    for folder in ("results", "figures"):
        root = workdir / folder
        if not root.exists():
            continue
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                out[str(path.relative_to(workdir))] = path.read_bytes()
    return out


def schema_defaults() -> dict:
    """Every default of the config schema (the one source of defaults), as a config."""
    config: dict = {}
    check_config(config, REPO / "workflow/schemas/config.schema.yaml")
    return config


def study_entry(spec: dict) -> dict:
    """A ``studies.<name>`` entry with the schema's defaults filled under ``spec``, as the
    workflow's config check fills them (``spec`` itself is not validated, so tests can
    hand the library entries the schema would refuse)."""
    minimal = {"table": "t.csv", "keys": ["k"], "count": "c", "population": "p",
               "arms": {"md": ["paper"]}}  # fmt: skip
    # an optional object the spec gives (geometry) gets its own keys' defaults too
    given = {"geometry": {"path": "g.gpkg"}} if isinstance(spec.get("geometry"), dict) else {}
    config = {"studies": {"s": {**minimal, **given}}}
    check_config(config, REPO / "workflow/schemas/config.schema.yaml")
    defaults = {k: v for k, v in config["studies"]["s"].items() if k not in minimal}
    if "geometry" in given:
        defaults["geometry"] = {k: v for k, v in defaults["geometry"].items() if k != "path"}
    return merged(defaults, spec)


def filled_definition(name: str, spec: dict, base: Path = Path()):
    """:func:`dpcounts.studies.stage.definition.study_definition` of ``spec`` with the schema's
    defaults filled (:func:`study_entry`), as the workflow builds it."""
    from dpcounts.studies.stage.definition import study_definition

    return study_definition(name, study_entry(spec), base)


def merged(base: dict, overlay: dict) -> dict:
    """``overlay`` over ``base`` key by key, as ``snakemake --configfile`` merges them."""
    out = dict(base)
    for key, value in overlay.items():
        both_maps = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merged(out[key], value) if both_maps else value
    return out


def fetch_debian(package: str, version: str, raw: Path) -> Path:
    """Debian's ``package`` (``version``, else the current one: ``apt-get download``, as an
    analyst fetches an R package's data), unpacked into ``raw/<package>``; its root."""
    raw.mkdir(parents=True, exist_ok=True)
    target = raw / package
    if (target / ".unpacked").exists():
        return target
    debs = sorted(raw.glob(f"{package}_*.deb"))
    if not debs:
        try:
            subprocess.run(["apt-get", "download", f"{package}={version}"], cwd=raw, check=True)
        except subprocess.CalledProcessError:
            subprocess.run(["apt-get", "download", package], cwd=raw, check=True)
        debs = sorted(raw.glob(f"{package}_*.deb"))
    subprocess.run(["dpkg-deb", "-x", str(debs[-1]), str(target)], check=True)
    (target / ".unpacked").write_text(debs[-1].name)
    return target


def run_study(workdir: Path, name: str, study: dict, timeout: float = 600) -> float:
    """Write ``my_study.yaml`` with ``study`` as ``studies.<name>`` and run the walk-through's
    target ``studies`` (docs/your-study.md) with 2 cores; return the wall time."""
    return run_studies(workdir, {name: study}, timeout)


def run_studies(workdir: Path, studies: dict, timeout: float = 600) -> float:
    """:func:`run_study` of several studies at once (one Snakemake run, its jobs shared
    over the 2 cores); return the wall time."""
    import time

    import yaml

    # The shipped studies are enabled by default and `studies` builds every enabled study:
    # switched off here, or the walk-through also runs them at full size.
    shipped = yaml.safe_load((workdir / "config" / "config.yaml").read_text())["studies"]
    config = {"studies": {**studies, **{s: {"enabled": False} for s in shipped}}}
    (workdir / "my_study.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    start = time.perf_counter()
    result = snakemake(workdir, "--cores", "2", "--configfile", "my_study.yaml", "--", "studies",
                       timeout=timeout)  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Traceback" not in result.stdout + result.stderr
    return time.perf_counter() - start


def dpcounts_cli(workdir: Path, home: Path):
    """A function that runs ``dpcounts ARGS...`` in ``workdir`` with its private folders
    and ledger under ``home`` (never the user's); it returns the completed process."""
    env = dict(os.environ, XDG_DATA_HOME=str(home), DPCOUNTS_LEDGER=str(home / "ledger.jsonl"))

    def run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "dpcounts"), *args], cwd=workdir, capture_output=True,
                              text=True, env=env, timeout=timeout)  # fmt: skip

    return run
