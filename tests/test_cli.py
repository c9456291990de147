"""``dpcounts synthesize``, ``calibrate`` and ``ledger``: the command line, run in process
(``dpcounts.cli.main`` with the arguments as typed, output captured); the tests marked
``process`` run the installed console script itself (``python -m``, SIGTERM, concurrent
runs), as a user's shell would."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from workflow_helpers import filled_definition

import dpcounts
from dpcounts.cli import build_parser, main
from dpcounts.privacy.calibrate import calibrate
from dpcounts.release.manifest import validate
from dpcounts.release.request import NEIGHBOURS

BIN = Path(sys.executable).parent
DPCOUNTS = BIN / "dpcounts"
REPO = Path(__file__).resolve().parents[1]
WONDER_FIXTURE = REPO / "tests" / "fixtures" / "wonder" / "good.txt"

#: Six strata: two regions x three age bands; prior rates differ by age band (public rates,
#: not the table's own: those are refused, dpcounts.release.prior_check.group_fit).
STRATA = pd.DataFrame(
    {
        "region": ["north"] * 3 + ["south"] * 3,
        "age": ["young", "middle", "old"] * 2,
        "count": [3, 12, 40, 5, 9, 31],
        "population": [4000, 3000, 2000, 5000, 2500, 1500],
        "prior_rate": [0.0012, 0.003, 0.025] * 2,
    }
)
#: The keys and where their list of strata comes from (every region and age band appears),
#: and the dataset's name (required).
KEYS = ("--keys", "region", "age", "--strata", "cross-product", "--dataset", "counts")
#: Where the public prior rates come from: every prior the steward brings (the prior-rate
#: column here) is declared; md and a sanitised prior take none.
PRIOR = ("--prior-source", "national rates by age band, published 1999 (test)")


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run(*args: str, cwd: Path) -> Result:
    """``dpcounts ARGS`` in folder ``cwd``, in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit_:  # argparse: --help (0) and usage errors (2)
            code = exit_.code if isinstance(exit_.code, int) else 1
    return Result(code, out.getvalue(), err.getvalue())


def ok(*args: str, cwd: Path) -> Result:
    result = run(*args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture
def strata_csv(tmp_path) -> Path:
    path = tmp_path / "counts.csv"
    STRATA.to_csv(path, index=False)
    return path


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def test_console_script_is_installed():
    assert DPCOUNTS.exists(), "run `pip install --no-deps -e .` so the dpcounts script exists"


def test_help_explains_every_option_and_the_unit_of_privacy(tmp_path):
    """--help-all (--help shows a screen of the essential ones: test_cli_first_contact)."""
    text = ok("synthesize", "--help-all", cwd=tmp_path).stdout
    parser = build_parser()
    synthesize = parser._subparsers._group_actions[0].choices["synthesize"]
    for action in synthesize._actions:
        if not action.option_strings:
            continue
        assert action.help, f"{action.option_strings} has no help text"
        if action.help == argparse.SUPPRESS:  # a removed option, parsed only to say so
            assert action.option_strings[-1] not in text
            continue
        assert action.option_strings[-1] in text
    flat = " ".join(text.split())
    assert " ".join(NEIGHBOURS.split()) in flat
    assert "TOTAL privacy budget" in flat and "~/.local/share/dpcounts/private/" in flat
    assert "--seed" not in text.replace("--insecure-test-seed", "")


@pytest.mark.slow
def test_manifest_files_and_private_folder(strata_csv, tmp_path, private_area):
    out = tmp_path / "release"
    printed = ok(
        "synthesize", "--input", "counts.csv", *KEYS, "--epsilon", "2", "--mechanism",
        "truncated", "--sets", "4", *PRIOR, "--out", "release", "--quiet", cwd=tmp_path,
    ).stdout  # fmt: skip
    info = manifest(out)
    # the private folder: in the steward's area, named after the release; the CLI says where
    private = private_area / f"release-{info['seed_commitment'][:16]}"
    assert f"never publish them): {private}\n" in printed
    assert f"against synthesis with no privacy (private): {private / 'utility.md'}\n" in printed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.csv", "release"]
    validate(info)
    assert (info["mechanism"], info["method"], info["purpose"]) == (
        "truncated",
        "certified",
        "publication",
    )
    assert info["budget"]["epsilon_total"] == 2.0 and info["budget"]["epsilon_per_set"] == 0.5
    assert info["total"] == STRATA["count"].sum() and info["strata"] == len(STRATA)
    assert info["keys"] == ["region", "age"] and info["dpcounts_version"] == dpcounts.__version__
    for entry in info["files"].values():
        data = (out / entry["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    text = (out / "manifest.json").read_text()
    input_sha = hashlib.sha256(strata_csv.read_bytes()).hexdigest()
    assert input_sha not in text and "counts.csv" not in text and "command" not in info
    provenance = json.loads((private / "provenance.json").read_text())
    assert provenance["input_sha256"] == input_sha
    opened = f"{provenance['seed_commitment_salt']}:{provenance['root_key']}".encode()
    assert info["seed_commitment"] == hashlib.sha256(opened).hexdigest()
    summary = (private / "summary.md").read_text()
    assert "| north | 55 |" in summary  # the original total of region north, private only
    synthetic = pd.read_parquet(out / "synthetic.parquet")
    hyper = pd.read_parquet(out / "hyperparameters.parquet")
    assert synthetic.groupby("set")["count"].sum().tolist() == [STRATA["count"].sum()] * 4
    for _, rows in synthetic.groupby("set"):
        assert np.all(rows["count"].to_numpy() >= hyper["lower"].to_numpy())
        assert np.all(rows["count"].to_numpy() <= hyper["upper"].to_numpy())


@pytest.mark.slow
def test_private_dir_is_where_the_steward_says_and_never_in_the_release(
    strata_csv, tmp_path, private_area, private_ledger
):
    args = ["synthesize", "--input", "counts.csv", *KEYS, "--epsilon", "1", "--mechanism",
            "pg", *PRIOR, "--quiet"]  # fmt: skip
    printed = ok(*args, "--out", "rel", "--private-dir", "vault/rel", cwd=tmp_path).stdout
    assert "never publish them): vault/rel\n" in printed
    assert "(private): vault/rel/utility.md\n" in printed
    assert (tmp_path / "vault" / "rel" / "provenance.json").exists()
    assert not private_area.exists()
    refused = run(*args, "--out", "rel2", "--private-dir", "rel2/keys", cwd=tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "private folder rel2/keys lies inside the release folder rel2" in refused.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.csv", "rel", "vault"]
    assert len(private_ledger.read_text().splitlines()) == 1  # the refusal spent nothing


@pytest.mark.slow
def test_a_private_folder_left_beside_the_release_is_warned_about(strata_csv, tmp_path):
    """Private folders of earlier dpcounts versions sit beside their release: publishing the
    parent publishes them, so a release next to one says so."""
    (tmp_path / "rel.private").mkdir()
    (tmp_path / "rel.private" / "provenance.json").write_text('{"dpcounts_release_format": 3}')
    result = ok(
        "synthesize", "--input", "counts.csv", *KEYS, "--epsilon", "1", "--mechanism", "pg",
        *PRIOR, "--out", "rel", "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert "warning: rel.private, beside the release, is an earlier release's" in result.stderr
    quiet = ok(
        "synthesize", "--input", "counts.csv", *KEYS, "--epsilon", "1", "--mechanism", "pg",
        *PRIOR, "--out", "other", "--quiet", cwd=tmp_path,
    )  # fmt: skip
    assert quiet.stderr == ""


def test_abbreviated_options_are_refused(strata_csv, tmp_path):
    """`--see 42` once reached the manifest through argparse's abbreviations."""
    result = run(
        "synthesize", "--input", "counts.csv", *KEYS, "--epsilon", "1", "--mechanism", "md",
        "--insecure-test", "42", "--out", "r", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2 and "unrecognized arguments: --insecure-test" in result.stderr
    assert not (tmp_path / "r").exists()


def test_keys_are_required(strata_csv, tmp_path):
    result = run(
        "synthesize", "--input", "counts.csv", "--epsilon", "1", "--mechanism", "md",
        "--out", "r", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2 and "--keys" in result.stderr


def test_prior_rate_by_is_removed_with_a_pointer(strata_csv, tmp_path):
    result = run(
        "synthesize", "--input", "counts.csv", *KEYS, "--epsilon", "1", "--mechanism", "pg",
        "--prior-rate-by", "age", "--out", "r", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2 and "--sanitised-prior-by" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "r").exists()


@pytest.mark.process
def test_python_m_dpcounts_matches_the_script(strata_csv, tmp_path):
    args = ["synthesize", "--input", "counts.csv", *KEYS, "--epsilon", "1", "--mechanism", "pg"]
    args += [*PRIOR, "--insecure-test-seed", "4"]
    script = subprocess.run(
        [str(DPCOUNTS), *args, "--out", "script"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert script.returncode == 0, script.stderr
    result = subprocess.run(
        [sys.executable, "-m", "dpcounts", *args, "--out", "module"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "script" / "synthetic.parquet").read_bytes() == (
        tmp_path / "module" / "synthetic.parquet"
    ).read_bytes()


@pytest.mark.process
def test_a_reader_that_goes_away_gets_no_traceback(strata_csv, tmp_path):
    """`dpcounts ledger | head`: the pipe closes before dpcounts writes; it stops quietly."""
    ok("synthesize", "--input", "counts.csv", *KEYS, "--mechanism", "md", "--quiet",
       "--epsilon", "0.5", "--out", "a", cwd=tmp_path)  # fmt: skip
    process = subprocess.Popen([str(DPCOUNTS), "ledger"], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    process.stdout.close()  # the reader is gone before anything is written
    stderr = process.stderr.read()
    assert process.wait(timeout=120) == 141
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr


@pytest.mark.slow
def test_ledger_command_shows_the_spending(strata_csv, tmp_path):
    base = ["synthesize", "--input", "counts.csv", *KEYS, "--mechanism", "md", "--quiet"]
    ok(*base, "--epsilon", "0.5", "--out", "a", cwd=tmp_path)
    ok(*base, "--epsilon", "0.25", "--out", "b", cwd=tmp_path)
    refused = run(*base, "--epsilon", "1", "--budget", "1", "--out", "c", cwd=tmp_path)
    assert refused.returncode == 2 and "budget" in refused.stderr
    text = ok("ledger", cwd=tmp_path).stdout
    assert "counts.csv" in text and "0.75" in text


@pytest.mark.slow
def test_dataset_names_add_up_tables_and_the_ledger_command_shows_them(strata_csv, tmp_path):
    """Deaths by region x age, then by region: two tables of the same events, one name."""
    STRATA.groupby("region", as_index=False)[["count", "population"]].sum().to_csv(
        tmp_path / "by_region.csv", index=False
    )
    fine = ["--input", "counts.csv", *KEYS]
    coarse = ["--input", "by_region.csv", "--keys", "region", "--strata", "input"]
    common = ["--mechanism", "md", "--quiet", "--dataset", "deaths-2024", "--budget", "1"]
    ok("synthesize", *fine, *common, "--epsilon", "0.5", "--out", "a", cwd=tmp_path)
    ok("synthesize", *coarse, *common, "--epsilon", "0.25", "--out", "b", cwd=tmp_path)
    over = run("synthesize", *coarse, *common, "--epsilon", "0.5", "--out", "c", cwd=tmp_path)
    assert over.returncode == 2 and "budget exceeded for dataset deaths-2024" in over.stderr
    unnamed = [*coarse, "--mechanism", "md", "--quiet", "--epsilon", "0.1", "--out", "c"]
    bound = run("synthesize", *unnamed, "--dataset", "births-2024", cwd=tmp_path)
    assert bound.returncode == 2 and "Traceback" not in bound.stderr
    assert "release it with --dataset deaths-2024" in bound.stderr
    nameless = run("synthesize", *unnamed, cwd=tmp_path)  # names are required
    assert nameless.returncode == 2 and "--dataset NAME is required" in nameless.stderr
    assert not (tmp_path / "c").exists()

    text = ok("ledger", cwd=tmp_path).stdout
    rows = [line.split()[:5] for line in text.splitlines()[4:7]]
    assert rows[0] == ["(2", "tables)", "deaths-2024", "2", "0.75"]
    assert [r[0] for r in rows[1:]] == ["counts.csv", "by_region.csv"]
    assert [r[2:4] for r in rows[1:]] == [["1", "0.5"], ["1", "0.25"]]
    detail = ok("ledger", "--dataset", "deaths-2024", cwd=tmp_path).stdout
    assert "Releases:" in detail and "by_region.csv" in detail and "counts.csv" in detail
    assert ok("ledger", "--dataset", rows[1][1].strip(), cwd=tmp_path).stdout == detail
    bad = run("synthesize", *unnamed, "--dataset", "2024", cwd=tmp_path)
    assert bad.returncode == 2 and "--dataset: a dataset name is" in bad.stderr


@pytest.mark.slow
def test_wonder_export_with_county_map(tmp_path, private_folder):
    ok(
        "synthesize", "--input", str(WONDER_FIXTURE), "--wonder", "--keys", "county_code",
        "age_group_code", "--strata", "cross-product", "--sanitised-prior-by", "--epsilon", "1",
        "--dataset", "wonder-deaths",
        "--mechanism", "truncated",
        "--county-frame", str(REPO / "data" / "counties_1980.parquet"), "--out", "r",
        cwd=tmp_path,
    )  # fmt: skip
    info = manifest(tmp_path / "r")
    assert info["keys"] == ["county_code", "age_group_code"]
    assert info["total"] == 7 + 31 + 0 + 22  # the fixture's data rows; its Total row dropped
    assert (private_folder(tmp_path / "r") / "map_county_code.png").stat().st_size > 0
    synthetic = pd.read_parquet(tmp_path / "r" / "synthetic.parquet")
    assert synthetic["county_code"].tolist() == ["01001", "01003", "01005", "04001"]
    assert "crude_rate" not in synthetic.columns and "county" not in synthetic.columns


@pytest.mark.slow
def test_the_default_county_frame_is_the_projects_data_folder(tmp_path, private_folder):
    """Without --county-frame the map uses data/counties_1980.parquet of the folder dpcounts
    runs in; where there is none, the private summary says so and how to give one."""
    args = ["synthesize", "--input", str(WONDER_FIXTURE), "--wonder", "--keys", "county_code",
            "age_group_code", "--strata", "cross-product", "--sanitised-prior-by",
            "--epsilon", "1", "--mechanism", "pg", "--dataset", "wonder-deaths"]  # fmt: skip
    ok(*args, "--out", "here", cwd=tmp_path)
    summary = (private_folder(tmp_path / "here") / "summary.md").read_text()
    assert "county frame `data/counties_1980.parquet` not found" in summary
    assert "--county-frame" in summary
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "counties_1980.parquet").symlink_to(
        REPO / "data" / "counties_1980.parquet"
    )
    ok(*args, "--out", "there", cwd=tmp_path)
    assert (private_folder(tmp_path / "there") / "map_county_code.png").stat().st_size > 0


@pytest.mark.parametrize("frame", ["gpkg", "missing", "other counties"])
def test_a_county_frame_that_cannot_map_the_table_is_refused_before_spending(
    tmp_path, private_area, private_ledger, frame
):
    """A --county-frame the steward named that cannot draw the map (no county frame, not
    there, or without the table's counties) is refused before the budget is spent, naming
    the option and why: no release, no private folder, nothing in the ledger."""
    (tmp_path / "frame.gpkg").write_bytes(b"SQLite format 3\x00 not a parquet file")
    counties = gpd.read_parquet(REPO / "data" / "counties_1980.parquet")
    counties[counties["fips"].str.startswith("42")].to_parquet(tmp_path / "pa.parquet")
    given = {"gpkg": "frame.gpkg", "missing": "nowhere.parquet", "other counties": "pa.parquet"}
    refused = run("synthesize", "--input", str(WONDER_FIXTURE), "--wonder", "--keys",
                  "county_code", "age_group_code", "--strata", "cross-product",
                  "--sanitised-prior-by", "--epsilon", "1", "--mechanism", "pg", "--dataset",
                  "wonder-deaths", "--county-frame", given[frame], "--out", "r",
                  cwd=tmp_path)  # fmt: skip
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    message = {"gpkg": "could not be read as the county frame", "missing": "not found",
               "other counties": "FIPS code(s) of `county_code` are not counties of"}  # fmt: skip
    assert "--county-frame" in refused.stderr and message[frame] in refused.stderr
    assert "Nothing was spent" in refused.stderr
    assert not (tmp_path / "r").exists() and not private_area.exists()
    assert not private_ledger.exists() or not private_ledger.read_text().strip()


@pytest.mark.slow
def test_pennlc_by_county_and_age_with_a_sanitised_prior(tmp_path, private_folder):
    """The shipped Pennsylvania strata, summed over race and sex for eight counties."""
    strata = pd.read_parquet(REPO / "data" / "pennlc_strata.parquet")
    counties = pd.read_parquet(REPO / "data" / "pennsylvania_counties.parquet")
    chosen = sorted(strata["county"].unique())[:8]
    small = (
        strata[strata["county"].isin(chosen)]
        .groupby(["county", "age"], observed=True, as_index=False)[["cases", "population"]]
        .sum()
        .merge(counties[["county", "fips"]], on="county")
    )
    small["age"] = small["age"].astype(str)
    small.to_parquet(tmp_path / "pa.parquet", index=False)
    ok(
        "synthesize", "--input", "pa.parquet", "--count-column", "cases", "--keys", "fips",
        "county", "age", "--strata", "input", "--sanitised-prior-by", "age", "--dataset", "pa",
        "--prior-epsilon", "0.2",
        "--mechanism", "truncated", "--epsilon", "1.2", "--sets", "2", "--group-by", "county",
        "--county-frame", str(REPO / "data" / "counties_1980.parquet"), "--out", "pa",
        cwd=tmp_path,
    )  # fmt: skip
    out = tmp_path / "pa"
    info = manifest(out)
    assert info["strata"] == len(small) == 8 * 4
    prior = pd.read_parquet(out / "prior.parquet")
    hyper = pd.read_parquet(out / "hyperparameters.parquet")
    rates = dict(zip(prior["age"], prior["prior_rate"], strict=True))
    cal = calibrate(
        "truncated",
        0.5,
        int(small["cases"].sum()),
        hyper["population"].to_numpy(float),
        hyper["age"].map(rates).to_numpy(),
        method="certified",
    )
    np.testing.assert_allclose(hyper["a"].to_numpy(), cal.a, rtol=1e-12)
    np.testing.assert_array_equal(hyper["lower"].to_numpy(), cal.lower)
    assert (private_folder(tmp_path / "pa") / "map_fips.png").exists()


# --- bad input: exit 2, a message naming the file, column and keys, no folder left ------
def _set(column, row, value):
    def change(frame):
        frame[column] = frame[column].astype(object)
        frame.loc[row, column] = value

    return change


BAD_INPUTS = {
    "missing column": (
        lambda f: f.__delitem__("population"),
        ["counts.csv", "missing column", "population"],
    ),
    "no prior rates": (  # says where else the prior can come from
        lambda f: f.__delitem__("prior_rate"),
        ["counts.csv", "missing column", "prior_rate", "--sanitised-prior-by", "--prior FILE"],
    ),
    "negative count": (
        _set("count", 4, -2),
        ["counts.csv", "negative 'count'", "region='south'", "age='middle'", ">= 0"],
    ),
    "zero population": (
        _set("population", 2, 0),
        ["counts.csv", "'population' <= 0", "region='north'", "age='old'", "> 0"],
    ),
    "duplicate keys": (
        _set("age", 1, "young"),
        ["counts.csv", "duplicate key", "region='north'", "age='young'", "once"],
    ),
    "zero prior rate": (
        _set("prior_rate", 3, 0.0),
        ["counts.csv", "prior rate", "region='south'", "age='young'", "> 0"],
    ),
    "bounds cannot hold the total": (
        lambda f: f.__setitem__("prior_rate", 1e-7),
        ["counts.csv", "infeasible", "sum of upper bounds"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_fails_cleanly(tmp_path, case):
    change, fragments = BAD_INPUTS[case]
    frame = STRATA.copy()
    change(frame)
    frame.to_csv(tmp_path / "counts.csv", index=False)
    result = run(
        "synthesize", "--input", "counts.csv", *KEYS, "--epsilon", "1", "--mechanism",
        "truncated", *PRIOR, "--out", "release", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.csv"]


@pytest.mark.parametrize("epsilon", ["0", "-1", "nan", "inf", "abc"])
def test_bad_epsilon_fails_cleanly(strata_csv, tmp_path, epsilon):
    result = run(
        "synthesize", "--input", "counts.csv", *KEYS, f"--epsilon={epsilon}", "--mechanism",
        "md", "--out", "release", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--epsilon" in result.stderr and "> 0" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.csv"]


# --- concurrency and signals ----------------------------------------------------------------
def _large_input(tmp_path) -> Path:
    """A table of 2,000 strata (the release is held at a step, not caught by speed)."""
    rng = np.random.default_rng(5)
    n = 2_000
    population = rng.integers(2_000, 20_000, n)
    frame = pd.DataFrame(
        {
            "stratum": [f"s{i:05d}" for i in range(n)],
            "count": rng.poisson(population * 0.002),
            "population": population,
            "prior_rate": 0.002,
        }
    )
    path = tmp_path / "large.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.mark.process
def test_sigterm_cleans_up_without_a_traceback(tmp_path, private_ledger, private_area):
    _large_input(tmp_path)
    held = tmp_path.parent / f"{tmp_path.name}-held"
    process = subprocess.Popen(
        [str(DPCOUNTS), "synthesize", "--input", "large.csv", "--keys", "stratum", "--strata",
         "input", "--dataset", "large", "--epsilon", "1", "--mechanism", "truncated", "--sets",
         "3", *PRIOR, "--out", "r",
         "--quiet"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=os.environ | {"DPCOUNTS_TEST_HOLD": f"spent:{held}"},
    )  # fmt: skip
    # The release holds once the ledger records the spending (dpcounts.release.hold), so
    # the signal arrives at that step whatever the machine's speed.
    deadline = time.monotonic() + 300
    while not held.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert private_ledger.stat().st_size > 0
    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=120)
    assert process.returncode == 143, (stdout, stderr)
    assert "terminated; nothing was published" in stderr and "Traceback" not in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["large.csv"]
    assert not private_area.exists() or not any(private_area.iterdir())


@pytest.mark.process
def test_two_concurrent_runs_into_one_folder_cannot_both_succeed(
    strata_csv, tmp_path, private_area, private_folder
):
    args = [str(DPCOUNTS), "synthesize", "--input", "counts.csv", *KEYS, "--epsilon", "1"]
    args += ["--mechanism", "truncated", *PRIOR, "--out", "r", "--quiet"]
    runs = [
        subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    codes = sorted(p.wait(timeout=300) for p in runs)
    assert codes == [0, 2, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.csv", "r"]
    assert [private_folder(tmp_path / "r")] == list(private_area.iterdir())  # no partials


def test_calibrate_prints_the_promise_and_spends_nothing(
    strata_csv, tmp_path, private_ledger, private_area
):
    text = ok(
        "calibrate", "--input", "counts.csv", *KEYS, "--epsilon", "3", "--sets", "3",
        "--mechanism", "truncated", *PRIOR, "--hyperparameters", "h.csv", cwd=tmp_path,
    ).stdout  # fmt: skip
    assert "certified" in text and "3 set(s) x 1" in text and "moved from one stratum" in text
    hyper = pd.read_csv(tmp_path / "h.csv")
    cal = calibrate(
        "truncated", 1.0, int(STRATA["count"].sum()), hyper["population"], hyper["prior_rate"],
        method="certified",
    )  # fmt: skip
    np.testing.assert_allclose(hyper["a"], cal.a, rtol=1e-12)
    assert not private_ledger.exists() and not private_area.exists()
    nominal = run(
        "calibrate", "--input", "counts.csv", *KEYS, "--epsilon", "1", "--mechanism", "pg",
        *PRIOR, "--method", "paper", cwd=tmp_path,
    )  # fmt: skip
    assert nominal.returncode == 2 and "--allow-nominal" in nominal.stderr


@pytest.mark.slow
def test_calibrate_previews_the_ledger_account_and_never_writes_it(
    strata_csv, tmp_path, private_ledger, private_area
):
    """Before a release, the steward sees what the table (or its dataset) has spent, what
    it would have spent after it, and whether synthesize would refuse it; the ledger is
    read, never written."""
    common = ["--input", "counts.csv", *KEYS, "--mechanism", "pg", *PRIOR]
    ok("synthesize", *common, "--epsilon", "1", "--out", "r1", "--dataset", "deaths-1999",
       "--quiet", cwd=tmp_path)  # fmt: skip
    before = private_ledger.read_bytes()

    text = ok("calibrate", *common, "--epsilon", "0.5", "--dataset", "deaths-1999",
              "--budget", "2", cwd=tmp_path).stdout  # fmt: skip
    assert "dataset deaths-1999 (every table released under it) has spent epsilon 1, " in text
    assert "in 1 release(s); with this one: epsilon 1.5" in text
    assert "within the --budget 2 (epsilon 0.5 now, 0.5 left after it)" in text

    over = ok("calibrate", *common, "--epsilon", "1.5", "--dataset", "deaths-1999",
              "--budget", "2", cwd=tmp_path).stdout  # fmt: skip
    assert "synthesize would refuse this release: privacy budget exceeded" in over
    unnamed = ok("calibrate", *common, "--epsilon", "0.5", "--dataset", "births", cwd=tmp_path)
    unnamed = unnamed.stdout
    assert "synthesize would refuse this release: table" in unnamed
    assert "was released under --dataset deaths-1999" in unnamed
    assert private_ledger.read_bytes() == before

    fresh = tmp_path / "fresh.jsonl"
    text = ok("calibrate", *common, "--epsilon", "0.5", "--ledger", str(fresh),
              cwd=tmp_path).stdout  # fmt: skip
    assert "has spent epsilon 0, delta 0 in 0 release(s); with this one: epsilon 0.5" in text
    assert not fresh.exists()


# --- fractional counts: refused, or rounded with --rounding nearest ----------------------
#: Three fractional counts (rows 1, 4, 5): 12.5 and 9.5 are ties, 31.4 is not.
FRACTIONAL = STRATA.assign(count=[3, 12.5, 40, 5, 9.5, 31.4])


def test_fractional_counts_are_refused_naming_the_rounding_option(tmp_path):
    FRACTIONAL.to_csv(tmp_path / "counts.csv", index=False)
    for command in ("synthesize", "calibrate"):
        result = run(
            command, "--input", "counts.csv", *KEYS, "--epsilon", "1", "--mechanism", "md",
            *(["--out", "release"] if command == "synthesize" else []), cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == 2, result.stderr
        for fragment in ("counts.csv", "fractional counts in 'count' at 3 strata",
                         "(region='north', age='middle')", "(region='south', age='old')",
                         "12.5", "--rounding nearest", "Traceback"):  # fmt: skip
            # the strata, never their confidential counts (issue #26)
            shown = fragment not in ("Traceback", "12.5")
            assert (fragment in result.stderr) == shown, (fragment, command)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.csv"]


@pytest.mark.slow
def test_rounding_nearest_releases_the_rounded_table(tmp_path, private_folder):
    """--rounding nearest is a preprocessing and nothing else: the release equals, byte for
    byte, the release of the table rounded half to even beforehand (same test seed)."""
    FRACTIONAL.to_csv(tmp_path / "counts.csv", index=False)
    rounded = FRACTIONAL.assign(count=[round(c) for c in FRACTIONAL["count"]])  # half to even
    assert rounded["count"].tolist() == [3, 12, 40, 5, 10, 31]
    rounded.to_csv(tmp_path / "whole.csv", index=False)
    args = [*KEYS, "--epsilon", "1", "--mechanism", "truncated", *PRIOR, "--insecure-test-seed",
            "9", "--quiet"]  # fmt: skip
    said = ok("synthesize", "--input", "counts.csv", *args, "--rounding", "nearest", "--out",
              "a", cwd=tmp_path).stdout  # fmt: skip
    whole_said = ok("synthesize", "--input", "whole.csv", *args, "--out", "b", cwd=tmp_path).stdout
    # the steward is told, on a line marked private, what the rounding did to the total
    assert "rounded 3 fractional count(s) half to even: total 101.4 before, 101 after" in said
    assert "private" in said.splitlines()[-1] and "round" not in whole_said
    for name in ("synthetic.parquet", "hyperparameters.parquet"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()

    info, whole = manifest(tmp_path / "a"), manifest(tmp_path / "b")
    validate(info)
    assert info["total"] == rounded["count"].sum()
    assert info["rounding"]["mode"] == "nearest" and whole["rounding"]["mode"] == "refuse"
    assert "rounded table" in info["rounding"]["statement"]
    assert "3" not in json.dumps(info["rounding"])  # how many were rounded stays private
    provenance = json.loads((private_folder(tmp_path / "a") / "provenance.json").read_text())
    assert provenance["rounding"] == {"mode": "nearest", "strata_rounded": 3,
                                      "total_before": 101.4, "total_after": 101}  # fmt: skip
    assert "101.4" not in json.dumps(info)  # the totals before rounding stay private
    summary = (private_folder(tmp_path / "a") / "summary.md").read_text()
    assert "3 fractional count(s) rounded half to even" in summary
    assert "total 101.4 before, 101 after" in summary

    text = ok("calibrate", "--input", "counts.csv", *args[:-3], "--rounding", "nearest",
              cwd=tmp_path).stdout  # fmt: skip
    assert "3 fractional count(s) rounded" in text and f"total {rounded['count'].sum()}" in text
    assert "total 101.4 before, 101 after" in text


def test_the_cli_and_the_study_stage_round_and_refuse_alike(tmp_path):
    """One rule (dpcounts.data.rounding) for `dpcounts synthesize` and studies.<name>.rounding."""
    from dpcounts.release import ReleaseError, ReleaseRequest, load_strata
    from dpcounts.studies.stage.table import StudyDataError, load_study_table

    FRACTIONAL.to_csv(tmp_path / "counts.csv", index=False)
    spec = {"table": "counts.csv", "keys": ["region", "age"], "count": "count",
            "population": "population", "arms": {"md": ["paper"]}, "epsilons": [1.0],
            "sets": 1, "sets_per_job": 1, "epsilons_per_job": 1}  # fmt: skip
    request = ReleaseRequest(input=tmp_path / "counts.csv", out=tmp_path / "o", epsilon=1.0,
                             dataset="d",
                             mechanism="md", keys=("region", "age"),
                             strata="cross-product")  # fmt: skip
    with pytest.raises(ReleaseError) as cli_error:
        load_strata(request)
    with pytest.raises(StudyDataError) as study_error:
        load_study_table(filled_definition("s", spec, base=tmp_path))

    def strip(error):
        return str(error.value).split("; expected")[0].split(": ", 1)[1]

    assert strip(cli_error) == strip(study_error)  # the same strata, values and wording
    assert "--rounding nearest" in str(cli_error.value)
    assert "studies.s.rounding: nearest" in str(study_error.value)

    strata = load_strata(replace(request, rounding="nearest"))
    study = load_study_table(filled_definition("s", {**spec, "rounding": "nearest"}, tmp_path))
    expected = {(r, a): round(c) for r, a, c in
                FRACTIONAL[["region", "age", "count"]].itertuples(index=False)}  # fmt: skip
    keys = list(strata.keys.itertuples(index=False, name=None))
    assert strata.counts.tolist() == [expected[k] for k in keys] and strata.rounded == 3
    assert study.set_index(["region", "age"])["count"].to_dict() == expected


@pytest.mark.slow
def test_set_budget_and_calibrate_predicts_a_public_refusal(strata_csv, tmp_path, private_ledger):
    """dpcounts ledger --set-budget stores a budget every release is checked against; with a
    sanitised prior, calibrate refuses what synthesize refuses before spending (#26)."""
    said = ok("ledger", "--set-budget", "counts", "1", cwd=tmp_path).stdout
    assert "budget epsilon = 1 stored" in said
    base = ["--input", "counts.csv", *KEYS, "--mechanism", "pg", "--quiet"]
    ok("synthesize", *base, *PRIOR, "--epsilon", "0.75", "--out", "a", cwd=tmp_path)
    over = run("synthesize", *base, *PRIOR, "--epsilon", "0.5", "--out", "b", cwd=tmp_path)
    assert over.returncode == 2 and "of the budget epsilon = 1" in over.stderr
    raised = run("ledger", "--set-budget", "counts", "2", cwd=tmp_path)
    assert raised.returncode == 2 and "never raised" in raised.stderr
    before = private_ledger.read_bytes()
    STRATA.drop(columns="prior_rate").to_csv(strata_csv, index=False)
    sanitised = [*base[:-1], "--sanitised-prior-by", "region", "--epsilon", "0.2",
                 "--delta", "1e-40"]  # fmt: skip
    predicted = run("calibrate", *sanitised, cwd=tmp_path)
    refused = run("synthesize", *sanitised, "--out", "c", cwd=tmp_path)
    assert predicted.returncode == refused.returncode == 2
    message = refused.stderr.split("error: ", 1)[1]
    assert "cannot calibrate" in message and message == predicted.stderr.split("error: ", 1)[1]
    assert private_ledger.read_bytes() == before and not (tmp_path / "c").exists()
