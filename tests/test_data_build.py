"""Pure helpers of the data builder (data/build/): the GAL parser and the name key."""

import derive  # data/build/ (pytest pythonpath)
import pytest


def test_read_gal_new_style_header_with_an_island(tmp_path):
    path = tmp_path / "w.gal"
    path.write_text("0 3 NAT FIPSNO\n1001 1\n1003\n1003 1\n1001\n1005 0\n\n")
    key, neighbours = derive.read_gal(path)
    assert key == "FIPSNO"
    assert neighbours == {"1001": ["1003"], "1003": ["1001"], "1005": []}


def test_read_gal_old_style_header(tmp_path):
    path = tmp_path / "w.gal"
    path.write_text("2\n0 1\n1\n1 1\n0\n")
    key, neighbours = derive.read_gal(path)
    assert key is None
    assert neighbours == {"0": ["1"], "1": ["0"]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2\n0 2\n1\n1 1\n0\n", "lists 1 neighbours, says 2"),
        ("3\n0 1\n1\n1 1\n0\n", "header says 3 units, found 2"),
    ],
)
def test_read_gal_rejects_inconsistent_files(tmp_path, text, message):
    path = tmp_path / "w.gal"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        derive.read_gal(path)


def test_county_key_joins_spellings_across_sources():
    assert derive.county_key("McKean") == derive.county_key("mckean")
    assert derive.county_key("St. Louis City") == "stlouiscity"
