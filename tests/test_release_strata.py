"""The list of strata a release publishes does not depend on the counts (``--strata``).

Before: an input that left out its zero-count rows (as CDC WONDER exports do unless "Show
Zero Values" is ticked) was released as given, and its published strata told which strata
had events; two neighbouring tables, each without its own zero row, published different
lists at any epsilon. Then: the cross product of the input's key values was checked by
default, which a key value with no row at all (a county without any event) slips through
(:func:`test_the_cross_product_check_cannot_see_a_county_without_events`); now the steward
must say where the list comes from (``--strata`` has no default).
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from dpcounts.cli import _request, build_parser, main
from dpcounts.ledger import Ledger
from dpcounts.release import ReleaseError, ReleaseRequest, build_release

#: Two regions x three age groups: a full cross product of the key values.
FULL = pd.DataFrame(
    {
        "region": ["n", "n", "n", "s", "s", "s"],
        "age": ["a", "b", "c", "a", "b", "c"],
        "count": [4, 0, 9, 7, 3, 5],
        "population": [1000, 800, 1500, 900, 700, 1200],
        "prior_rate": [0.004, 0.006, 0.005, 0.004, 0.006, 0.005],  # public, by age
    }
)
KEYS = ("region", "age")
#: Where the tables' prior-rate column comes from (every prior the steward brings is declared).
PRIOR_SOURCE = "national rates by age, published 1999 (test)"


def release(tmp_path, frame, name, **changes):
    path = tmp_path / f"{name}.csv"
    frame.to_csv(path, index=False)
    fields = dict(input=path, out=tmp_path / name, epsilon=1.0, mechanism="pg", keys=KEYS,
                  dataset="test-data",
                  test_seed=1, progress=False, ledger=tmp_path / "ledger.jsonl")  # fmt: skip
    fields.update(changes)
    if fields["mechanism"] != "md" and fields.get("sanitised_prior_by") is None:
        fields.setdefault("prior_source", PRIOR_SOURCE)
    return build_release(ReleaseRequest(**fields))


def published_strata(folder):
    return pd.read_parquet(folder / "hyperparameters.parquet")[list(KEYS)]


@pytest.mark.slow
def test_a_full_cross_product_is_released_and_says_what_was_declared(tmp_path):
    info = release(tmp_path, FULL, "full", strata="cross-product")
    assert info["strata_list"]["source"] == "cross-product"
    statement = info["strata_list"]["statement"]
    assert "the steward declared that every value of every key column appears" in statement
    assert "checked that every combination" in statement
    assert "not a function of the counts" not in statement  # the old over-promise
    assert len(published_strata(tmp_path / "full")) == 6


def test_a_table_without_its_zero_rows_is_refused_naming_them_and_spends_nothing(tmp_path):
    without_zero = FULL[FULL["count"] > 0]
    with pytest.raises(ReleaseError, match=r"1 of the 6 combinations .*region='n', age='b'"):
        release(tmp_path, without_zero, "gap", strata="cross-product")
    assert not (tmp_path / "gap").exists()
    assert Ledger(tmp_path / "ledger.jsonl").entries() == []


@pytest.mark.slow
def test_neighbours_without_their_zero_rows_publish_one_list_from_a_public_file(tmp_path):
    """y has no event in (n, b), its neighbour x (the event of (s, b) moved there) none in
    (s, b), and each leaves out its zero row: as given they would publish different
    strata; matched to the public list, both publish the same six."""
    listed = FULL[["region", "age", "population", "prior_rate"]]
    listed.to_csv(tmp_path / "strata.csv", index=False)
    y = FULL.assign(count=[4, 0, 9, 7, 1, 5]).drop(index=1)[["region", "age", "count"]]
    x = FULL.assign(count=[4, 1, 9, 7, 0, 5]).drop(index=4)[["region", "age", "count"]]
    lists = []
    for name, frame in (("y", y), ("x", x)):
        info = release(tmp_path, frame, name, strata=tmp_path / "strata.csv")
        assert info["strata_list"]["source"] == "external-file"
        assert info["strata"] == 6
        lists.append(published_strata(tmp_path / name))
        synthetic = pd.read_parquet(tmp_path / name / "synthetic.parquet")
        assert synthetic["count"].sum() == frame["count"].sum() == 26
        hyper = pd.read_parquet(tmp_path / name / "hyperparameters.parquet")
        assert hyper["population"].tolist() == listed.sort_values(list(KEYS))["population"].tolist()
    pd.testing.assert_frame_equal(lists[0], lists[1])


def test_the_list_refuses_what_it_does_not_hold(tmp_path):
    listed = FULL[["region", "age", "population", "prior_rate"]]
    listed.iloc[:5].to_csv(tmp_path / "short.csv", index=False)
    counts = FULL[["region", "age", "count"]]
    with pytest.raises(ReleaseError, match=r"region='s', age='c'.* not in the list of strata"):
        release(tmp_path, counts, "a", strata=tmp_path / "short.csv")
    listed.assign(note="x").to_csv(tmp_path / "extra.csv", index=False)
    with pytest.raises(ReleaseError, match=r"extra.csv: column\(s\) \['note'\]"):
        release(tmp_path, counts, "b", strata=tmp_path / "extra.csv")
    pd.concat([listed, listed.iloc[:1]]).to_csv(tmp_path / "twice.csv", index=False)
    with pytest.raises(ReleaseError, match=r"twice.csv: duplicate stratum"):
        release(tmp_path, counts, "c", strata=tmp_path / "twice.csv")
    listed.drop(columns="population").to_csv(tmp_path / "nopop.csv", index=False)
    with pytest.raises(ReleaseError, match=r"nopop.csv: missing column\(s\) \['population'\]"):
        release(tmp_path, counts, "d", strata=tmp_path / "nopop.csv")


@pytest.mark.slow
def test_nested_keys_are_declared_and_the_manifest_says_so(tmp_path):
    nested = FULL.assign(  # each age in one region; the prior by region
        age=["a", "b", "c", "d", "e", "f"], prior_rate=[0.004] * 3 + [0.006] * 3
    )
    with pytest.raises(ReleaseError, match="--strata input"):
        release(tmp_path, nested, "refused", strata="cross-product")
    info = release(tmp_path, nested, "nested", strata="input")
    assert info["strata_list"]["source"] == "declared"
    manifest = json.loads((tmp_path / "nested" / "manifest.json").read_text())
    assert manifest["strata_list"] == info["strata_list"]


def test_the_command_line_reads_strata_as_a_file_or_one_of_two_words(tmp_path):
    base = ["synthesize", "--input", "s.csv", "--keys", "region", "--epsilon", "1",
            "--mechanism", "pg", "--out", "o"]  # fmt: skip
    parser = build_parser()
    for word, source in (("input", "declared"), ("cross-product", "cross-product")):
        request = _request(parser.parse_args([*base, "--strata", word]), out=None)
        assert request.strata == word and request.strata_source == source
    for name in ("strata.csv", "./input"):
        listed = _request(parser.parse_args([*base, "--strata", name]), out=None)
        assert isinstance(listed.strata, Path) and listed.strata_source == "external-file"


def test_a_word_in_another_case_is_a_usage_error_not_a_missing_file(tmp_path):
    """``--strata Input`` names no file: the command says which word was meant, before
    reading anything; a file of that name is still a file."""
    args = ["synthesize", "--input", "s.csv", "--keys", *KEYS, "--epsilon", "1",
            "--mechanism", "pg", "--out", "o", "--strata", " Cross-Product"]  # fmt: skip
    err = io.StringIO()
    with contextlib.chdir(tmp_path), contextlib.redirect_stderr(err):
        assert main(args) == 2
    assert "did you mean --strata cross-product?" in err.getvalue()
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "Input").write_text("region,population\n")
    with contextlib.chdir(tmp_path):
        request = _request(build_parser().parse_args([*args[:-1], "Input"]), out=None)
    assert request.strata == Path("Input") and request.strata_source == "external-file"


@pytest.mark.parametrize("command", ["synthesize", "calibrate"])
def test_without_strata_the_command_names_the_three_choices_and_why(tmp_path, command):
    """No silent default: the input cannot show that it lists every stratum, so the steward
    says where the list comes from; the error says why and names the three forms."""
    FULL.to_csv(tmp_path / "s.csv", index=False)
    args = [command, "--input", "s.csv", "--keys", *KEYS, "--epsilon", "1", "--mechanism", "pg"]
    if command == "synthesize":
        args += ["--out", "o"]
    err = io.StringIO()
    with contextlib.chdir(tmp_path), contextlib.redirect_stderr(err):
        assert main(args) == 2
    text = err.getvalue()
    assert text.startswith(f"dpcounts {command}: error: --strata is required")
    for form in ("--strata FILE", "--strata input", "--strata cross-product"):
        assert form in text
    assert "must not depend on the counts" in text and "Traceback" not in text
    assert 3 <= len(text.splitlines()) <= 12
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.csv"]


def test_the_library_has_no_default_list_of_strata(tmp_path):
    """``ReleaseRequest`` needs ``strata`` (and ``DEFAULTS``, which the command line shows,
    has none); an explicit None is refused with the command line's words, spending nothing."""
    from dpcounts.release.request import DEFAULTS, STRATA_REQUIRED

    assert "strata" not in DEFAULTS
    FULL.to_csv(tmp_path / "s.csv", index=False)
    fields = dict(input=tmp_path / "s.csv", out=tmp_path / "o", epsilon=1.0, mechanism="pg",
                  dataset="test-data",
                  keys=KEYS, test_seed=1, progress=False,
                  ledger=tmp_path / "ledger.jsonl")  # fmt: skip
    with pytest.raises(TypeError, match="strata"):
        ReleaseRequest(**fields)
    with pytest.raises(ReleaseError) as refused:
        build_release(ReleaseRequest(**fields, strata=None))
    assert str(refused.value) == STRATA_REQUIRED
    assert not (tmp_path / "o").exists() and not (tmp_path / "ledger.jsonl").exists()


@pytest.mark.parametrize("shown", ["False", pytest.param("True", marks=pytest.mark.slow)])
def test_a_wonder_export_without_zero_values_needs_a_public_list(tmp_path, shown):
    """CDC WONDER states in its footer whether rows with zero deaths were exported; without
    them the release's strata would say which counties had deaths."""
    from pathlib import Path

    good = Path(__file__).parent / "fixtures" / "wonder" / "good.txt"
    text = good.read_text().replace(
        '"Show Totals: True"', f'"Show Totals: True"\n"Show Zero Values: {shown}"'
    )
    export = tmp_path / "export.txt"
    export.write_text(text)
    request = dict(input=export, out=tmp_path / "out", epsilon=1.0, mechanism="md",
                   dataset="test-data",
                   keys=("county_code", "age_group_code"), wonder=True, test_seed=1, progress=False,
                   ledger=tmp_path / "ledger.jsonl")  # fmt: skip
    if shown == "False":
        for declared in ("cross-product", "input"):  # no declaration can undo the footer
            with pytest.raises(ReleaseError, match="Show Zero Values: False"):
                build_release(ReleaseRequest(**request, strata=declared))
        counties = pd.DataFrame({"county_code": ["01001", "01003", "01005", "04001", "04003"],
                                 "age_group_code": "35-44",
                                 "population": [3120, 9810, 2450, 6010, 1000]})  # fmt: skip
        counties.to_csv(tmp_path / "counties.csv", index=False)
        info = build_release(ReleaseRequest(**request, strata=tmp_path / "counties.csv"))
        assert info["strata"] == 5 and info["strata_list"]["source"] == "external-file"
    else:
        assert build_release(ReleaseRequest(**request, strata="cross-product"))["strata"] == 4


def test_one_key_column_needs_a_source_for_its_list(tmp_path):
    """Deaths by county alone: a county left out for having no death leaves no trace, so
    --strata cross-product has nothing to check and is refused; a public list or a
    declaration that the input is complete can."""
    by_region = FULL.groupby("region", as_index=False)[["count", "population"]].sum()
    by_region["prior_rate"] = 0.005
    one_key = dict(keys=("region",))
    with pytest.raises(ReleaseError, match="cross-product with one key column"):
        release(tmp_path, by_region, "refused", strata="cross-product", **one_key)
    info = release(tmp_path, by_region, "declared", strata="input", **one_key)
    assert info["strata_list"]["source"] == "declared"


#: Three counties x two sexes, exported without its zero rows (CDC WONDER without "Show Zero
#: Values"). County C has one event in y, among women; in its neighbour x that event has
#: moved to county A, so C has no event at all and vanishes from the export.
COUNTIES = pd.DataFrame(
    {
        "county": ["A", "A", "B", "B", "C", "C"],
        "sex": ["f", "m"] * 3,
        "population": [5000, 4800, 3000, 2900, 400, 380],
        "prior_rate": [0.002] * 6,
    }
)


@pytest.mark.slow
def test_the_cross_product_check_cannot_see_a_county_without_events(tmp_path):
    """The auditor's case. y (C's one event exists) misses the combination (C, m), so
    ``--strata cross-product`` refuses it; its neighbour x (the event moved to A) has no row
    for C at all, the cross product of the remaining counties is complete and the check
    would pass, publishing two counties where y's release would have published three. So
    the outcome of the check depends on the counts whenever a key value may be missing
    entirely, and no check of the input can tell: that every key value appears is a
    declaration only the steward can make, which is why it is the steward's, explicit
    (``--strata cross-product``), never a default. With ``--strata FILE`` (the public list
    of the six strata) both tables publish the same list."""
    y = pd.DataFrame({"county": ["A", "A", "B", "B", "C"], "sex": ["f", "m", "f", "m", "f"],
                      "count": [7, 5, 3, 4, 1]})  # fmt: skip
    x = pd.DataFrame({"county": ["A", "A", "B", "B"], "sex": ["f", "m", "f", "m"],
                      "count": [8, 5, 3, 4]})  # fmt: skip
    assert y["count"].sum() == x["count"].sum()  # neighbours: one event moved, C's to A
    public = COUNTIES.set_index(["county", "sex"])
    for frame in (y, x):
        frame[["population", "prior_rate"]] = public.loc[
            list(zip(frame["county"], frame["sex"], strict=True))
        ].to_numpy()
    keys = dict(keys=("county", "sex"))

    with pytest.raises(ReleaseError, match=r"1 of the 6 combinations .*county='C', sex='m'"):
        release(tmp_path, y, "y-declared", strata="cross-product", **keys)
    # x passes the check: the list it would publish lacks C, which only the declaration
    # (that every county appears in the input) rules out; here that declaration is false.
    leaked = release(tmp_path, x, "x-declared", strata="cross-product", **keys)
    assert leaked["strata"] == 4
    assert "steward declared" in leaked["strata_list"]["statement"]

    COUNTIES.to_csv(tmp_path / "counties.csv", index=False)
    lists = []
    for name, frame in (("y", y), ("x", x)):
        counts = frame[["county", "sex", "count"]]
        info = release(tmp_path, counts, name, strata=tmp_path / "counties.csv", **keys)
        assert info["strata"] == 6 and info["strata_list"]["source"] == "external-file"
        hyper = pd.read_parquet(tmp_path / name / "hyperparameters.parquet")
        lists.append(hyper[["county", "sex", "population"]])
    pd.testing.assert_frame_equal(lists[0], lists[1])
    assert lists[0]["county"].tolist() == ["A", "A", "B", "B", "C", "C"]
