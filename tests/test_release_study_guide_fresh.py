"""No release on a study that is missing or stale (issue #52, item 3): the study stage
writes what its guide judged (``guide.json``: the entry's settings, its files' bytes, the
measures' version); ``synthesize --study`` and ``calibrate --study`` refuse, before any
count is read and before the ledger, a guide that is missing or judged another entry,
naming the command that runs the study; ``--release-without-guide`` releases anyway and
the private summary says so."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import run_cli as run
from test_release_study import table
from workflow_helpers import copy_project, run_study

KEYS = ["county", "cause", "age"]


def entry(**changes) -> dict:
    """The study ``causes``; its table ``causes.csv`` relative to the checkout, as a
    steward writes it."""
    return {
        "table": "causes.csv",
        "keys": KEYS,
        "count": "deaths",
        "population": "person_years",
        "population_keys": ["county", "age"],
        "attributes": ["state"],
        "area": "county",
        "prior": {"source": "sanitised", "by": ["state", "age"], "epsilon": 0.2},
        "arms": {"pg": ["certified"]},
        "epsilons": [1.0, 10.0],
        "sets": 3,
    } | changes


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A copy of the workflow with the study's table, the current folder (where snakemake
    runs); ``write(**changes)`` writes my_study.yaml and returns the --study spec."""
    work = copy_project(tmp_path / "work")
    table().to_csv(work / "causes.csv", index=False)
    monkeypatch.chdir(work)

    def write(**changes) -> str:
        config = {"studies": {"causes": entry(**changes)}}
        (work / "my_study.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        return "my_study.yaml:causes"

    write.work = work
    return write


def judged(work, spec: str) -> None:
    """Leave the guide's fingerprint as the study stage writes it for ``spec``'s entry
    (its summary script's function, on the definition the workflow builds: paths relative
    to the checkout), beside a guide.csv."""
    from dpcounts.config_check import check_config
    from dpcounts.release.study_source import _merged
    from dpcounts.studies.stage.definition import study_definition
    from dpcounts.studies.stage.fingerprint import write_fingerprint

    base = yaml.safe_load((work / "config/config.yaml").read_text())
    over = yaml.safe_load((work / spec.split(":")[0]).read_text())
    config = _merged(base, over)
    check_config(config, work / "workflow/schemas/config.schema.yaml")
    folder = work / "results/studies/causes"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "guide.csv").write_text("arm,measure,verdict\n")
    write_fingerprint(
        study_definition("causes", config["studies"]["causes"]), folder / "guide.json"
    )


def synthesize(spec, out, *extra):
    return run(
        "synthesize", "--study", spec, "--mechanism", "pg", "--epsilon", "5", "--sets", "2",
        "--strata", "cross-product", "--dataset", "causes", "--out", str(out), "--quiet",
        *extra,
    )  # fmt: skip


def calibrate(spec, *extra):
    return run(
        "calibrate", "--study", spec, "--mechanism", "pg", "--epsilon", "5",
        "--strata", "cross-product", *extra,
    )  # fmt: skip


def refused(result, out, private_ledger, private_area) -> str:
    """The one-line refusal of ``result``: exit 2, nothing written, nothing spent."""
    code, stdout, stderr = result
    assert code == 2 and not stdout, stderr
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1
    assert not out.exists() and not private_ledger.exists()
    assert not private_area.exists() or not any(private_area.iterdir())
    return stderr


RUN = "snakemake --cores 2 --configfile my_study.yaml"
TARGET = "-- results/studies/causes/guide.csv"


@pytest.mark.slow
def test_a_study_that_never_ran_is_refused(checkout, private_ledger, private_area):
    spec = checkout()
    out = checkout.work / "out"
    for result in (synthesize(spec, out), calibrate(spec)):
        stderr = refused(result, out, private_ledger, private_area)
        assert "my_study.yaml:causes: the study has not run" in stderr
        assert f"Run the study: {RUN} {TARGET}" in stderr
        assert "nothing was spent" in stderr and "--release-without-guide" in stderr


@pytest.mark.slow
def test_the_library_refuses_a_study_that_never_ran_as_the_command_does(
    checkout, private_ledger, private_area
):
    from dpcounts.release import ReleaseError, ReleaseRequest, build_release
    from dpcounts.release.study_source import load_study

    study = load_study(checkout())
    fields = dict(study.request_fields("pg"), study=study, mechanism="pg", method="certified",
                  epsilon=5.0, sets=2, strata="cross-product", dataset="causes",
                  out=checkout.work / "out", progress=False)  # fmt: skip
    with pytest.raises(ReleaseError, match="the study has not run .*; nothing was spent"):
        build_release(ReleaseRequest(**fields))
    assert not (checkout.work / "out").exists() and not private_ledger.exists()
    build_release(ReleaseRequest(**fields, release_without_guide=True))
    assert (checkout.work / "out" / "manifest.json").exists()


@pytest.mark.slow
def test_a_prior_changed_since_the_study_ran_is_refused(checkout, private_ledger, private_area):
    judged(checkout.work, checkout())
    spec = checkout(prior={"source": "sanitised", "by": ["state", "age"], "epsilon": 0.3})
    out = checkout.work / "out"
    for result in (synthesize(spec, out), calibrate(spec)):
        stderr = refused(result, out, private_ledger, private_area)
        assert "judged another entry: prior.epsilon changed since the study ran" in stderr
        assert f"Run the study again: {RUN} --forcerun study_strata {TARGET}" in stderr
        assert "0.2" not in stderr and "0.3" not in stderr  # the keys, not their values


def test_a_table_whose_bytes_changed_is_refused(checkout, private_ledger, private_area):
    spec = checkout()
    judged(checkout.work, spec)
    table(seed=4).to_csv(checkout.work / "causes.csv", index=False)  # other counts
    stderr = refused(synthesize(spec, checkout.work / "out"), checkout.work / "out",
                     private_ledger, private_area)  # fmt: skip
    assert "judged another entry: table (its bytes) changed since the study ran" in stderr


@pytest.mark.slow
def test_a_guide_from_before_fingerprints_and_older_measures_are_refused(
    checkout, private_ledger, private_area, monkeypatch
):
    from dpcounts.studies.stage import fingerprint

    spec = checkout()
    judged(checkout.work, spec)
    monkeypatch.setattr(fingerprint, "MEASURES_VERSION", fingerprint.MEASURES_VERSION + 1)
    out = checkout.work / "out"
    stderr = refused(synthesize(spec, out), out, private_ledger, private_area)
    assert "the measures' code (MEASURES_VERSION) changed" in stderr
    (checkout.work / "results/studies/causes/guide.json").unlink()
    stderr = refused(synthesize(spec, out), out, private_ledger, private_area)
    assert "records no fingerprint of what it judged" in stderr


def test_layout_settings_and_a_moved_checkout_leave_the_guide_current(checkout):
    """The titles and the job layout change no verdict; files are known by their bytes,
    so the release's definition (paths from the checkout's root) matches the workflow's
    (paths relative to where snakemake runs)."""
    from dpcounts.release.study_source import load_study

    judged(checkout.work, checkout())
    spec = checkout(title="Causes of death", sets_per_job=1, epsilons_per_job=1)
    study = load_study(spec)
    assert study.definition.table.is_absolute()
    assert study.guide_problem() is None
    study.check_guide()


@pytest.mark.slow
def test_the_option_releases_and_the_private_summary_says_so(
    checkout, private_ledger, private_folder
):
    spec = checkout()
    out = checkout.work / "out"
    code, _, stderr = synthesize(spec, out, "--release-without-guide")
    assert code == 0, stderr
    assert (out / "manifest.json").is_file() and private_ledger.exists()
    summary = (private_folder(out) / "summary.md").read_text()
    assert "**released without a current guide** (`--release-without-guide`): the study " in summary
    assert "has not run (no guide at results/studies/causes/guide.csv)" in summary
    code, stdout, stderr = calibrate(spec, "--release-without-guide")
    assert code == 0, stderr


def test_the_option_needs_a_study(tmp_path):
    code, _, stderr = run(
        "calibrate", "--input", str(tmp_path / "t.csv"), "--keys", "k", "--mechanism", "md",
        "--epsilon", "1", "--strata", "input", "--release-without-guide",
    )  # fmt: skip
    assert code == 2 and "--release-without-guide applies to --study" in stderr


@pytest.mark.slow
@pytest.mark.process
def test_the_guide_the_workflow_writes_is_the_one_the_release_checks(
    checkout, private_ledger, private_area
):
    """The study's summary job writes guide.json; the release computes the same
    fingerprint and goes ahead; a changed entry is then refused."""
    work = checkout.work
    run_study(work, "causes", entry())
    record = json.loads((work / "results/studies/causes/guide.json").read_text())
    from dpcounts.release.study_source import load_study
    from dpcounts.studies.stage.fingerprint import digest, study_fingerprint

    spec = "my_study.yaml:causes"
    today = study_fingerprint(load_study(spec).definition)
    assert record["fingerprint"] == today and record["sha256"] == digest(today)
    code, _, stderr = synthesize(spec, work / "out")
    assert code == 0, stderr
    assert "released without" not in next(private_area.glob("*/summary.md")).read_text()
    config = yaml.safe_load((work / "my_study.yaml").read_text())
    config["studies"]["causes"]["guide"] = {"tolerance": 0.2}
    (work / "my_study.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    code, _, stderr = synthesize(spec, work / "again")
    assert code == 2 and "guide.tolerance changed since the study ran" in stderr
