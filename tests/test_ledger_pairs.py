"""Issue #50, item 2: a table is known by its people, not by how its keys are spelled.

The steward's index recognised a table by its keys only: the same strata released again
under a new dataset name after re-encoding their keys (a constant key column added, F/M
written female/male or 2/1, state and county joined into one FIPS code, a county code
prefixed) opened a fresh budget each time. The index now also keeps each table's multiset
of (denominator, count) pairs (:func:`dpcounts.ledger.index.pair_fingerprint`). Every test
of a refusal here failed on the code before it (the five re-encodings were released).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcounts.ledger import Charge, Ledger, LedgerError, steward_home
from dpcounts.ledger.index import PAIR_SHARE, pair_fingerprint, shared_pairs
from dpcounts.release import ReleaseError, ReleaseRequest, build_release

ROOT = Path(__file__).resolve().parents[1]
STATES = ["01", "04"]
COUNTIES = ["001", "003", "005", "007", "009"]
SEXES = ["F", "M"]
AGES = ["00-39", "40-64", "65+"]
KEYS = ("state", "county", "sex", "age")


def deaths(seed: int = 50) -> pd.DataFrame:
    """A county x sex x age table (60 strata, some without deaths): state and county FIPS
    codes as text with their leading zeros, sex as F/M."""
    rng = np.random.default_rng(seed)
    rows = [(s, c, x, a) for s in STATES for c in COUNTIES for x in SEXES for a in AGES]
    frame = pd.DataFrame(rows, columns=list(KEYS))
    frame["count"] = rng.integers(0, 40, len(frame))
    frame.loc[[2, 17, 40], "count"] = 0
    frame["population"] = rng.integers(2_000, 90_000, len(frame))
    return frame


def _fips(f: pd.DataFrame) -> pd.DataFrame:
    out = f.assign(fips=f["state"] + f["county"]).drop(columns=["state", "county"])
    return out[["fips", *(c for c in out.columns if c != "fips")]]


#: The five re-encodings of issue #50: each the same people under other keys.
REENCODINGS = {
    "a constant key column added": lambda f: f.assign(country="US"),
    "F/M written female/male": lambda f: f.assign(sex=f["sex"].map({"F": "female", "M": "male"})),
    "F/M written 2/1": lambda f: f.assign(sex=f["sex"].map({"F": 2, "M": 1})),
    "state and county joined into one FIPS code": _fips,
    "a county code prefixed": lambda f: f.assign(county="C" + f["county"]),
}


def _keys(frame: pd.DataFrame) -> tuple[str, ...]:
    return tuple(c for c in frame.columns if c not in ("count", "population", "expected"))


def write(frame: pd.DataFrame, path: Path) -> Path:
    frame.reset_index(drop=True).to_parquet(path, index=False)
    return path


def request(path: Path, out: Path, dataset: str, frame: pd.DataFrame, **changes):
    fields = dict(input=path, out=out, epsilon=1.0, mechanism="md", keys=_keys(frame),
                  test_seed=1, dataset=dataset, progress=False, strata="input")  # fmt: skip
    fields.update(changes)
    return ReleaseRequest(**fields)


@pytest.fixture
def released(tmp_path, private_ledger):
    """us-deaths released at epsilon 1 against its stored budget of 1, as a release records
    it (build_release): the budget is spent."""
    frame = deaths()
    path = write(frame, tmp_path / "deaths.parquet")
    build_release(request(path, tmp_path / "first", "us-deaths", frame, budget=1.0))
    ledger = Ledger(private_ledger)
    assert ledger.spent("us-deaths")[0] == 1.0 and ledger.budgets()["us-deaths"] == 1.0
    return frame


def _state(private_ledger: Path) -> dict[Path, bytes]:
    index = steward_home() / "index" / "index.jsonl"
    return {p: p.read_bytes() if p.exists() else b"" for p in (private_ledger, index)}


def _refused(req: ReleaseRequest, private_ledger: Path) -> str:
    """The release refused before anything is spent: ledger and index unchanged, no folder."""
    before = _state(private_ledger)
    with pytest.raises(ReleaseError, match="denominators and counts") as info:
        build_release(req)
    assert not req.out.exists()
    assert _state(private_ledger) == before
    return str(info.value)


# -- the five re-encodings of issue #50 ------------------------------------------------


@pytest.mark.slow
def test_the_same_strata_re_encoded_under_five_new_names_are_refused(
    released, tmp_path, private_ledger
):
    """One home, a stored budget of 1 spent: the five re-encodings under five new names
    are each refused before anything is spent (before #50 all five were released, epsilon
    6 spent against 1), naming the dataset they match and --new-dataset."""
    for i, (name, encode) in enumerate(REENCODINGS.items()):
        frame = encode(released)
        path = write(frame, tmp_path / f"v{i}.parquet")
        text = _refused(request(path, tmp_path / f"out{i}", f"deaths-{i}", frame), private_ledger)
        assert "dataset us-deaths" in text and "--dataset us-deaths" in text, name
        assert "--new-dataset" in text, name
        events = int((released["count"] > 0).sum())
        assert f"{events} of its {events} strata with events (100%)" in text, name
        assert "Nothing was recorded" in text
    ledger = Ledger(private_ledger)
    assert ledger.spent("us-deaths")[0] == 1.0 and ledger.budgets() == {"us-deaths": 1.0}
    assert [e.dataset for e in ledger.entries()] == ["us-deaths"]


@pytest.mark.slow
def test_new_dataset_declares_other_people_over_the_same_pairs(released, tmp_path, private_ledger):
    frame = REENCODINGS["a county code prefixed"](released)
    path = write(frame, tmp_path / "v.parquet")
    build_release(request(path, tmp_path / "b", "births", frame, new_dataset=True))
    (_, entry) = Ledger(private_ledger).entries()
    assert entry.dataset == "births" and entry.new_dataset
    # declared apart: the next release of births over these pairs needs no declaration
    frame = _fips(released)
    path = write(frame, tmp_path / "w.parquet")
    build_release(request(path, tmp_path / "c", "births", frame))
    assert Ledger(private_ledger).spent("births")[0] == 2.0
    # a third name is still refused against both
    frame = REENCODINGS["F/M written 2/1"](released)
    path = write(frame, tmp_path / "x.parquet")
    text = _refused(request(path, tmp_path / "d", "third", frame), private_ledger)
    assert "(and it matches 1 other dataset(s))" in text


@pytest.mark.slow
def test_a_genuinely_different_table_under_a_new_name_is_released(
    released, tmp_path, private_ledger
):
    """Other counts and populations under re-encoded keys: other people, released."""
    frame = REENCODINGS["a county code prefixed"](deaths(seed=7))
    path = write(frame, tmp_path / "o.parquet")
    build_release(request(path, tmp_path / "b", "other-deaths", frame))
    assert Ledger(private_ledger).spent("other-deaths")[0] == 1.0


@pytest.mark.slow
def test_another_cause_over_the_same_populations_is_released(tmp_path, private_ledger):
    """The shipped Pennsylvania lung-cancer table, then another cause of the same size
    over the same populations (counts drawn afresh at the table's own rates by race, sex
    and age: the worst case of chance matches) under re-spelt keys: released; the same
    cases under those keys are refused."""
    lung = pd.read_parquet(ROOT / "data" / "pennlc_strata.parquet").rename(
        columns={"cases": "count"}
    )
    keys = ("county", "race", "sex", "age")
    for column in keys:
        lung[column] = lung[column].astype(str)
    lung = lung[lung["population"] > 0]  # a release refuses empty strata
    path = write(lung, tmp_path / "lung.parquet")
    build_release(request(path, tmp_path / "a", "pa-lung", lung, keys=keys, budget=1.0))
    other = lung.assign(county="PA-" + lung["county"], count=_same_rates(lung, 3))
    path = write(other, tmp_path / "other.parquet")
    build_release(request(path, tmp_path / "b", "pa-other", other))
    same = lung.assign(county=lung["county"] + "-county")  # (another table id than pa-other's)
    path = write(same, tmp_path / "same.parquet")
    text = _refused(request(path, tmp_path / "c", "pa-lung-again", same), private_ledger)
    assert "dataset pa-lung" in text


@pytest.mark.slow
def test_expected_count_denominators_are_compared_too(tmp_path, private_ledger):
    frame = deaths().rename(columns={"population": "expected"})
    frame["expected"] = frame["expected"] * 3.7e-4
    kind = dict(population_column="expected", denominator="expected")
    path = write(frame, tmp_path / "smr.parquet")
    build_release(request(path, tmp_path / "a", "smr", frame, budget=1.0, **kind))
    again = _fips(frame)
    path = write(again, tmp_path / "again.parquet")
    text = _refused(request(path, tmp_path / "b", "smr-again", again, **kind), private_ledger)
    assert "dataset smr" in text


def test_a_table_recorded_without_pairs_gains_them_on_its_next_release(tmp_path):
    """A table the index knew by its keys only (recorded before #50) is known by its pairs
    after its next release; preview refuses as spend does."""
    frame = deaths()
    ledger = Ledger(tmp_path / "ledger.jsonl")
    keys = frame[list(KEYS)]
    counts = dict(counts=frame["count"], populations=frame["population"])
    ledger.spend(Charge("us-deaths", 0.5, 0.0, table="ab" * 32, keys=keys))
    third = Ledger(tmp_path / "third.jsonl")
    other = _fips(frame)
    assert (
        third.assess(Charge("again", 0.5, 0.0, table="ef" * 32, **counts)).as_dict()["refusal"]
        is None
    )
    ledger.spend(Charge("us-deaths", 0.5, 0.0, table="ab" * 32, keys=keys, **counts))
    with pytest.raises(LedgerError, match="denominators and counts") as info:
        third.spend(
            Charge("again", 0.5, 0.0, table="ef" * 32, keys=other[["fips", "sex", "age"]], **counts)
        )
    assert "dataset us-deaths" in str(info.value)
    preview = third.assess(Charge("again", 0.5, 0.0, table="ef" * 32, **counts)).as_dict()
    assert "denominators and counts" in preview["refusal"]
    assert Ledger(tmp_path / "third.jsonl").entries() == []


# -- the fingerprint and its comparison ---------------------------------------------------


def _same_rates(frame: pd.DataFrame, seed: int) -> np.ndarray:
    """Counts of another cause of the same size: Poisson at the table's own rate of the
    stratum's race, sex and age group times its population."""
    groups = ["race", "sex", "age"]
    totals = frame.groupby(groups, observed=True)[["count", "population"]].transform("sum")
    rate = (totals["count"] / totals["population"].clip(lower=1)).to_numpy()
    return np.random.default_rng(seed).poisson(rate * frame["population"].to_numpy())


def _share(a_counts, a_pop, b_counts, b_pop, zeros: bool) -> float:
    """The multiset share by its definition, in Python."""
    a = Counter((p, c) for p, c in zip(a_pop, a_counts, strict=True) if zeros or c > 0)
    b = Counter((p, c) for p, c in zip(b_pop, b_counts, strict=True) if zeros or c > 0)
    return sum((a & b).values()) / min(a.total(), b.total())


def test_the_share_that_other_people_reach_on_the_shipped_table():
    """The measurement behind PAIR_SHARE (dpcounts.ledger.index's docstring): in 50 draws of
    another cause at the same rates over the same populations, strata with events share
    far less than a half (with zero-count strata kept they would share about a half);
    the same people with half of their counts moved by one still match."""
    lung = pd.read_parquet(ROOT / "data" / "pennlc_strata.parquet")
    lung = lung.rename(columns={"cases": "count"})
    counts, pop = lung["count"].to_numpy(), lung["population"].to_numpy()
    secret = b"s" * 32
    mine = pair_fingerprint(counts, pop, secret)
    assert len(mine) == 571 and len(lung) == 1072
    shares, with_zeros = [], []
    for seed in range(50):
        other = _same_rates(lung, seed)
        theirs = pair_fingerprint(other, pop, secret)
        share = shared_pairs(mine, theirs) / min(len(mine), len(theirs))
        assert share == pytest.approx(_share(counts, pop, other, pop, zeros=False))
        shares.append(share)
        with_zeros.append(_share(counts, pop, other, pop, zeros=True))
    assert max(shares) < 0.17 < PAIR_SHARE and 0.12 < np.mean(shares) < 0.14
    assert 0.46 < np.mean(with_zeros) < 0.48 < max(with_zeros) < 0.5  # why zeros are left out
    rng = np.random.default_rng(0)
    shuffled = pair_fingerprint(rng.permutation(counts), pop, secret)
    assert shared_pairs(mine, shuffled) / len(mine) < 0.07
    moved = np.maximum(
        counts + rng.choice([-1, 1], len(counts)) * (rng.random(len(counts)) < 0.2), 0
    )
    theirs = pair_fingerprint(moved, pop, secret)
    assert 0.75 < shared_pairs(mine, theirs) / min(len(mine), len(theirs)) < 0.85


def test_pairs_are_a_multiset_normalised_as_numbers_and_keyed():
    secret = b"k" * 32
    a = pair_fingerprint([0, 1, 1, 2, 5], [10, 10, 10.0, -0.0, 3], secret)
    assert len(a) == 4 and np.all(a[:-1] <= a[1:])  # zero counts left out, repeats kept
    b = pair_fingerprint(np.array([1.0, 5, 2, 0, 7]), np.array([10, 3, 0.0, 4, 1]), secret)
    assert shared_pairs(a, b) == shared_pairs(b, a) == 3  # (10, 1) once, (3, 5), (0, 2)
    assert not np.array_equal(a, pair_fingerprint([0, 1, 1, 2, 5], [10, 10, 10, 0, 3], b"j" * 32))
    assert pair_fingerprint([1], [2], secret)[0] != pair_fingerprint([2], [1], secret)[0]
    with pytest.raises(ValueError, match="one each a stratum"):
        pair_fingerprint([1, 2], [3], secret)


def test_shared_pairs_counts_with_multiplicity_across_chunks(monkeypatch):
    from dpcounts.ledger import index as ledger_index

    monkeypatch.setattr(ledger_index, "_CHUNK", 7)
    rng = np.random.default_rng(1)
    for _ in range(30):
        new = np.sort(rng.integers(0, 12, rng.integers(0, 60)).astype(np.uint64))
        stored = np.sort(rng.integers(0, 12, rng.integers(0, 60)).astype(np.uint64))
        expected = sum((Counter(new.tolist()) & Counter(stored.tolist())).values())
        assert shared_pairs(new, stored) == expected


def test_the_pair_hash_is_siphash_2_4():
    """The reference test vector of 16 bytes (key 00..0f, message 00..0f)."""
    from dpcounts.ledger.pair_hash import siphash_pairs

    k0, k1 = np.uint64(0x0706050403020100), np.uint64(0x0F0E0D0C0B0A0908)
    words = (
        np.array([0x0706050403020100], dtype=np.uint64),
        np.array([0x0F0E0D0C0B0A0908], dtype=np.uint64),
    )
    assert int(siphash_pairs(*words, k0, k1)[0]) == 0x3F2ACC7F57C29BDB


def test_a_large_table_is_paired_in_bounded_memory():
    """1M strata: 8 MB of hashes, one compiled pass."""
    n = 1_000_000
    rng = np.random.default_rng(2)
    pairs = pair_fingerprint(rng.poisson(2.0, n), rng.random(n) * 1e5, b"s" * 32)
    assert pairs.dtype == np.uint64 and 0.8 * n < len(pairs) < 0.9 * n
    assert shared_pairs(pairs, pairs) == len(pairs)


def test_the_docs_say_what_the_pairs_cannot_see():
    privacy = (ROOT / "docs" / "privacy.md").read_text()
    assert "(population, count) pairs" in privacy and "summed away" in privacy
