"""``dpcounts verify``: real releases made by the library verify; each tampering is caught
by the check that is about it, and the command exits 0, 1 or 2 as documented."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli as run
from test_release import STRATA  # the same six strata as the release tests

from dpcounts.io import sha256_file
from dpcounts.release import ReleaseRequest, build_release
from dpcounts.verify import (
    FAIL,
    NOMINAL,
    OK,
    NotARelease,
    failed,
    format_checks,
    report,
    verify_release,
)

DPCOUNTS = Path(sys.executable).parent / "dpcounts"

#: Releases of every kind the library makes: (options, sanitised prior).
KINDS = {
    "md": dict(mechanism="md"),
    "pg": dict(mechanism="pg", sets=2),
    "truncated": dict(mechanism="truncated", sets=2, epsilon=2.0),
    "sanitised": dict(mechanism="pg", sanitised_prior_by=("region",), prior_epsilon=0.2),
    "csv": dict(mechanism="truncated", output_format="csv"),
}


def release(tmp_path: Path, name: str = "out", **changes) -> Path:
    """A release of :data:`STRATA` in ``tmp_path / name`` (a test seed, declared strata)."""
    sanitised = changes.get("sanitised_prior_by") is not None
    source = tmp_path / ("n.csv" if sanitised else "s.csv")
    (STRATA.drop(columns="prior_rate") if sanitised else STRATA).to_csv(source, index=False)
    fields = dict(input=source, out=tmp_path / name, epsilon=1.0, mechanism="pg",
                  dataset="test-data",
                  keys=("code", "region"), test_seed=3, progress=False, strata="input")  # fmt: skip
    if not sanitised and changes.get("mechanism", "pg") != "md":  # the prior's source, declared
        fields["prior_source"] = "registry rates"
    fields.update(changes)
    build_release(ReleaseRequest(**fields))
    return tmp_path / name


def by_name(checks) -> dict:
    return {f"{c.topic}/{c.name}": c for c in checks}


def failures(checks) -> list[str]:
    return sorted(f"{c.topic}/{c.name}" for c in checks if c.status == FAIL)


def manifest_of(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def rewrite(out: Path, name: str, frame: pd.DataFrame) -> None:
    """Replace the release's file ``name`` by ``frame`` and list its new SHA-256, as a
    careful forger would: the hashes then agree and only the content checks remain."""
    manifest = manifest_of(out)
    path = out / manifest["files"][name]["path"]
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    manifest["files"][name]["sha256"] = sha256_file(path)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))


def read(out: Path, name: str) -> pd.DataFrame:
    path = out / manifest_of(out)["files"][name]["path"]
    return pd.read_csv(path) if path.suffix == ".csv" else pd.read_parquet(path)


# --- real releases ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", [k if k == "pg" else pytest.param(k, marks=pytest.mark.slow) for k in sorted(KINDS)]
)
def test_certified_releases_of_every_kind_verify(tmp_path, kind):
    out = release(tmp_path, **KINDS[kind])
    checks = verify_release(out)
    assert not failed(checks), format_checks(checks, out)
    # no warning either, but the one that shows a declared prior's source (taken on trust)
    trusted = {"hyperparameters/prior (source)"}
    assert all(c.status == OK for c in checks if f"{c.topic}/{c.name}" not in trusted), (
        format_checks(checks, out)
    )
    names = by_name(checks)
    bound = names["promise/bound"]
    eps = manifest_of(out)["budget"]["epsilon_per_set"]
    assert bound.values["epsilon"] <= eps * (1 + 1e-9)
    assert bound.values["epsilon"] == pytest.approx(eps, rel=1e-6)  # the calibration is tight
    assert f"{bound.values['epsilon']:.12g}" in bound.detail
    expected = {"md": [], "pg": [], "truncated": ["synthetic/bounds", "hyperparameters/bounds"]}
    expected["csv"] = expected["truncated"]
    expected["sanitised"] = ["hyperparameters/prior group rates", "hyperparameters/strata rates"]
    assert set(expected[kind]) <= set(names)
    code, stdout, _ = run("verify", str(out))
    assert code == 0 and stdout.strip().splitlines()[-1].startswith("PASSED:")


@pytest.mark.slow
def test_a_nominal_release_passes_but_says_it_promises_nothing(tmp_path):
    out = release(tmp_path, method="paper", allow_nominal=True)
    checks, manifest = report(out)
    assert not failed(checks)
    bound = by_name(checks)["promise/bound"]
    assert bound.status == NOMINAL and bound.detail.startswith("nominal: no guarantee")
    code, stdout, _ = run("verify", str(out))
    last = stdout.strip().splitlines()[-1]
    assert code == 0 and "NOMINAL" in last and "promises nothing proven" in last


@pytest.mark.slow
def test_json_lists_the_checks_for_machines(tmp_path):
    out = release(tmp_path)
    code, stdout, _ = run("verify", "--json", str(out))
    data = json.loads(stdout)
    assert code == 0 and data["passed"] and not data["nominal"]
    topics = {c["topic"] for c in data["checks"]}
    assert topics == {"files", "synthetic", "hyperparameters", "promise", "metadata"}
    bound = next(c for c in data["checks"] if c["name"] == "bound")
    assert bound["values"]["epsilon"] <= bound["values"]["epsilon_per_set"] * (1 + 1e-9)


# --- tampering: each caught by its own check -------------------------------------------------


@pytest.mark.slow
def test_an_unlisted_file_fails_the_listing(tmp_path):
    out = release(tmp_path)
    (out / "notes.txt").write_text("published by mistake")
    checks = verify_release(out)
    assert failures(checks) == ["files/nothing unlisted"]
    assert "notes.txt" in by_name(checks)["files/nothing unlisted"].detail
    assert run("verify", str(out))[0] == 1


@pytest.mark.slow
def test_a_changed_byte_fails_the_hash(tmp_path):
    out = release(tmp_path, output_format="csv")
    path = out / "synthetic.csv"
    data = bytearray(path.read_bytes())
    data[-2] = ord("9") if data[-2] != ord("9") else ord("8")  # the last population's digit
    path.write_bytes(bytes(data))
    checks = verify_release(out)
    assert "files/synthetic sha256" in failures(checks)
    assert "files/hyperparameters sha256" not in failures(checks)
    assert run("verify", str(out))[0] == 1


@pytest.mark.slow
def test_a_set_that_misses_the_total_fails_the_sums_not_the_hash(tmp_path):
    out = release(tmp_path, sets=2)
    synthetic = read(out, "synthetic")
    synthetic.loc[synthetic.index[-1], "count"] += 1  # set 1 now sums to total + 1
    rewrite(out, "synthetic", synthetic)
    checks = verify_release(out)
    assert failures(checks) == ["synthetic/set sums"]
    total = manifest_of(out)["total"]
    assert by_name(checks)["synthetic/set sums"].detail.startswith(f"set 1 sums to {total + 1}")
    assert by_name(checks)["metadata/times"].status == "warning"  # rewritten just now
    assert run("verify", str(out))[0] == 1


@pytest.mark.slow
def test_a_lowered_shape_fails_the_privacy_bound(tmp_path):
    out = release(tmp_path)
    hyper = read(out, "hyperparameters")
    hyper.loc[0, "a"] /= 2
    hyper.loc[0, "b"] = hyper.loc[0, "a"] / hyper.loc[0, "prior_rate"]  # consistent: b = a/rate
    rewrite(out, "hyperparameters", hyper)
    checks = verify_release(out)
    assert failures(checks) == ["promise/bound"]
    bound = by_name(checks)["promise/bound"]
    eps = manifest_of(out)["budget"]["epsilon_per_set"]
    assert bound.values["epsilon"] > eps * (1 + 1e-9)
    assert f"{bound.values['epsilon']:.12g} > epsilon_per_set" in bound.detail
    assert run("verify", str(out))[0] == 1


@pytest.mark.slow
def test_an_epsilon_total_that_disagrees_with_its_parts_fails_the_budget(tmp_path):
    out = release(tmp_path, sets=2)
    manifest = manifest_of(out)
    manifest["budget"]["epsilon_total"] = 0.5  # the sets alone spend 1
    (out / "manifest.json").write_text(json.dumps(manifest))
    checks = verify_release(out)
    # the README states the total as released, so it disagrees with the edited manifest
    assert failures(checks) == ["files/readme", "promise/epsilon", "promise/statement"]
    assert "total 0.5 vs prior 0 + 2 x 0.5 = 1" in by_name(checks)["promise/epsilon"].detail


@pytest.mark.slow
def test_a_nominal_pair_claimed_certified_fails_the_status(tmp_path):
    out = release(tmp_path, method="paper", allow_nominal=True)
    manifest = manifest_of(out)
    manifest["guarantee"].update(status="certified", proof="docs/privacy.md",
                                 audited_worst_ratio=None)  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(manifest))
    checks = verify_release(out)
    assert failures(checks) == ["files/readme", "promise/statement", "promise/status"]
    assert by_name(checks)["promise/bound"].status == NOMINAL  # and it still says so
    code, stdout, _ = run("verify", str(out))
    assert code == 1 and stdout.strip().splitlines()[-1].startswith("FAILED:")


def test_a_manifest_that_breaks_the_schema_fails_and_stops_there(tmp_path):
    out = release(tmp_path)
    manifest = manifest_of(out)
    manifest["dpcounts_release_format"] = 99
    (out / "manifest.json").write_text(json.dumps(manifest))
    checks = verify_release(out)
    assert {"files/format", "files/schema"} <= set(failures(checks))
    assert {c.topic for c in checks} == {"files"}


def test_unreadable_files_fail_without_a_traceback(tmp_path):
    out = release(tmp_path)
    (out / "synthetic.parquet").write_bytes(b"not parquet")
    checks = verify_release(out)
    assert "synthetic/synthetic" in failures(checks)
    assert "could not be checked" in by_name(checks)["synthetic/synthetic"].detail
    (out / "manifest.json").write_text("{ broken")
    with pytest.raises(NotARelease, match="is not valid JSON"):
        verify_release(out)


# --- usage errors ----------------------------------------------------------------------------


def test_what_is_not_a_release_is_a_usage_error(tmp_path):
    with pytest.raises(NotARelease, match="no such folder"):
        verify_release(tmp_path / "missing")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "manifest.json").write_text('{"name": "a web app"}')
    code, stdout, stderr = run("verify", str(tmp_path / "other"))
    assert code == 2 and not stdout
    assert stderr.startswith(f"dpcounts verify: error: {tmp_path / 'other' / 'manifest.json'}")
    assert "expected a dpcounts release folder" in stderr and len(stderr.splitlines()) <= 4


@pytest.mark.process
def test_the_command_exits_0_1_2_with_a_few_readable_lines(tmp_path):
    release(tmp_path, "good")
    bad = release(tmp_path, "bad")
    (bad / "extra.csv").write_text("x\n1\n")

    def dpcounts(*args):
        return subprocess.run([str(DPCOUNTS), "verify", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)  # fmt: skip

    for result, code in ((dpcounts("good"), 0), (dpcounts("bad"), 1), (dpcounts("nowhere"), 2)):
        assert result.returncode == code, (result.stdout, result.stderr)
        text = result.stdout + result.stderr
        lines = text.strip().splitlines()
        assert "Traceback" not in text and 2 <= len(lines) <= 40
        # the closing line names what was recomputed and what is taken on trust: longer
        assert all(len(line) <= 200 for line in lines[:-1]), max(lines[:-1], key=len)
        assert len(lines[-1]) <= 700, lines[-1]
    passed = dpcounts("good").stdout.splitlines()
    assert passed[0] == "dpcounts verify good: pg / certified, 1 set(s) of 6 strata, total 28"
    assert passed[-1].startswith("PASSED:")
    assert "FAIL    nothing unlisted" in dpcounts("bad").stdout
    assert "nowhere: no such folder" in dpcounts("nowhere").stderr
    assert json.loads(dpcounts("--json", "good").stdout)["passed"] is True


# --- what verify knows, and what it trusts (issue #26, finding 5) ------------------------------


def set_manifest(out: Path, manifest: dict) -> None:
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))


@pytest.mark.slow
def test_the_confidential_table_as_synthetic_passes_and_the_summary_says_what_that_means(
    tmp_path,
):
    """No check can tell draws from data: the summary claims only what the numbers back."""
    out = release(tmp_path)
    synthetic = read(out, "synthetic")
    synthetic["count"] = STRATA["count"].to_numpy()  # the confidential counts, as published
    rewrite(out, "synthetic", synthetic)
    checks, manifest = report(out)
    assert not failed(checks)
    code, stdout, _ = run("verify", str(out))
    last = stdout.strip().splitlines()[-1]
    assert code == 0 and last.startswith("PASSED:")
    # the sets' bound is recomputed; that the prior is public (the count-fit check's verdict)
    # and that the sets are draws are taken on trust, never said "backed"
    assert "Recomputed from the public files: epsilon 1 of the 1 synthetic set(s)" in last
    trusted = last.split("taken on trust, not checkable from the folder: ", 1)[1]
    assert "the count-fit check's verdict (passed)" in trusted
    assert "that the sets were drawn by this calibration" in trusted
    assert "back" not in stdout and "certified promise" not in stdout
    assert "Unsigned: no signature.json" in last


@pytest.mark.slow
def test_a_huge_sets_count_is_compared_with_the_file_before_anything_is_allocated(tmp_path):
    out = release(tmp_path)
    manifest = manifest_of(out)
    manifest["sets"] = manifest["budget"]["sets"] = 1_000_000_000
    set_manifest(out, manifest)
    checks = verify_release(out)  # would allocate 7.45 GiB for the expected set numbers
    detail = by_name(checks)["files/bounds"].detail  # refused before any file is read
    assert "sets x strata = 6000000000 rows is more than 50000000" in detail
    assert {c.topic for c in checks} == {"files"}
    manifest["sets"] = manifest["budget"]["sets"] = 1_000_000  # within the bounds
    set_manifest(out, manifest)
    detail = by_name(verify_release(out))["synthetic/synthetic"].detail
    assert "holds 6 rows, the manifest says 6000000" in detail


@pytest.mark.slow
def test_a_manifest_nested_too_deeply_is_one_line_and_exit_2(tmp_path):
    out = release(tmp_path)
    depth = 100_000
    (out / "manifest.json").write_text(
        '{"dpcounts_release_format": 4, "x": ' + "[" * depth + "]" * depth + "}"
    )
    code, stdout, stderr = run("verify", str(out))
    assert code == 2 and not stdout and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1 and "nested too deeply" in stderr
    (out / "manifest.json").write_text("[" * 10 + "]" * 10)  # JSON, not a manifest
    assert run("verify", str(out))[0] == 2


@pytest.mark.slow
def test_a_table_symlinked_outside_the_folder_fails(tmp_path):
    out = release(tmp_path)
    outside = tmp_path / "elsewhere.parquet"
    (out / "synthetic.parquet").rename(outside)
    (out / "synthetic.parquet").symlink_to(outside)
    checks = verify_release(out)
    assert {"files/regular files", "files/synthetic sha256"} <= set(failures(checks))
    assert "synthetic.parquet" in by_name(checks)["files/regular files"].detail
    assert run("verify", str(out))[0] == 1


def _promise(out: Path, **budget) -> dict:
    """The manifest with ``budget`` changed and everything derived from it made consistent,
    the statement regenerated: only the numbers' own meaning can catch it."""
    from dpcounts.release.manifest import guarantee

    manifest = manifest_of(out)
    manifest["budget"].update(budget)
    b = manifest["budget"]
    manifest["prior"]["epsilon"] = b["epsilon_prior"]
    manifest["delta"]["per_set"] = b["delta_per_set"]
    manifest["delta"]["sampler_tv_target"] = b["delta_per_set"] / (
        1 + math.exp(b["epsilon_per_set"])
    )
    manifest["guarantee"] = guarantee(manifest["mechanism"], manifest["method"], b)
    return with_readme(out, manifest)


def with_readme(out: Path, manifest: dict) -> dict:
    """``manifest`` with the README written again from it and its SHA-256 relisted, as a
    careful forger would: then only the manifest's own checks can catch the edit."""
    from dpcounts.release.readme import ENTRY, readme_text

    path = out / manifest["files"][ENTRY]["path"]
    path.write_text(readme_text(manifest), encoding="utf-8")
    manifest["files"][ENTRY]["sha256"] = sha256_file(path)
    return manifest


@pytest.mark.parametrize(
    ("budget", "why"),
    [
        (dict(epsilon_prior=-1.5, epsilon_total=0.5), "epsilon_prior -1.5 is negative"),
        (dict(delta_total=-1e-12, delta_per_set=-1e-12), "delta_total -1e-12 is not > 0"),
    ],
    ids=["sets calibrated at 2 claim 0.5", "negative delta"],
)
def test_every_number_of_the_promise_is_checked(tmp_path, budget, why):
    out = release(tmp_path, epsilon=2.0)
    set_manifest(out, _promise(out, **budget))
    checks = verify_release(out)
    assert failures(checks) == ["promise/numbers"]
    assert why in by_name(checks)["promise/numbers"].detail
    assert run("verify", str(out))[0] == 1


@pytest.mark.slow
def test_a_rewritten_statement_fails(tmp_path):
    out = release(tmp_path, epsilon=2.0)
    manifest = manifest_of(out)
    manifest["guarantee"]["statement"] = manifest["guarantee"]["statement"].replace("(2,", "(0.5,")
    set_manifest(out, with_readme(out, manifest))
    checks = verify_release(out)
    assert failures(checks) == ["promise/statement"]
    assert "guarantee.statement" in by_name(checks)["promise/statement"].detail


@pytest.mark.slow
def test_keys_are_coded_by_the_values_the_rows_hold_not_the_dictionary(tmp_path):
    """The hyperparameters' text keys are coded once per value of their Parquet dictionary:
    a value of the dictionary that no row holds (here a text, not a number) changes
    neither how the keys compare (numbers, 9 before 10) nor the comparison of the sets;
    a stratum repeated is still counted."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = release(tmp_path)
    manifest = manifest_of(out)
    codes = [str(c) for c in range(8, 14)]  # 10 to 13 sort before 8 and 9 as text
    synthetic = read(out, "synthetic")
    synthetic["code"] = codes * manifest["sets"]
    rewrite(out, "synthetic", synthetic)
    path = out / manifest["files"]["hyperparameters"]["path"]

    def write(hyper_codes: list[str]) -> list:
        table = pq.read_table(path)
        dictionary = pa.array(["x", *sorted(set(hyper_codes))])  # "x": no row's value
        indices = pa.array([dictionary.to_pylist().index(c) for c in hyper_codes], pa.int32())
        column = pa.DictionaryArray.from_arrays(indices, dictionary)
        table = table.set_column(table.schema.get_field_index("code"), "code", column)
        pq.write_table(table, path)
        written = pq.ParquetFile(path, read_dictionary=["code"]).read().column("code")
        assert "x" in written.chunk(0).dictionary.to_pylist()  # kept in the file
        listed = manifest_of(out)
        listed["files"]["hyperparameters"]["sha256"] = sha256_file(path)
        (out / "manifest.json").write_text(json.dumps(listed, indent=2))
        return verify_release(out)

    names = by_name(write(codes))
    for name in ("synthetic/order", "synthetic/strata", "hyperparameters/columns"):
        assert names[name].status == OK, names[name].detail
    names = by_name(write([codes[0], *codes[:-1]]))  # the first stratum twice
    assert "1 row(s) repeat the keys of another" in names["hyperparameters/columns"].detail
    assert names["synthetic/strata"].status == FAIL
    synthetic["code"] = [codes[1], codes[0], *codes[2:]] * manifest["sets"]
    rewrite(out, "synthetic", synthetic)
    names = by_name(write([codes[1], codes[0], *codes[2:]]))  # 9 before 8: in no order
    assert names["synthetic/strata"].status == OK
    assert names["synthetic/order"].status == FAIL
    assert names["hyperparameters/columns"].status == OK
