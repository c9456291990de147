"""An attribute that cannot be the data (:mod:`dpcounts.release.attribute_check`): an
attribute computed from the counts (a threshold of the counts, of a county's total or of its
rate) is refused before anything is spent, with the file, the column and the split it
makes; a public attribute, even one that moves the rates, a flag made from the public
population, and a table too small to tell, pass; the chance the refusal rests on is the
chance of random labels, checked by enumeration."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli as run

from dpcounts.ledger import Ledger
from dpcounts.release import ReleaseError, ReleaseRequest, build_release
from dpcounts.release.attribute_check import (
    CHANCE,
    PERSISTS,
    _log_chance,
    _separates,
    attribute_separation,
    refusal,
)


def table(rng: np.random.Generator, counties: int = 40, ages: int = 4) -> pd.DataFrame:
    """``counties`` x ``ages`` strata; a public urban flag on a third of the counties, whose
    rate is twice the others'; populations as the counties' vary."""
    county = np.repeat([f"c{i:02d}" for i in range(counties)], ages)
    urban = np.repeat(np.arange(counties) % 3 == 0, ages)
    population = np.repeat(rng.integers(500, 20_000, size=counties), ages)
    rate = np.where(urban, 0.004, 0.002) * np.tile(np.linspace(0.5, 2.0, ages), counties)
    return pd.DataFrame({"county": county, "age": np.tile([f"a{k}" for k in range(ages)],
                         counties), "urban": urban, "count": rng.poisson(rate * population),
                         "population": population})  # fmt: skip


def separation(frame: pd.DataFrame, **attributes):
    return attribute_separation(
        frame[["county", "age"]], pd.DataFrame(attributes), frame["count"], frame["population"]
    )


@pytest.mark.parametrize("seed", range(20))
def test_a_public_attribute_that_moves_the_rates_passes(seed):
    frame = table(np.random.default_rng(seed))
    assert separation(frame, urban=frame["urban"]) is None
    county_index = frame["county"].str[1:].astype(int)  # numeric, constant per county
    assert separation(frame, region=county_index // 8, index=county_index) is None


@pytest.mark.parametrize("seed", range(5))
def test_thresholds_of_the_counts_are_refused_where_there_are_enough_to_tell(seed):
    frame = table(np.random.default_rng(seed))
    y = frame["count"]
    for name, values in {"small": y < 10, "none": y == 0, "copy": y, "band": y // 25}.items():
        sizes = values.value_counts().to_numpy()
        found = separation(frame, **{name: values})
        if sizes.size < 2 or _log_chance(sizes, name != "none") >= math.log(CHANCE):
            assert found is None  # a handful of zeros: random labels split them so too
            continue
        assert found is not None and found.attribute == name and found.quantity == "counts"
        assert found.units == "the strata" and found.chance < CHANCE and found.persists <= PERSISTS


def test_a_flag_of_a_countys_total_or_rate_is_refused_and_its_population_is_not():
    frame = table(np.random.default_rng(1), counties=300)
    by_county = frame.groupby("county")
    total, people = by_county["count"].transform("sum"), by_county["population"].transform("sum")
    found = separation(frame, many=total > total.median())
    assert found.units == "the groups of county" and found.quantity == "counts"
    found = separation(frame, high=total / people > (total / people).median())
    assert found.units == "the groups of county" and found.quantity == "rates"
    assert separation(frame, populous=people > people.median()) is None  # public: explained


def test_a_table_too_small_to_tell_passes():
    frame = pd.DataFrame({"county": list("abcdefghij"), "age": "all",
                          "count": np.arange(10), "population": 1000})  # fmt: skip
    assert separation(frame, low=frame["count"] < 5) is None  # 2 5! 5! / 10! = 0.008


@pytest.mark.parametrize("sizes,ordered", [((2, 3), False), ((2, 2, 3), False),
                                           ((1, 2, 3), True), ((3, 4), True)])  # fmt: skip
def test_the_chance_is_that_of_random_labels_by_enumeration(sizes, ordered):
    x = np.arange(sum(sizes), dtype=float)  # distinct values
    labels = np.repeat(np.arange(len(sizes)), sizes)
    arrangements = set(itertools.permutations(labels))
    hits = sum(_separates(np.array(a), x, len(sizes), ordered) is not None for a in arrangements)
    assert math.isclose(hits / len(arrangements), math.exp(_log_chance(np.array(sizes), ordered)))


def test_the_refusal_names_the_file_the_column_the_split_and_the_override():
    frame = table(np.random.default_rng(0))
    text = refusal("deaths.csv", separation(frame, suppressed=frame["count"] < 10))
    assert text.startswith("deaths.csv: attribute 'suppressed' looks computed from these counts")
    assert "no overlap (True: " in text and "..9; False: 10.." in text and "100% of 100" in text
    assert text.endswith("--attributes-are-public-i-am-sure")


def request(tmp_path, frame, **changes) -> ReleaseRequest:
    source = tmp_path / "deaths.csv"
    frame.to_csv(source, index=False)
    fields = dict(input=source, out=tmp_path / "out", epsilon=2.0, mechanism="md",
                  dataset="attribute-check", keys=("county", "age"), attributes=("small",),
                  sets=1, test_seed=3, progress=False, strata="input", new_dataset=True,
                  private_dir=tmp_path / "private")  # fmt: skip
    return ReleaseRequest(**(fields | changes))


@pytest.mark.slow
def test_a_release_refuses_a_derived_attribute_spending_nothing_unless_overridden(
    tmp_path, private_ledger
):
    frame = table(np.random.default_rng(2)).drop(columns="urban")
    frame["small"] = frame["count"] < 10
    with pytest.raises(ReleaseError, match="attribute 'small' looks computed from these counts"):
        build_release(request(tmp_path, frame))
    assert not (tmp_path / "out").exists() and Ledger(private_ledger).entries() == []
    build_release(request(tmp_path, frame, attributes_are_public_i_am_sure=True))
    assert (tmp_path / "out" / "manifest.json").exists()
    (summary,) = (tmp_path / "private").rglob("summary.md")
    assert (
        "attributes ['small'], published exactly: the check that none splits the counts "
        "as a threshold of them would was OVERRIDDEN" in summary.read_text()
    )


@pytest.mark.slow
def test_the_command_line_refuses_and_calibrate_refuses_the_same(tmp_path, private_ledger):
    frame = table(np.random.default_rng(2)).drop(columns="urban")
    frame["small"] = frame["count"] < 10
    source = tmp_path / "deaths.csv"
    frame.to_csv(source, index=False)
    common = ["--input", str(source), "--keys", "county", "age", "--attributes", "small",
              "--strata", "input", "--mechanism", "md", "--epsilon", "2", "--dataset",
              "attribute-check", "--new-dataset"]  # fmt: skip
    for command in (["synthesize", *common, "--out", str(tmp_path / "out")],
                    ["calibrate", *common]):  # fmt: skip
        code, _, err = run(*command)
        assert code != 0 and "attribute 'small' looks computed" in err
        assert len(err.strip().splitlines()) <= 3
    assert not (tmp_path / "out").exists() and Ledger(private_ledger).entries() == []
    code, _, err = run("calibrate", *common, "--attributes-are-public-i-am-sure")
    assert code == 0, err
