"""``dpcounts verify`` meets hostile folders in bounded work, and shows what it prints
(issue #34, items 3 and 4).

The corpus (:mod:`hostile_releases`) is built at test time from one valid release: each
folder must end in a FAILED verdict (or, for what is no release, one error line), never a
traceback, within 5 s of CPU beyond what verifying a tiny valid release takes (on a
loaded machine the wall time is several times the CPU time, so the CPU time is what is
bounded here) and a peak of 300 MB in all, the import of Python, pandas and pyarrow
(about 110 MiB) included. Every printed field is escaped: no control character reaches the
terminal, no forged line appears.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hostile_releases import ESCAPES, HOSTILE, manifest_of, set_manifest
from test_release_verify import by_name, failures, release

from dpcounts.verify import NotARelease, as_json, format_checks, report, verify_release
from dpcounts.verify.readers import MAX_STRATA

DPCOUNTS = Path(sys.executable).parent / "dpcounts"
#: Beyond the baseline (verifying a tiny valid release): CPU seconds.
EXTRA_CPU_SECONDS = 5.0
#: The peak resident memory of the whole verifying process.
PEAK_BYTES = 300 * 10**6
#: What must never reach a terminal raw.
RAW = ("\x1b", "\r", "\x07", "\u202e")

_MEASURE = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
result = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=600)
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": result.returncode, "stdout": result.stdout, "stderr": result.stderr,
                  "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
                  "rss": usage.ru_maxrss * 1024}))
"""


def measured(folder: Path) -> dict:
    """``dpcounts verify folder`` in a process of its own, with its wall and CPU time and
    peak resident memory (the wrapper's only child, so RUSAGE_CHILDREN is its own)."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(DPCOUNTS), "verify", str(folder)],
        capture_output=True, text=True, timeout=900, env=os.environ.copy(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """One valid release (with a ledger and private area of its own) and its baseline."""
    base = tmp_path_factory.mktemp("hostile")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DPCOUNTS_LEDGER", str(base / "ledger.jsonl"))
        patch.setenv("XDG_DATA_HOME", str(base / "data"))
        valid = release(base, "valid")
    return valid, measured(valid)


@pytest.mark.process
@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_folder_fails_in_one_line_within_bounds(corpus, tmp_path, name):
    valid, baseline = corpus
    assert baseline["code"] == 0, baseline["stdout"]
    out = tmp_path / "out"
    shutil.copytree(valid, out)
    HOSTILE[name](out)
    found = measured(out)
    text = found["stdout"] + found["stderr"]
    assert "Traceback" not in text
    assert not any(raw in text for raw in RAW), text[:2000]
    lines = found["stdout"].strip().splitlines()
    if found["code"] == 2:  # not a release at all: one error line
        assert not found["stdout"] and len(found["stderr"].strip().splitlines()) == 1
    else:
        assert found["code"] == 1 and lines[-1].startswith("FAILED:"), text[-2000:]
        assert not any(line.startswith("PASSED") for line in lines), text[:2000]
        assert len(lines) <= 60 and all(len(line) <= 700 for line in lines)
    extra_cpu = found["cpu"] - baseline["cpu"]
    assert extra_cpu <= EXTRA_CPU_SECONDS, (name, found["cpu"], baseline["cpu"])
    assert found["rss"] <= PEAK_BYTES, (name, found["rss"], baseline["rss"])


# --- in the library, without a process --------------------------------------------------------


def test_manifest_fields_are_shown_escaped_and_capped(tmp_path):
    out = release(tmp_path)
    manifest = manifest_of(out)
    manifest["mechanism"] = f"pg{ESCAPES}"
    manifest["method"] = "x" * 100_000
    set_manifest(out, manifest)
    checks, manifest = report(out)
    text = format_checks(checks, out, manifest)
    assert not any(raw in text for raw in RAW)
    lines = text.splitlines()
    assert lines[0].startswith(f"dpcounts verify {out}: pg\\n  ok      everyth")
    assert not any(line.startswith(("PASSED", "  ok      everything")) for line in lines)
    assert lines[-1].startswith("FAILED:") and max(map(len, lines)) <= 700
    data = json.loads(as_json(checks, out, manifest))  # JSON escapes by itself
    assert not any(raw in as_json(checks, out, manifest) for raw in RAW)
    assert data["passed"] is False


@pytest.mark.slow
def test_a_file_listed_under_another_name_fails_and_its_name_is_escaped(tmp_path):
    out = release(tmp_path)
    manifest = manifest_of(out)
    manifest["files"][f"notes{ESCAPES}"] = dict(manifest["files"]["hyperparameters"])
    set_manifest(out, manifest)
    checks, manifest = report(out)
    assert failures(checks) == ["files/names"]
    text = format_checks(checks, out, manifest)
    assert not any(raw in text for raw in RAW)
    assert not any(line.startswith("PASSED") for line in text.splitlines()[:-1])


@pytest.mark.slow
def test_an_unlisted_file_named_with_escapes_is_shown_escaped(tmp_path):
    out = release(tmp_path)
    (out / "notes\n  ok      fine\nPASSED: x\x1b[2J").write_text("x")
    checks, manifest = report(out)
    assert failures(checks) == ["files/nothing unlisted"]
    text = format_checks(checks, out, manifest)
    assert "\x1b" not in text and "notes\\n  ok      fine\\nPASSED: x\\x1b[2J" in text
    assert [line for line in text.splitlines() if line.startswith("PASSED")] == []


@pytest.mark.slow
def test_the_bounds_are_decided_from_the_manifest_before_a_file_is_read(tmp_path):
    out = release(tmp_path)
    (out / "synthetic.parquet").write_bytes(b"never read")
    manifest = manifest_of(out)
    manifest["strata"] = MAX_STRATA + 1  # and one set: more strata than the verifier holds
    set_manifest(out, manifest)
    checks = verify_release(out)
    assert failures(checks) == ["files/bounds"]
    assert f"strata {MAX_STRATA + 1} is more than" in by_name(checks)["files/bounds"].detail


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("huge texts", marks=pytest.mark.slow),
        "long keys",
        pytest.param("footer bomb", marks=pytest.mark.slow),
        pytest.param("nested column", marks=pytest.mark.slow),
    ],
)
def test_each_bomb_is_refused_by_the_bound_about_it(tmp_path, name):
    out = release(tmp_path)
    HOSTILE[name](out)
    checks = verify_release(out)
    why = {
        "huge texts": "decodes to",
        "long keys": "more than any key (1024)",
        "footer bomb": "a footer of",
        "nested column": "not numbers or text",
    }[name]
    topic = "hyperparameters/hyperparameters" if name == "huge texts" else "synthetic/synthetic"
    assert why in by_name(checks)[topic].detail


@pytest.mark.slow
def test_hyperparameters_that_repeat_a_stratum_fail(tmp_path):
    out = release(tmp_path)
    manifest = manifest_of(out)
    path = out / manifest["files"]["hyperparameters"]["path"]
    hyper = pd.read_parquet(path)
    keys = manifest["keys"]
    hyper.loc[1, keys] = hyper.loc[0, keys]  # still sorted, one stratum twice
    hyper.to_parquet(path, index=False)
    checks = verify_release(out)
    detail = by_name(checks)["hyperparameters/columns"]
    assert detail.status == "FAIL"
    assert "1 row(s) repeat the keys of another: not one row per stratum" in detail.detail


def test_what_is_not_a_release_stays_a_usage_error(tmp_path):
    out = release(tmp_path)
    HOSTILE["nested manifest"](out)
    with pytest.raises(NotARelease, match="nested too deeply"):
        verify_release(out)
