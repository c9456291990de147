"""Nothing changes silently in a steward's table (issue #25, item 5).

Before: ``rounding: nearest`` lowered a table's total with no word outside a log line; a
place named "NA" (or "None", "null") was read as missing; numeric ids sorted as text
(1, 10, 100, 2); a key held by three rows was listed three times. Each test below failed
on that code.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from workflow_helpers import filled_definition

from dpcounts.data.rounding import RoundingReport, round_counts
from dpcounts.data.validation import key_order, read_table, validate_strata
from dpcounts.release import ReleaseError, ReleaseRequest, build_release, load_strata
from dpcounts.studies.stage.table import StudyDataError, load_study_table, read_study_table
from dpcounts.verify import failed, report

#: Places whose names pandas' default NA guessing read as missing values.
PLACES = ["NA", "N/A", "None", "null", "nan", "Oslo"]


def places_table(**changes) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "place": PLACES,
            "region": ["NA", "NA", "eu", "eu", "eu", "eu"],  # an attribute named NA too
            "count": ["4", "0", "9", "7", "3", "5"],
            "population": ["1000", "800", "1500", "900", "700", "1200"],
        }
    )
    return frame.assign(**changes)


def study_entry(path, **changes) -> dict:
    spec = {"table": str(path), "keys": ["place"], "count": "count", "population": "population",
            "attributes": ["region"], "arms": {"md": ["paper"]}, "epsilons": [1.0],
            "sets": 1, "sets_per_job": 1, "epsilons_per_job": 1}  # fmt: skip
    spec.update(changes)
    return spec


def release_request(path, out, keys=("place",), **changes) -> ReleaseRequest:
    fields = dict(input=path, out=out, epsilon=1.0, mechanism="md", keys=keys, test_seed=1,
                  dataset="test-data",
                  progress=False, strata="input", ledger=out.parent / "ledger.jsonl")  # fmt: skip
    fields.update(changes)
    return ReleaseRequest(**fields)


# ---- text stays text ---------------------------------------------------------------------
def test_a_csv_reads_words_as_text_and_only_an_empty_cell_as_missing(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("place,count\nNA,1\nnull,2\n,3\n")
    frame = read_table(path)
    assert frame["place"].tolist()[:2] == ["NA", "null"] and frame["place"].isna().tolist() == [
        False,
        False,
        True,
    ]


def test_a_place_named_na_stays_a_place_through_a_study(tmp_path):
    path = tmp_path / "places.csv"
    places_table().to_csv(path, index=False)
    strata = load_study_table(filled_definition("s", study_entry(path)))
    assert sorted(strata["place"]) == sorted(PLACES)
    assert strata.set_index("place").loc["NA", "count"] == 4
    assert strata.set_index("place").loc["NA", "region"] == "NA"


def test_a_place_named_na_stays_a_place_through_a_release(tmp_path):
    path = tmp_path / "places.csv"
    places_table().drop(columns="region").to_csv(path, index=False)
    build_release(release_request(path, tmp_path / "out"))
    synthetic = pd.read_parquet(tmp_path / "out" / "synthetic.parquet")
    assert synthetic["place"].tolist() == sorted(PLACES)  # text order: no place is a number
    assert not failed(report(tmp_path / "out")[0])


def test_a_count_of_na_is_refused_naming_column_stratum_and_expectation(tmp_path):
    path = tmp_path / "places.csv"
    table = places_table(count=["4", "NA", "9", "7", "3", "5"])
    table.to_csv(path, index=False)
    with pytest.raises(ValueError) as study:  # the shared validator's ValueError
        load_study_table(filled_definition("s", study_entry(path)))
    table.drop(columns="region").to_csv(path, index=False)  # a release takes no attribute
    with pytest.raises(ReleaseError) as release:
        load_strata(release_request(path, tmp_path / "out"))
    for error in (study, release):
        message = str(error.value)
        assert "column 'count' is not numeric at place='N/A' (first value 'NA')" in message
        assert "expected numbers" in message and "\n" not in message


def test_an_empty_key_or_attribute_cell_names_the_column_and_the_file_lines(tmp_path):
    path = tmp_path / "places.csv"
    table = places_table(place=["a", "", "c", "d", "", "f"])
    table.to_csv(path, index=False)
    with pytest.raises(StudyDataError, match=r"places.csv: column 'place' is empty at line"):
        load_study_table(filled_definition("s", study_entry(path)))
    table.drop(columns="region").to_csv(path, index=False)
    with pytest.raises(
        ReleaseError, match=r"places.csv: column 'place' is empty at line\(s\) 3, 6;"
    ):
        load_strata(release_request(path, tmp_path / "out"))

    places_table(region=["", "x", "x", "x", "x", "x"], place=list("abcdef")).to_csv(
        path, index=False
    )
    with pytest.raises(StudyDataError, match=r"column 'region' is empty at line\(s\) 2; expected"):
        load_study_table(filled_definition("s", study_entry(path)))

    many = pd.DataFrame({"place": [""] * 10 + ["k"], "count": 1, "population": 10})
    many.to_csv(path, index=False)
    with pytest.raises(ReleaseError, match=r"line\(s\) 2, 3, 4, 5, 6, 7, 8, 9 and 2 more;"):
        load_strata(release_request(path, tmp_path / "out"))


# ---- rounding reports --------------------------------------------------------------------
def test_round_counts_reports_the_strata_changed_and_the_totals():
    frame = pd.DataFrame({"k": list("abcd"), "count": [1.5, 2.5, 3, 4.4]})
    rounded, done = round_counts(frame, count="count", keys=["k"], rounding="nearest",
                                 source="t", option="o")  # fmt: skip
    assert rounded["count"].tolist() == [2, 2, 3, 4]  # half to even
    assert done == RoundingReport("nearest", 4, 3, 11.4, 11)
    assert done.describe() == (
        "rounding nearest changed 3 of 4 strata (half to even): total 11.4 before, 11 after "
        "(-3.51%)"
    )
    whole = frame.assign(count=[1, 2, 3, 4])
    _, kept = round_counts(whole, count="count", keys=["k"], rounding="refuse", source="t",
                           option="o")  # fmt: skip
    assert kept.as_dict() == {"mode": "refuse", "strata_changed": 0, "total_before": 10,
                              "total_after": 10}  # fmt: skip


def test_the_study_reports_what_was_read_and_done_to_its_table(tmp_path):
    frame = pd.DataFrame(
        {
            "id": ["1", "2", "10", "100", "3", "1", "2"],
            "year": ["2020"] * 5 + ["2021"] * 2,
            "count": [1.5, 2.5, 3, 4.4, 0, 1, 1],
            "population": [100, 100, 100, 100, 0, 100, 100],
        }
    )
    path = tmp_path / "t.csv"
    frame.to_csv(path, index=False)
    spec = study_entry(path, keys=["id"], attributes=[], rows={"year": 2020}, rounding="nearest")
    strata, table = read_study_table(filled_definition("s", spec))
    assert strata["count"].tolist() == [2, 2, 3, 4]  # ids 1, 2, 10, 100
    assert table["rows_read"] == 7 and table["rows_selected"] == 5
    assert table["rows_selection"] == {"year": ["2020"]}
    assert table["empty_strata_dropped"] == 1 and table["strata"] == 4 and table["total"] == 11
    assert table["rounding"] == {"mode": "nearest", "strata_changed": 3, "total_before": 11.4,
                                 "total_after": 11}  # fmt: skip
    assert table["key_order"] == {"id": "text as number"}
    assert table["warnings"] == [
        f"{path} (studies.s): rounding nearest changed 3 of 5 strata (half to even): total "
        "11.4 before, 11 after (-3.51%)"
    ]
    json.dumps(table)  # written as table.json

    frame["count"] = [2, 2, 3, 4, 0, 1, 1]
    frame.to_csv(path, index=False)
    _, table = read_study_table(filled_definition("s", spec))
    assert table["rounding"]["strata_changed"] == 0 and table["warnings"] == []


# ---- numeric keys sort numerically -------------------------------------------------------
def test_key_order_sorts_a_column_of_numbers_numerically_and_any_other_as_text():
    frame = pd.DataFrame(
        {
            "id": ["10", "2", "1", "100", "01", "2", "1"],
            "age": ["85+", "0-4", "5-9", "0-4", "0-4", "10-14", "0-4"],
        }
    )
    ordered = key_order(frame, ["id", "age"])
    assert ordered.values.tolist() == [
        ["01", "0-4"],  # '01' and '1' tie as numbers: the text breaks the tie
        ["1", "0-4"],
        ["1", "5-9"],
        ["2", "0-4"],
        ["2", "10-14"],  # ages are not all numbers: text order
        ["10", "85+"],
        ["100", "0-4"],
    ]
    assert all(isinstance(value, str) for value in ordered["id"])  # the keys stay text


def test_study_strata_with_numeric_ids_are_in_numeric_order(tmp_path):
    frame = pd.DataFrame({"id": ["100", "2", "10", "1"], "count": [1, 2, 3, 4],
                          "population": [10, 20, 30, 40]})  # fmt: skip
    path = tmp_path / "ids.csv"
    frame.to_csv(path, index=False)
    spec = study_entry(path, keys=["id"], attributes=[])
    strata = load_study_table(filled_definition("s", spec))
    assert strata["id"].tolist() == ["1", "2", "10", "100"]
    assert strata["count"].tolist() == [4, 2, 3, 1]


@pytest.mark.slow
def test_a_release_with_numeric_ids_is_in_numeric_order_and_verifies(tmp_path):
    frame = pd.DataFrame(
        {
            "id": ["100", "2", "10", "1", "01", "2"],
            "group": ["b", "b", "a", "a", "b", "a"],  # text beside the numeric column
            "count": [1, 2, 3, 4, 5, 6],
            "population": [10, 20, 30, 40, 50, 60],
        }
    )
    path = tmp_path / "ids.csv"
    frame.to_csv(path, index=False)
    for fmt in ("parquet", "csv"):
        out = tmp_path / fmt
        build_release(release_request(path, out, keys=("id", "group"), output_format=fmt))
        synthetic = read_table(out / f"synthetic.{fmt}")
        first = synthetic[synthetic["set"].astype(int) == 0]
        assert first[["id", "group"]].values.tolist() == [
            ["01", "b"], ["1", "a"], ["2", "a"], ["2", "b"], ["10", "a"], ["100", "b"]
        ]  # fmt: skip
        assert not failed(report(out)[0])


# ---- a duplicate key is reported once ----------------------------------------------------
def test_a_duplicate_key_is_named_once_with_its_number_of_rows():
    frame = pd.DataFrame(
        {
            "fips": ["01001", "01003", "01001", "01001", "01005", "01005"],
            "count": [1, 2, 3, 4, 5, 6],
            "population": [100] * 6,
        }
    )
    with pytest.raises(ValueError) as error:
        validate_strata(frame, source="d.csv")
    message = str(error.value)
    assert "d.csv: duplicate key(s) fips='01001' (3 rows); fips='01005' (2 rows);" in message
    assert message.count("01001") == 1


def test_a_duplicate_stratum_of_a_list_is_named_once(tmp_path):
    listed = pd.DataFrame({"place": ["a", "b", "a", "a"], "population": [10, 20, 30, 40]})
    listed.to_csv(tmp_path / "list.csv", index=False)
    counts = pd.DataFrame({"place": ["a", "b"], "count": [1, 2]})
    counts.to_csv(tmp_path / "counts.csv", index=False)
    request = release_request(tmp_path / "counts.csv", tmp_path / "out",
                              strata=tmp_path / "list.csv")  # fmt: skip
    with pytest.raises(ReleaseError) as error:
        load_strata(request)
    message = str(error.value)
    assert "list.csv: duplicate stratum/strata place='a' (3 rows); expected" in message
    assert message.count("'a'") == 1
