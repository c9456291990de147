"""Issue #34, item 2: one budget per dataset per steward (dpcounts.ledger.index).

Every test here failed on the code before it: a second ledger file (``--ledger``,
``$DPCOUNTS_LEDGER``) opened a fresh budget for a spent dataset; names were compared with
their letter case and a table was "the same" only if identical, so 9 of 15 variants of a
spent table were released under ``US-Deaths-1999`` after ``us-deaths-1999``; and
``ledger --rebuild`` after a line and its private folder were deleted forgot the spending.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcounts.ledger import Charge, Ledger, LedgerError, format_summary, steward_home
from dpcounts.release import ReleaseError, ReleaseRequest, build_release, load_strata

ROOT = Path(__file__).resolve().parents[1]
STATES = ["01", "04", "06", "08", "09"]
SEXES = ["Female", "Male"]
AGES = ["00-14", "15-64", "65+"]


def deaths() -> pd.DataFrame:
    """A small US-deaths-like table: state FIPS codes as text (leading zeros), sex, age;
    one stratum with no death (the zero-count rows of the variants)."""
    rng = np.random.default_rng(34)
    rows = [(s, x, a) for s in STATES for x in SEXES for a in AGES]
    frame = pd.DataFrame(rows, columns=["state", "sex", "age"])
    frame["count"] = rng.integers(1, 30, len(frame))
    frame.loc[3, "count"] = 0
    frame["population"] = rng.integers(5_000, 50_000, len(frame))
    return frame


KEYS = ("state", "sex", "age")


def _zero_row_added(f):
    extra = pd.DataFrame([{"state": "10", "sex": "Female", "age": "00-14", "count": 0,
                           "population": 9_000}])  # fmt: skip
    return pd.concat([f, extra], ignore_index=True)


#: 15 variants of the table (keys, types, strata, populations): each is the same people.
VARIANTS = {
    "identical": lambda f: f,
    "integer keys": lambda f: f.assign(state=f["state"].astype(int)),
    "float keys": lambda f: f.assign(state=f["state"].astype(float)),
    "lower-cased values": lambda f: f.assign(sex=f["sex"].str.lower()),
    "upper-cased values": lambda f: f.assign(sex=f["sex"].str.upper(), age=f["age"].str.upper()),
    "leading zeros stripped": lambda f: f.assign(state=f["state"].str.lstrip("0")),
    "spaces around values": lambda f: f.assign(sex=" " + f["sex"] + "  "),
    "a zero-count row added": _zero_row_added,
    "a zero-count row dropped": lambda f: f[f["count"] > 0],
    "one state only": lambda f: f[f["state"] == "06"],
    "two states only": lambda f: f[f["state"].isin(["01", "09"])],
    "one population + 1": lambda f: f.assign(population=f["population"] + (np.arange(len(f)) == 0)),
    "populations 1% higher": lambda f: f.assign(population=(f["population"] * 1.01).round()),
    "a renamed key column": lambda f: f.rename(columns={"state": "state_fips"}),
    "rows shuffled, columns reordered": lambda f: f.sample(frac=1.0, random_state=1)[
        ["age", "count", "population", "sex", "state"]
    ],
}


def _keys(frame: pd.DataFrame) -> tuple[str, ...]:
    return tuple(c for c in frame.columns if c not in ("count", "population"))


def write(frame: pd.DataFrame, path: Path) -> Path:
    """Parquet keeps each variant's types (text with zeros, integers, floats)."""
    frame.reset_index(drop=True).to_parquet(path, index=False)
    return path


def request(path: Path, out: Path, dataset: str, **changes) -> ReleaseRequest:
    fields = dict(input=path, out=out, epsilon=1.0, mechanism="md", keys=KEYS, test_seed=1,
                  dataset=dataset, progress=False, strata="input")  # fmt: skip
    fields.update(changes)
    return ReleaseRequest(**fields)


@pytest.fixture
def spent(tmp_path, private_ledger):
    """us-deaths-1999 spent at epsilon 1 against its stored budget of 1, recorded as a
    release records it (``dpcounts.release._spend``) without drawing: what the tests
    below check is decided before anything is drawn."""
    path = write(deaths(), tmp_path / "deaths.parquet")
    strata = load_strata(request(path, tmp_path / "first", "us-deaths-1999"))
    # (before #34 the ledger took no keys: the tests below then fail on what they check)
    keys = {"keys": strata.keys, "counts": strata.counts, "populations": strata.population}
    Ledger(private_ledger).spend(
        Charge(
            "us-deaths-1999",
            1.0,
            1e-12,
            table=strata.table_id(),
            aliases=strata.legacy_ids(),
            budget=1.0,
            guarantee="certified",
            **keys,
        ),
        label=path.name,
    )
    assert Ledger(private_ledger).spent("us-deaths-1999")[0] == 1.0
    return path


def _refused(req: ReleaseRequest, match: str, ledgers: list[Path]) -> str:
    before = {p: p.read_bytes() if p.exists() else b"" for p in ledgers}
    with pytest.raises(ReleaseError, match=match) as info:
        build_release(req)
    assert not req.out.exists()
    assert {p: p.read_bytes() if p.exists() else b"" for p in ledgers} == before
    return str(info.value)


# -- one budget per dataset, whatever ledger file a release names --------------------------


def test_another_ledger_file_cannot_open_a_fresh_budget(spent, tmp_path, private_ledger):
    other = tmp_path / "other.jsonl"
    text = _refused(
        request(spent, tmp_path / "b", "us-deaths-1999", ledger=other),
        "has its budget in the ledger",
        [private_ledger],
    )
    assert str(private_ledger.resolve()) in text and f"--ledger {private_ledger.resolve()}" in text
    assert not other.exists()


def test_dpcounts_ledger_cannot_open_a_fresh_budget(spent, tmp_path, private_ledger, monkeypatch):
    other = tmp_path / "env" / "ledger.jsonl"
    monkeypatch.setenv("DPCOUNTS_LEDGER", str(other))
    _refused(
        request(spent, tmp_path / "b", "us-deaths-1999"),
        "has its budget in the ledger",
        [private_ledger, other],
    )
    assert not other.exists()
    # nor under another name: the table is known in the first ledger
    _refused(
        request(spent, tmp_path / "b", "deaths-again"),
        "was released under dataset us-deaths-1999",
        [private_ledger, other],
    )


def test_set_budget_in_another_ledger_is_refused(spent, tmp_path):
    with pytest.raises(LedgerError, match="has its budget in the ledger"):
        Ledger(tmp_path / "other.jsonl").set_budget("us-deaths-1999", 5.0)
    with pytest.raises(LedgerError, match="already recorded"):
        Ledger(tmp_path / "other.jsonl").set_budget("US-DEATHS-1999", 5.0)


@pytest.mark.slow
def test_another_home_is_another_steward_and_the_docs_say_so(
    spent, tmp_path, private_ledger, monkeypatch
):
    """Another $XDG_DATA_HOME holds another index, ledger and private area: another
    steward, whose spending dpcounts cannot see. The docs say so plainly."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home2"))
    monkeypatch.delenv("DPCOUNTS_LEDGER")
    assert steward_home() == tmp_path / "home2" / "dpcounts"
    build_release(request(spent, tmp_path / "b", "us-deaths-1999"))  # another steward
    assert Ledger(steward_home() / "ledger.jsonl").spent("us-deaths-1999")[0] == 1.0
    privacy = (ROOT / "docs" / "privacy.md").read_text()
    assert "another steward" in privacy and "XDG_DATA_HOME" in privacy


@pytest.mark.slow
def test_a_second_ledger_refuses_a_known_table_under_a_new_name(spent, tmp_path, private_ledger):
    other = tmp_path / "other.jsonl"
    text = _refused(
        request(spent, tmp_path / "b", "births-1999", ledger=other),
        "was released under dataset us-deaths-1999",
        [private_ledger, other],
    )
    assert "--new-dataset" in text
    # the steward declares new people: recorded in the entry (and the index)
    build_release(request(spent, tmp_path / "b", "births-1999", ledger=other, new_dataset=True))
    (entry,) = Ledger(other).entries()
    assert entry.new_dataset and '"new_dataset": true' in other.read_text()
    assert "Declared new people" in format_summary(Ledger(other))
    # declared apart: the next releases of births over these strata need no declaration
    build_release(request(spent, tmp_path / "again", "births-1999", ledger=other))
    variant = write(VARIANTS["one state only"](deaths()), tmp_path / "v.parquet")
    build_release(request(variant, tmp_path / "c", "births-1999", ledger=other))


# -- names compared case- and space-insensitively, tables by their strata -------------------


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_no_variant_of_a_spent_table_is_released(spent, tmp_path, private_ledger, variant):
    """The 15 variants of issue #34 (9 were released), under US-Deaths-1999 after
    us-deaths-1999 and under a new name: all refused before anything is spent, the second
    naming the dataset it overlaps and the share of strata."""
    frame = VARIANTS[variant](deaths())
    path = write(frame, tmp_path / "variant.parquet")
    keys = _keys(frame)
    text = _refused(
        request(path, tmp_path / "b", "US-Deaths-1999", keys=keys),
        "already recorded",
        [private_ledger],
    )
    assert "--dataset us-deaths-1999" in text
    # the same table id (identical, spaces, order): the ledger's own binding names the
    # dataset; any other variant overlaps it
    match = "overlaps a table released under another dataset|under --dataset us-deaths-1999"
    text = _refused(
        request(path, tmp_path / "b", "deaths-copy", keys=keys), match, [private_ledger]
    )
    if "overlaps" in text:
        n = len(frame)
        shared = n - (variant == "a zero-count row added")
        assert f"{shared} of its {n} strata ({shared / n:.0%})" in text
        assert "dataset us-deaths-1999" in text and "--new-dataset" in text


@pytest.mark.slow
def test_a_table_over_other_strata_is_released_under_a_new_name(spent, tmp_path, private_ledger):
    """Other strata, other people: other states, whose counts and populations are their
    own (the same counts and populations under other codes are the same people, #50)."""
    frame = deaths().assign(state=lambda f: f["state"].map(lambda s: f"{int(s) + 40}"))
    rng = np.random.default_rng(40)
    frame = frame.assign(count=rng.integers(1, 30, len(frame)),
                         population=rng.integers(5_000, 50_000, len(frame)))  # fmt: skip
    build_release(request(write(frame, tmp_path / "o.parquet"), tmp_path / "b", "other-deaths"))
    assert Ledger(private_ledger).spent("other-deaths")[0] == 1.0


@pytest.mark.slow
def test_calibrate_previews_the_refusals_of_the_index(spent, tmp_path, private_ledger):
    from dpcounts.release.preview import preview

    path = write(VARIANTS["one state only"](deaths()), tmp_path / "v.parquet")
    info = preview(request(path, tmp_path / "b", "deaths-copy"))
    assert "overlaps a table released under another dataset" in info["ledger"]["refusal"]
    info = preview(request(path, tmp_path / "b", "deaths-copy", new_dataset=True))
    assert info["ledger"]["refusal"] is None
    info = preview(request(spent, tmp_path / "b", "us-deaths-1999", ledger=tmp_path / "x.jsonl"))
    assert "has its budget in the ledger" in info["ledger"]["refusal"]


def test_the_index_holds_no_key_in_clear(spent):
    folder = steward_home() / "index"
    blobs = b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())
    for key in ("Female", "female", "15-64", "65+"):
        assert key.encode() not in blobs
    assert (folder / "secret").stat().st_mode & 0o077 == 0


def test_normalisation():
    from dpcounts.ledger.index import fingerprint, normal_name, normal_value

    assert normal_name(" US-Deaths-1999 ") == normal_name("us-deaths-1999")
    assert {normal_value(v) for v in ("01001", 1001, 1001.0, " 1001 ", "1001.00")} == {"1001"}
    assert normal_value("0") == normal_value(0) == normal_value("-0") == "0"
    assert normal_value("New  York") == normal_value("newyork")
    assert normal_value(1.5) == normal_value("01.50") == "1.5"
    secret = b"k" * 32
    a = pd.DataFrame({"x": ["01", "02"], "y": ["A", "B"]})
    b = pd.DataFrame({"why": ["b", "a"], "ex": [2, 1]})  # renamed, reordered, typed
    assert np.array_equal(fingerprint(a, secret), fingerprint(b, secret))
    assert not np.array_equal(fingerprint(a, secret), fingerprint(a, b"j" * 32))


@pytest.mark.slow
def test_a_large_table_is_fingerprinted_in_bounded_memory():
    """1M strata: 8 MB of hashes, computed per distinct value."""
    from dpcounts.ledger.index import fingerprint

    n = 1_000_000
    ages = np.array([f"{5 * i:02d}-{5 * i + 4:02d}" for i in range(20)])
    keys = pd.DataFrame({"county": np.arange(n) // 20, "age": ages[np.arange(n) % 20]})
    prints = fingerprint(keys, b"s" * 32)
    assert prints.dtype == np.uint64 and len(prints) == n


# -- rebuild only adds ----------------------------------------------------------------------


@pytest.mark.slow
def test_rebuild_keeps_a_deleted_line_whose_private_folder_is_gone(
    tmp_path, private_ledger, private_area, private_folder
):
    path = write(deaths(), tmp_path / "deaths.parquet")
    build_release(request(path, tmp_path / "a", "us-deaths-1999", epsilon=0.5, budget=1.0))
    build_release(request(path, tmp_path / "b", "us-deaths-1999", epsilon=0.25))
    lines = private_ledger.read_bytes().splitlines(keepends=True)
    assert len(lines) == 3  # the stored budget, two releases
    private_ledger.write_bytes(b"".join(lines[:2]))  # the last release's line...
    shutil.rmtree(private_folder(tmp_path / "b"))  # ...and its private folder
    heads = steward_home() / "ledger-heads"
    shutil.rmtree(heads)  # and the head record: only the index remembers
    with pytest.raises(LedgerError, match="steward's index"):
        Ledger(private_ledger).check()
    said = Ledger(private_ledger).rebuild()
    assert "1 from the index alone" in said and "nothing spent was removed" in said
    ledger = Ledger(private_ledger)
    assert ledger.spent("us-deaths-1999")[0] == 0.75
    assert [e.lost for e in ledger.entries()] == [False, True]
    assert "spent, record lost" in format_summary(ledger, "us-deaths-1999")
    with pytest.raises(ReleaseError, match="of the budget epsilon = 1"):
        build_release(request(path, tmp_path / "c", "us-deaths-1999", epsilon=0.5))
    # a kept line whose private folder is gone is marked, never dropped
    shutil.rmtree(private_folder(tmp_path / "a"))
    Ledger(private_ledger).rebuild()
    assert [e.lost for e in Ledger(private_ledger).entries()] == [True, True]
    assert Ledger(private_ledger).spent("us-deaths-1999")[0] == 0.75


def test_ledgers_written_before_the_index_are_read_into_it(spent, tmp_path, private_ledger):
    """A home whose index is new learns the datasets of the ledgers it wrote before (the
    head records list them): they cannot open a fresh budget elsewhere either."""
    shutil.rmtree(steward_home() / "index")
    other = Ledger(tmp_path / "other.jsonl")
    with pytest.raises(LedgerError, match="has its budget in the ledger"):
        other.spend(Charge("us-deaths-1999", 0.5, 0.0, table="ab" * 32))
    other.spend(Charge("unrelated", 0.5, 0.0, table="cd" * 32))  # and the index now knows both
    with pytest.raises(LedgerError, match="has its budget in the ledger"):
        Ledger(tmp_path / "third.jsonl").set_budget("unrelated", 1.0)
