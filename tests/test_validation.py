"""Strata validation: each rule rejects what it should, names source and key, passes good data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpcounts.data.validation import validate_strata


def strata(**overrides) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "fips": ["01001", "01003", "01005"],
            "count": [3, 0, 12],
            "population": [1000, 250, 4000],
        }
    )
    for column, values in overrides.items():
        frame[column] = values
    return frame


def test_good_strata_pass_and_are_returned_unchanged():
    frame = strata()
    assert validate_strata(frame, source="x.csv") is frame


@pytest.mark.parametrize(
    ("overrides", "fragments"),
    [
        ({"count": [3, -1, 12]}, ["deaths.csv", "negative 'count'", "fips='01003'", ">= 0"]),
        ({"count": [3, 1.5, 12]}, ["deaths.csv", "non-integer", "fips='01003'", "whole"]),
        ({"count": [3, np.nan, 12]}, ["deaths.csv", "missing 'count'", "fips='01003'"]),
        ({"count": pd.array([3, None, 12], dtype="Int64")}, ["missing 'count'", "fips='01003'"]),
        ({"count": ["3", "x", "12"]}, ["deaths.csv", "not numeric", "fips='01003'"]),
        ({"population": [1000, 0, 4000]}, ["deaths.csv", "<= 0", "fips='01003'", "> 0"]),
        ({"population": [1000, 250, -5]}, ["deaths.csv", "<= 0", "fips='01005'"]),
        ({"population": [np.nan, 250, 4000]}, ["deaths.csv", "missing 'population'", "01001"]),
        ({"fips": ["01001", "01003", "01001"]}, ["deaths.csv", "duplicate", "fips='01001'"]),
        ({"count": [0, 0, 0]}, ["deaths.csv", "sum to 0", "positive total"]),
    ],
)
def test_each_rule_names_source_key_and_expectation(overrides, fragments):
    with pytest.raises(ValueError) as info:
        validate_strata(strata(**overrides), source="deaths.csv")
    for fragment in fragments:
        assert fragment in str(info.value)


def test_missing_column_is_named():
    with pytest.raises(ValueError, match=r"deaths\.csv: missing column\(s\) \['population'\]"):
        validate_strata(strata().drop(columns="population"), source="deaths.csv")


def test_empty_frame_rejected():
    with pytest.raises(ValueError, match="no strata"):
        validate_strata(strata().iloc[:0], source="deaths.csv")


def test_multi_column_keys_report_every_key():
    frame = pd.DataFrame(
        {
            "county": ["a", "a", "b"],
            "age": ["35-44", "35-44", "35-44"],
            "deaths": [1, 2, 3],
            "pop": [10, 20, 30],
        }
    )
    with pytest.raises(ValueError, match=r"\(county='a', age='35-44'\)"):
        validate_strata(frame, count="deaths", population="pop", keys=("county", "age"))


def test_many_offenders_are_summarised():
    frame = pd.DataFrame(
        {"fips": [f"{i:05d}" for i in range(12)], "count": [-1] * 12, "population": [5] * 12}
    )
    with pytest.raises(ValueError, match="and 7 more"):
        validate_strata(frame)


@pytest.mark.slow
@given(
    st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(1, 10**7)),
        min_size=1,
        max_size=30,
    ).filter(lambda rows: sum(count for count, _ in rows) > 0)
)
def test_any_valid_strata_pass(rows):
    """Valid: whole counts >= 0 with a positive total, populations >= max(count, 1)."""
    frame = pd.DataFrame(
        {
            "fips": [f"{i:05d}" for i in range(len(rows))],
            "count": [count for count, _ in rows],
            "population": [count + extra for count, extra in rows],
        }
    )
    validate_strata(frame)


@pytest.mark.parametrize(
    ("count", "population", "message"),
    [
        (5, 4, r"'count' above 'population' at fips='00001'"),
        (float("inf"), 10, r"infinite 'count' at fips='00001'"),
        (1e20, 1e21, r"'count' beyond 2\^53 at fips='00001'"),
        (2.5, 10, r"non-integer 'count' at fips='00001'.*rounded by the data steward"),
        (1, float("inf"), r"infinite 'population' at fips='00001'"),
    ],
)
def test_values_out_of_range_are_refused(count, population, message):
    frame = pd.DataFrame(
        {"fips": ["00000", "00001"], "count": [1, count], "population": [10, population]}
    )
    with pytest.raises(ValueError, match=message):
        validate_strata(frame, source="x.csv")


@pytest.mark.slow
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "01", "1"]), st.integers(0, 3), st.booleans()),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from(["object", "string", "pyarrow"]),
)
def test_duplicate_keys_are_found_as_pandas_finds_them(rows, kind):
    """The coded duplicate check finds what ``frame.duplicated(keys)`` finds, whatever
    the columns' types (text held by Python or pyarrow, integers, booleans)."""
    from dpcounts.data.validation import _has_duplicates

    frame = pd.DataFrame(rows, columns=["k", "n", "b"])
    frame["k"] = frame["k"].astype({"object": object, "string": "string",
                                    "pyarrow": "string[pyarrow]"}[kind])  # fmt: skip
    for keys in (["k"], ["k", "n"], ["n", "b"], ["k", "n", "b"]):
        assert _has_duplicates(frame, keys) == frame.duplicated(subset=keys).any()


def test_duplicates_beyond_a_combined_code_are_found():
    """Keys whose combinations do not fit one 62-bit code, and sparse ones, are checked
    too (pandas' check, and a sort of the combined codes)."""
    from dpcounts.data.validation import _has_duplicates

    wide = pd.DataFrame({f"k{j}": np.arange(5000) % (4999 - j) for j in range(6)})
    assert not _has_duplicates(wide, list(wide.columns))
    assert _has_duplicates(pd.concat([wide, wide.iloc[[7]]]), list(wide.columns))
    sparse = pd.DataFrame({"a": np.arange(300), "b": np.arange(300) * 7})
    assert not _has_duplicates(sparse, ["a", "b"])
    assert _has_duplicates(pd.concat([sparse, sparse.iloc[[3]]]), ["a", "b"])
