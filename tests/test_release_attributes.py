"""Public attribute columns in a plain release (issue #51, a new input column): ``dpcounts
synthesize --attributes COL`` publishes a public column of the strata beside the keys, the
manifest declares it, a sanitised prior may group by it, ``dpcounts verify`` checks it on
every set and ``dpcounts estimate`` groups by it; a column that is missing, empty or
another column's is refused naming the file and the column."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli as run

from dpcounts.release import ReleaseError, ReleaseRequest, build_release
from dpcounts.release.estimate import estimate
from dpcounts.verify import FAIL, failed, format_checks, verify_release


def counties(rng: np.random.Generator, n: int = 12) -> pd.DataFrame:
    """``n`` counties x 2 age bands; the first third urban, whose rate is twice the rest's."""
    county = np.repeat([f"c{i:02d}" for i in range(n)], 2)
    urban = np.repeat(np.arange(n) < n // 3, 2)
    population = rng.integers(2_000, 20_000, size=2 * n)
    rate = np.where(urban, 0.004, 0.002)
    return pd.DataFrame({"county": county, "age": np.tile(["0-49", "50+"], n),
                         "urban": urban, "count": rng.poisson(rate * population),
                         "population": population})  # fmt: skip


def request(tmp_path: Path, frame: pd.DataFrame, name: str = "out", **changes):
    source = tmp_path / f"{name}.csv"
    frame.to_csv(source, index=False)
    fields = dict(input=source, out=tmp_path / name, epsilon=2.0, mechanism="pg",
                  dataset="attributes", keys=("county", "age"), attributes=("urban",),
                  sanitised_prior_by=("urban",), prior_epsilon=0.2, sets=4, test_seed=5,
                  progress=False, strata="input",
                  private_dir=tmp_path / f"{name}-private")  # fmt: skip
    return ReleaseRequest(**(fields | changes))


def read(out: Path, name: str) -> pd.DataFrame:
    manifest = json.loads((out / "manifest.json").read_text())
    return pd.read_parquet(out / manifest["files"][name]["path"])


@pytest.mark.slow
def test_a_release_publishes_verifies_and_estimates_by_an_attribute(tmp_path, private_ledger):
    frame = counties(np.random.default_rng(0))
    out = tmp_path / "out"
    build_release(request(tmp_path, frame))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["attributes"] == ["urban"] and manifest["prior"]["groups"] == ["urban"]
    assert any("attribute column(s) ['urban']" in line for line in manifest["public"])
    synthetic, hyper = read(out, "synthetic"), read(out, "hyperparameters")
    assert list(synthetic.columns) == ["set", "county", "age", "urban", "count", "population"]
    assert list(hyper.columns[:3]) == ["county", "age", "urban"]
    # each stratum's attribute, on every set, is the input's
    truth = frame.astype({"urban": str}).set_index(["county", "age"])["urban"]
    published = synthetic.astype({"urban": str}).set_index(["county", "age"])["urban"]
    assert (published == truth.reindex(published.index)).all()
    checks = verify_release(out)
    assert not failed(checks), format_checks(checks, out)
    strata = next(c for c in checks if (c.topic, c.name) == ("synthetic", "strata"))
    assert "attributes ['urban']" in strata.detail

    table = estimate(out, ["urban"], method="combining")
    assert table["urban"].astype(str).str.lower().tolist() == ["false", "true"]
    # the combining rules' estimate is the mean over the sets of each group's rate
    merged = synthetic.astype({"urban": str})
    people = hyper.astype({"urban": str}).groupby("urban")["population"].sum()
    rates = merged.groupby(["set", "urban"])["count"].sum().unstack() / people * 1e5
    assert table["estimate"].to_numpy() == pytest.approx(rates.mean().to_numpy())
    ratio = estimate(out, [], measure="disparity", numerator={"urban": "true"},
                     denominator={"urban": "false"}, draws=2_000)  # fmt: skip
    assert ratio["lower"].iloc[0] < ratio["estimate"].iloc[0] < ratio["upper"].iloc[0]
    with pytest.raises(ValueError, match=r"keys \['county', 'age'\] or attributes \['urban'\]"):
        estimate(out, ["rural"])


@pytest.mark.slow
def test_verify_fails_an_attribute_that_changes_between_sets(tmp_path, private_ledger):
    from test_release_verify import rewrite

    out = tmp_path / "out"
    build_release(request(tmp_path, counties(np.random.default_rng(1))))
    synthetic = read(out, "synthetic")
    last = synthetic.index[synthetic["set"] == synthetic["set"].max()][0]
    flipped = {"True": "False", "False": "True"}  # a CSV input's flag is published as text
    synthetic.loc[last, "urban"] = flipped[synthetic.loc[last, "urban"]]  # one set's stratum
    rewrite(out, "synthetic", synthetic)
    checks = verify_release(out)
    assert [f"{c.topic}/{c.name}" for c in checks if c.status == FAIL] == ["synthetic/strata"]
    without = tmp_path / "without"
    build_release(request(tmp_path, counties(np.random.default_rng(7)), "without"))
    rewrite(without, "synthetic", read(without, "synthetic").drop(columns="urban"))
    assert "synthetic/columns" in [f"{c.topic}/{c.name}" for c in verify_release(without)
                                   if c.status == FAIL]  # fmt: skip


def test_a_release_without_attributes_publishes_none(tmp_path, private_ledger):
    frame = counties(np.random.default_rng(2)).drop(columns="urban")
    out = tmp_path / "out"
    build_release(request(tmp_path, frame, attributes=(), sanitised_prior_by=(),
                          prior_epsilon=None, sets=1))  # fmt: skip
    assert json.loads((out / "manifest.json").read_text())["attributes"] == []
    assert list(read(out, "synthetic").columns) == ["set", "county", "age", "count", "population"]


@pytest.mark.parametrize(
    "change, attributes, message",
    [
        (lambda f: f.drop(columns="urban"), ("urban",), r"missing column\(s\) \['urban'\]"),
        (lambda f: f.assign(urban=f["urban"].where(f.index != 3)), ("urban",),
         r"column 'urban' is empty at line\(s\) 5"),
        (lambda f: f, ("county",), r"--attributes 'county' \(a key"),
        (lambda f: f, ("population",), r"--attributes 'population' \(the count, population"),
        (lambda f: f, ("urban", "urban"), r"names \['urban'\] more than once"),
        (lambda f: f.drop(columns="urban"), (), r"column\(s\) \['urban'\] are not named|"
         r"--sanitised-prior-by column\(s\) \['urban'\]"),
    ],
)  # fmt: skip
def test_a_bad_attribute_is_refused_naming_the_file_and_column(tmp_path, change, attributes,
                                                               message):  # fmt: skip
    frame = change(counties(np.random.default_rng(3)))
    with pytest.raises(ReleaseError, match=message) as error:
        build_release(request(tmp_path, frame, attributes=attributes))
    assert "out.csv" in str(error.value)
    assert not (tmp_path / "out").exists()


def test_an_unnamed_urban_column_is_still_refused(tmp_path):
    """Without --attributes a public-looking column is refused as before: nothing is
    published unless the steward names it."""
    with pytest.raises(ReleaseError, match=r"column\(s\) \['urban'\] are not named"):
        build_release(request(tmp_path, counties(np.random.default_rng(4)), attributes=(),
                              sanitised_prior_by=(), prior_epsilon=None))  # fmt: skip


def test_a_list_of_strata_carries_the_attributes(tmp_path, private_ledger):
    """With --strata FILE the attributes are the list's, as its populations are: a list
    without them is refused naming it."""
    frame = counties(np.random.default_rng(5))
    listed = tmp_path / "list.csv"
    frame.drop(columns=["count", "urban"]).to_csv(listed, index=False)
    with pytest.raises(ReleaseError, match=r"list.csv: missing column\(s\) \['urban'\]"):
        build_release(request(tmp_path, frame[["county", "age", "count"]], strata=listed))
    frame.drop(columns="count").to_csv(listed, index=False)
    build_release(request(tmp_path, frame[["county", "age", "count"]], strata=listed, sets=1))
    assert "urban" in read(tmp_path / "out", "synthetic").columns


def test_the_command_line_takes_attributes_and_says_they_are_public(tmp_path):
    code, out, _ = run("synthesize", "--help")
    assert code == 0 and "--attributes" in out
    code, out, _ = run("synthesize", "--help-all")
    text = " ".join(out.split())
    assert "must not be computed from the counts" in text
    frame = counties(np.random.default_rng(6))
    frame.to_csv(tmp_path / "t.csv", index=False)
    code, _, err = run("synthesize", "--input", str(tmp_path / "t.csv"), "--keys", "county",
                       "age", "--attributes", "age", "--strata", "input", "--dataset", "x",
                       "--epsilon", "1", "--mechanism", "md",
                       "--out", str(tmp_path / "r"))  # fmt: skip
    assert code != 0 and "--attributes 'age' (a key" in err
    code, _, err = run("synthesize", "--study", "config/config.yaml:pennlc", "--attributes",
                       "urban", "--strata", "input", "--dataset", "x", "--epsilon", "1",
                       "--mechanism", "truncated", "--out", str(tmp_path / "s"))  # fmt: skip
    assert code == 2 and "--study decides --attributes (studies.NAME.attributes)" in err
