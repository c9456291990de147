"""``dpsynth synthesize``: real runs of the installed console script on small inputs."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpsynth
from dpsynth.cli import build_parser
from dpsynth.privacy.calibrate import calibrate

BIN = Path(sys.executable).parent
DPSYNTH = BIN / "dpsynth"
REPO = Path(__file__).resolve().parents[1]
WONDER_FIXTURE = REPO / "tests" / "fixtures" / "wonder" / "good.txt"

#: Six strata: two regions x three age bands; prior rates differ by age band.
STRATA = pd.DataFrame(
    {
        "region": ["north"] * 3 + ["south"] * 3,
        "age": ["young", "middle", "old"] * 2,
        "count": [3, 12, 40, 5, 9, 31],
        "population": [4000, 3000, 2000, 5000, 2500, 1500],
        "prior_rate": [0.001, 0.004, 0.02] * 2,
    }
)


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(DPSYNTH), *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def ok(*args: str, cwd: Path) -> subprocess.CompletedProcess:
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
    assert DPSYNTH.exists(), "run `pip install --no-deps -e .` so the dpsynth script exists"


def test_help_explains_every_option(tmp_path):
    text = ok("synthesize", "--help", cwd=tmp_path).stdout
    parser = build_parser()
    synthesize = parser._subparsers._group_actions[0].choices["synthesize"]
    for action in synthesize._actions:
        if not action.option_strings:
            continue
        assert action.help, f"{action.option_strings} has no help text"
        assert action.option_strings[-1] in text
    assert "manifest.json" in text and "private/" in text


def test_manifest_and_files(strata_csv, tmp_path):
    seed = 918273645546372819
    out = tmp_path / "release"
    ok(
        "synthesize", "--input", "counts.csv", "--epsilon", "2", "--mechanism", "truncated",
        "--method", "certified", "--sets", "3", "--seed", str(seed), "--out", "release",
        "--quiet", cwd=tmp_path,
    )  # fmt: skip
    info = manifest(out)
    assert info["mechanism"] == "truncated"
    assert info["method"] == "certified"
    assert info["epsilon"] == 2.0
    assert info["total"] == STRATA["count"].sum()
    assert info["strata"] == len(STRATA)
    assert info["sets"] == 3
    assert info["keys"] == ["region", "age"]
    assert info["dpsynth_version"] == dpsynth.__version__
    assert info["tail"] == pytest.approx(min(0.001, 1 / len(STRATA)))
    for entry in info["files"].values():
        data = (out / entry["path"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    # The seed and the input's hash are private: absent from the public manifest.
    text = (out / "manifest.json").read_text()
    input_sha = hashlib.sha256(strata_csv.read_bytes()).hexdigest()
    assert str(seed) not in text and input_sha not in text
    # A salted commitment: a bare hash of a small seed could be inverted by trying seeds.
    assert hashlib.sha256(str(seed).encode()).hexdigest() not in text
    assert "<private>" in info["command"]
    provenance = json.loads((out / "private" / "provenance.json").read_text())
    assert provenance["seed"] == seed
    assert provenance["input_sha256"] == input_sha
    opened = f"{provenance['seed_commitment_salt']}:{seed}".encode()
    assert info["seed_commitment"] == hashlib.sha256(opened).hexdigest()
    for name in info["private"]["files"]:
        assert (out / "private" / name).is_file()
    assert (out / "private" / "totals_by_region.png").stat().st_size > 0
    summary = (out / "private" / "summary.md").read_text()
    assert "| north | 55 |" in summary  # the original total of region north


def test_synthetic_sets_sum_to_total_within_bounds(strata_csv, tmp_path):
    ok(
        "synthesize", "--input", str(strata_csv), "--epsilon", "1", "--mechanism", "truncated",
        "--sets", "4", "--seed", "3", "--out", str(tmp_path / "r"), cwd=tmp_path,
    )  # fmt: skip
    synthetic = pd.read_parquet(tmp_path / "r" / "synthetic.parquet")
    hyper = pd.read_parquet(tmp_path / "r" / "hyperparameters.parquet")
    assert list(synthetic.columns) == ["set", "region", "age", "count", "population"]
    assert synthetic.groupby("set")["count"].sum().tolist() == [STRATA["count"].sum()] * 4
    for _, rows in synthetic.groupby("set"):
        assert rows[["region", "age"]].to_numpy().tolist() == (
            STRATA[["region", "age"]].to_numpy().tolist()
        )
        assert np.all(rows["count"].to_numpy() >= hyper["lower"].to_numpy())
        assert np.all(rows["count"].to_numpy() <= hyper["upper"].to_numpy())
    assert synthetic["population"].tolist() == STRATA["population"].tolist() * 4


@pytest.mark.parametrize(
    ("mechanism", "method"),
    [("md", "paper"), ("pg", "paper"), ("truncated", "paper"), ("truncated", "certified")],
)
def test_hyperparameters_equal_calibrate(strata_csv, tmp_path, mechanism, method):
    ok(
        "synthesize", "--input", str(strata_csv), "--epsilon", "1.5", "--mechanism", mechanism,
        "--method", method, "--seed", "1", "--out", str(tmp_path / "r"), cwd=tmp_path,
    )  # fmt: skip
    hyper = pd.read_parquet(tmp_path / "r" / "hyperparameters.parquet")
    prior = None if mechanism == "md" else STRATA["prior_rate"].to_numpy()
    cal = calibrate(
        mechanism,
        1.5,
        int(STRATA["count"].sum()),
        STRATA["population"].to_numpy(float),
        prior,
        method=method,
    )
    np.testing.assert_array_equal(hyper["a"].to_numpy(), cal.a)
    if mechanism != "md":
        np.testing.assert_array_equal(hyper["b"].to_numpy(), cal.b)
    if mechanism == "truncated":
        np.testing.assert_array_equal(hyper["lower"].to_numpy(), cal.lower)
        np.testing.assert_array_equal(hyper["upper"].to_numpy(), cal.upper)
    assert hyper[["region", "age"]].to_numpy().tolist() == (
        STRATA[["region", "age"]].to_numpy().tolist()
    )


def _release(tmp_path, name, *extra, input_path="counts.csv"):
    ok(
        "synthesize", "--input", input_path, "--epsilon", "1", "--mechanism", "pg",
        "--out", name, *extra, cwd=tmp_path,
    )  # fmt: skip
    return tmp_path / name


def test_fixed_seed_reproduces_the_release(strata_csv, tmp_path):
    first = _release(tmp_path, "a", "--sets", "5", "--seed", "11")
    second = _release(tmp_path, "b", "--sets", "5", "--seed", "11")
    other = _release(tmp_path, "c", "--sets", "5", "--seed", "12")
    for name in ("synthetic.parquet", "hyperparameters.parquet"):
        assert (first / name).read_bytes() == (second / name).read_bytes()
    a = pd.read_parquet(first / "synthetic.parquet")["count"]
    c = pd.read_parquet(other / "synthetic.parquet")["count"]
    assert not a.equals(c)


def test_set_k_does_not_depend_on_the_number_of_sets(strata_csv, tmp_path):
    two = pd.read_parquet(
        _release(tmp_path, "two", "--sets", "2", "--seed", "5") / "synthetic.parquet"
    )
    four = pd.read_parquet(
        _release(tmp_path, "four", "--sets", "4", "--seed", "5") / "synthetic.parquet"
    )
    pd.testing.assert_frame_equal(two, four[four["set"] < 2].reset_index(drop=True))


def test_fresh_seed_is_recorded_and_reproduces(strata_csv, tmp_path):
    fresh = _release(tmp_path, "fresh", "--sets", "3")
    seed = json.loads((fresh / "private" / "provenance.json").read_text())["seed"]
    assert seed.bit_length() > 64  # 128 random bits; below 2^64 with probability 2^-64
    again = _release(tmp_path, "again", "--sets", "3", "--seed", str(seed))
    assert (fresh / "synthetic.parquet").read_bytes() == (again / "synthetic.parquet").read_bytes()


def test_python_m_dpsynth_matches_the_script(strata_csv, tmp_path):
    script = _release(tmp_path, "script", "--seed", "4")
    result = subprocess.run(
        [sys.executable, "-m", "dpsynth", "synthesize", "--input", "counts.csv", "--epsilon",
         "1", "--mechanism", "pg", "--seed", "4", "--out", "module"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (script / "synthetic.parquet").read_bytes() == (
        tmp_path / "module" / "synthetic.parquet"
    ).read_bytes()


def test_refuses_a_non_empty_out_unless_forced(strata_csv, tmp_path):
    out = tmp_path / "r"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    result = run(
        "synthesize", "--input", "counts.csv", "--epsilon", "1", "--mechanism", "md",
        "--out", "r", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert "not empty" in result.stderr and "--force" in result.stderr
    assert (out / "keep.txt").read_text() == "precious"
    _release(tmp_path, "r", "--force")
    assert not (out / "keep.txt").exists()
    assert (out / "manifest.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.csv", "r"]


def test_csv_output_and_prior_file(tmp_path):
    STRATA.drop(columns="prior_rate").to_csv(tmp_path / "counts.csv", index=False)
    prior = STRATA[["age", "region", "prior_rate"]].iloc[::-1]  # other order, other columns
    prior.to_csv(tmp_path / "prior.csv", index=False)
    out = _release(tmp_path, "r", "--prior", "prior.csv", "--format", "csv", "--seed", "2")
    hyper = pd.read_csv(out / "hyperparameters.csv")
    assert hyper["prior_rate"].tolist() == STRATA["prior_rate"].tolist()
    synthetic = pd.read_csv(out / "synthetic.csv")
    assert synthetic["count"].sum() == STRATA["count"].sum()
    assert manifest(out)["files"]["synthetic"]["path"] == "synthetic.csv"


def test_prior_rate_by_groups(tmp_path):
    STRATA.drop(columns="prior_rate").to_csv(tmp_path / "counts.csv", index=False)
    out = _release(tmp_path, "r", "--prior-rate-by", "age", "--seed", "2")
    hyper = pd.read_parquet(out / "hyperparameters.parquet")
    by_age = STRATA.groupby("age")[["count", "population"]].sum()
    expected = (by_age["count"] / by_age["population"]).loc[STRATA["age"]].to_numpy()
    np.testing.assert_allclose(hyper["prior_rate"].to_numpy(), expected, rtol=1e-15)
    assert "by ['age']" in manifest(out)["prior"]


def test_wonder_export_with_county_map(tmp_path):
    out = _release(
        tmp_path, "r", "--wonder", "--prior-rate-by", "--seed", "8", input_path=str(WONDER_FIXTURE)
    )
    info = manifest(out)
    assert info["keys"] == ["county_code", "age_group_code"]
    assert info["count_column"] == "deaths"
    assert info["total"] == 7 + 31 + 0 + 22  # the fixture's data rows; its Total row dropped
    assert "map_county_code.png" in info["private"]["files"]
    synthetic = pd.read_parquet(out / "synthetic.parquet")
    assert synthetic["county_code"].tolist() == ["01001", "01003", "01005", "04001"]


def test_pennlc_aggregated_to_counties_by_age(tmp_path):
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
        "county", "age", "--prior-rate-by", "age", "--mechanism", "truncated", "--method",
        "paper", "--epsilon", "1", "--sets", "2", "--seed", "2002", "--group-by", "county",
        "--out", "pa", cwd=tmp_path,
    )  # fmt: skip
    out = tmp_path / "pa"
    info = manifest(out)
    assert info["total"] == small["cases"].sum()
    assert info["strata"] == len(small) == 8 * 4
    rates = small.groupby("age")["cases"].sum() / small.groupby("age")["population"].sum()
    cal = calibrate(
        "truncated",
        1.0,
        int(small["cases"].sum()),
        small["population"].to_numpy(float),
        rates.loc[small["age"]].to_numpy(),
    )
    hyper = pd.read_parquet(out / "hyperparameters.parquet")
    np.testing.assert_allclose(hyper["a"].to_numpy(), cal.a, rtol=1e-12)
    np.testing.assert_array_equal(hyper["lower"].to_numpy(), cal.lower)
    np.testing.assert_array_equal(hyper["upper"].to_numpy(), cal.upper)
    assert "map_fips.png" in info["private"]["files"]
    synthetic = pd.read_parquet(out / "synthetic.parquet")
    assert synthetic.groupby("set")["count"].sum().tolist() == [small["cases"].sum()] * 2


# --- bad input: exit 2, a message naming the file, column and keys, no folder left ------
def _bad(frame_change):
    frame = STRATA.copy()
    frame_change(frame)
    return frame


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
        ["counts.csv", "infeasible truncation bounds", "sum of upper bounds", "total"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_fails_cleanly(tmp_path, case):
    change, fragments = BAD_INPUTS[case]
    _bad(change).to_csv(tmp_path / "counts.csv", index=False)
    result = run(
        "synthesize", "--input", "counts.csv", "--epsilon", "1", "--mechanism", "truncated",
        "--method", "certified", "--out", "release", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.csv"]


@pytest.mark.parametrize("epsilon", ["0", "-1", "nan", "abc"])
def test_bad_epsilon_fails_cleanly(strata_csv, tmp_path, epsilon):
    result = run(
        "synthesize", "--input", "counts.csv", f"--epsilon={epsilon}", "--mechanism", "md",
        "--out", "release", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert "--epsilon" in result.stderr and "> 0" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.csv"]


def test_missing_input_file(tmp_path):
    result = run(
        "synthesize", "--input", "nowhere.csv", "--epsilon", "1", "--mechanism", "md",
        "--out", "release", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert "nowhere.csv: file not found" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_prior_file_missing_a_stratum(tmp_path):
    STRATA.drop(columns="prior_rate").to_csv(tmp_path / "counts.csv", index=False)
    STRATA[["region", "age", "prior_rate"]].iloc[1:].to_csv(tmp_path / "prior.csv", index=False)
    result = run(
        "synthesize", "--input", "counts.csv", "--prior", "prior.csv", "--epsilon", "1",
        "--mechanism", "pg", "--out", "release", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert "prior.csv" in result.stderr and "region='north', age='young'" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["counts.csv", "prior.csv"]
