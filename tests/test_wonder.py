"""CDC WONDER reader: fixtures in tests/fixtures/wonder/ (made-up numbers, WONDER layout)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dpcounts.data import read_wonder
from dpcounts.data.wonder import snake_case

FIXTURES = Path(__file__).parent / "fixtures" / "wonder"


def test_good_file_columns_and_types():
    frame = read_wonder(FIXTURES / "good.txt")
    assert list(frame.columns[:7]) == [
        "county",
        "county_code",
        "age_group",
        "age_group_code",
        "deaths",
        "population",
        "crude_rate",
    ]
    assert "notes" not in frame.columns
    assert str(frame["deaths"].dtype) == "Int64"
    assert str(frame["population"].dtype) == "Int64"
    assert frame["county_code"].tolist() == ["01001", "01003", "01005", "04001"]
    assert frame["deaths"].tolist() == [7, 31, 0, 22]
    assert frame["population"].tolist() == [3120, 9810, 2450, 6010]


def test_good_file_drops_total_note_rows_and_footer():
    frame = read_wonder(FIXTURES / "good.txt")
    # 4 county rows: the Total row, the note-only row and the footer are gone
    assert len(frame) == 4
    assert not frame["county"].str.contains("Dataset|Query|Caveats").any()


def test_zero_deaths_stay_zero_and_are_not_flagged():
    frame = read_wonder(FIXTURES / "good.txt").set_index("county_code")
    assert frame.loc["01005", "deaths"] == 0
    assert not frame.loc["01005", "suppressed"]


def test_unreliable_suffix_keeps_value_and_sets_flag():
    frame = read_wonder(FIXTURES / "good.txt").set_index("county_code")
    assert frame.loc["01001", "crude_rate"] == pytest.approx(224.4)
    assert frame.loc["01001", "rate_unreliable"]
    assert not frame.loc["01003", "rate_unreliable"]
    assert frame.loc["01003", "crude_rate"] == pytest.approx(316.0)


def test_keep_totals_flags_instead_of_dropping():
    frame = read_wonder(FIXTURES / "good.txt", keep_totals=True)
    assert frame["total"].sum() == 1
    total = frame[frame["total"]].iloc[0]
    assert total["deaths"] == 38
    assert total["population"] == 15380


def test_markers_become_missing_values_with_flags_never_zero():
    frame = read_wonder(FIXTURES / "suppressed.txt").set_index("county_code")
    kalawao = frame.loc["15005"]
    assert pd.isna(kalawao["deaths"]) and kalawao["suppressed"]
    assert pd.isna(kalawao["crude_rate"])
    assert kalawao["population"] == 40
    loving = frame.loc["48301"]
    assert pd.isna(loving["population"]) and loving["missing"] and loving["not_applicable"]
    assert not loving["suppressed"]
    arthur = frame.loc["31005"]
    assert pd.isna(arthur["crude_rate"]) and arthur["rate_unreliable"]
    harris = frame.loc["48201"]
    assert not (harris["suppressed"] or harris["missing"] or harris["not_applicable"])
    assert harris["deaths"] == 250
    # nothing was silently zeroed
    assert (frame["deaths"].dropna() > 0).all()


def test_crlf_and_bom_are_tolerated(tmp_path):
    text = (FIXTURES / "good.txt").read_text()
    target = tmp_path / "windows.txt"
    target.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    pd.testing.assert_frame_equal(read_wonder(target), read_wonder(FIXTURES / "good.txt"))


@pytest.mark.parametrize(
    ("name", "line", "fragment"),
    [
        ("malformed_field_count.txt", 3, "7 tab-separated fields; expected 8"),
        ("malformed_value.txt", 3, "'n/a'"),
        ("no_header.txt", 1, "no header row"),
        ("missing_column.txt", 1, "missing required column(s) ['Population']"),
    ],
)
def test_malformed_files_name_file_line_and_problem(name, line, fragment):
    with pytest.raises(ValueError) as info:
        read_wonder(FIXTURES / name)
    message = str(info.value)
    assert name in message
    assert f"line {line}:" in message
    assert fragment in message


def test_required_columns_can_be_relaxed():
    frame = read_wonder(FIXTURES / "missing_column.txt", required=("Deaths",))
    assert frame["deaths"].tolist() == [7]


def test_fractional_count_is_rejected(tmp_path):
    text = (FIXTURES / "good.txt").read_text().replace("\t31\t", "\t31.5\t")
    target = tmp_path / "fraction.txt"
    target.write_text(text)
    with pytest.raises(ValueError, match=r"fraction\.txt, line 3: column 'Deaths' holds '31\.5'"):
        read_wonder(target)


def test_garbage_rate_is_rejected(tmp_path):
    text = (FIXTURES / "good.txt").read_text().replace("316.0", "three hundred")
    target = tmp_path / "rate.txt"
    target.write_text(text)
    with pytest.raises(ValueError, match=r"line 3: column 'Crude Rate' holds 'three hundred'"):
        read_wonder(target)


def test_empty_file_fails(tmp_path):
    target = tmp_path / "empty.txt"
    target.write_text("\n\n")
    with pytest.raises(ValueError, match="empty.txt: no header row"):
        read_wonder(target)


def test_rows_after_footer_are_ignored_even_if_malformed(tmp_path):
    text = (FIXTURES / "good.txt").read_text() + "garbage\twith\ttoo\tfew\n"
    target = tmp_path / "tail.txt"
    target.write_text(text)
    assert len(read_wonder(target)) == 4


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("County Code", "county_code"),
        ("Age Group", "age_group"),
        ("Crude Rate", "crude_rate"),
        ("% of Total Deaths", "pct_of_total_deaths"),
        ("Crude Rate Lower 95% Confidence Interval", "crude_rate_lower_95_pct_confidence_interval"),
    ],
)
def test_snake_case(raw, expected):
    assert snake_case(raw) == expected


def test_the_footer_query_parameters_are_kept():
    frame = read_wonder(FIXTURES / "good.txt")
    query = frame.attrs["query"]
    assert query["Group By"] == "County; Age Group" and query["Show Totals"] == "True"
    assert query["Age Group"] == "35-44 years" and "Caveats" not in query
