"""A table's identity is computed over its distinct values (issue #27), and gives the same
ids as the row-by-row code it replaced: the ledger binds datasets by them, so a changed
id would be a privacy bug. The old code is copied here as the reference, and both run on
random tables with nasty values (quotes, backslashes, unicode, spaces, floats such as
1001.0, bools, leading zeros, NA-like words), in every order of their key columns and
rows. ``key_positions`` likewise against its old pandas code."""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pandas as pd
import pytest

from dpcounts.data.validation import _key_kind, key_positions
from dpcounts.release.inputs import Strata, _canonical

# --- the reference: the row-by-row code as it was before issue #27 ----------------------


def reference_key_kind(column: pd.Series) -> str:
    if isinstance(column.dtype, pd.CategoricalDtype):
        return "category"
    if pd.api.types.is_numeric_dtype(column):
        return "number"
    numbers = pd.to_numeric(column.astype(str), errors="coerce")
    return "text as number" if len(column) and numbers.notna().all() else "text"


def reference_key_positions(frame: pd.DataFrame, keys) -> np.ndarray:
    order: dict[str, pd.Series] = {}
    for k, key in enumerate(keys):
        column = frame[key].reset_index(drop=True)
        kind = reference_key_kind(column)
        if kind == "category":
            order[f"{k}"] = pd.Series(column.cat.codes)
        elif kind == "number":
            order[f"{k}"] = column
        else:
            text = column.astype(str)
            if kind == "text as number":
                order[f"{k}n"] = pd.to_numeric(text)
            order[f"{k}"] = text
    positions = pd.DataFrame(order, index=range(len(frame)))
    return positions.sort_values(list(order), kind="stable").index.to_numpy()


def reference_key_order(frame: pd.DataFrame, keys) -> pd.DataFrame:
    return frame.iloc[reference_key_positions(frame, keys)].reset_index(drop=True)


def reference_dataset_id(keys: pd.DataFrame, population) -> str:
    names = sorted(keys.columns)
    text = {name: [_canonical(v) for v in keys[name]] for name in names}
    rows = sorted(zip(*(text[n] for n in names), (repr(float(p)) for p in population), strict=True))
    digest = hashlib.sha256(b"dpcounts table identity 2\n")
    digest.update(repr(names).encode())
    for row in rows:
        digest.update(repr(row).encode())
    return digest.hexdigest()


def reference_legacy_ids(keys: pd.DataFrame, population) -> tuple[str, ...]:
    names = list(keys.columns)
    orders = itertools.permutations(names) if len(names) <= 4 else [tuple(names)]
    frame = keys.assign(__population=population)
    ids = []
    for order in orders:
        sorted_frame = reference_key_order(frame[[*order, "__population"]], list(order))
        digest = hashlib.sha256()
        digest.update(repr(list(order)).encode())
        rows = sorted_frame[list(order)].astype(str).itertuples(index=False)
        pops = sorted_frame["__population"]
        for row, pop in zip(rows, pops, strict=True):
            digest.update(repr((tuple(row), float(pop))).encode())
        ids.append(digest.hexdigest())
    return tuple(dict.fromkeys(ids))


# --- random tables with nasty values -----------------------------------------------------

NASTY_TEXT = [
    "1001", "01001", " 1001 ", "1001.0", "1001 ", "a'b", 'a"b', "a'b\"c", "'", '"',
    "back\\slash", "\\", "tab\tx", "new\nline", "cr\rx", "é", "É", "e\u0301", "日本",
    "emoji \U0001f600", "\x00", "\x01", "\x7f", "\x80", "\u2028", "\xa0nbsp\xa0", "\u200b",
    "NA", "None", "nan", "NaN", "null", "<NA>", "", " ", "True", "False", "-0", "0",
    "1e3", "0x1", "+5", "Inf", "-inf", "½", "\u0661\u0662", "z", "Z", "a", "A", "a b",
    "85+", "0-4", "10", "2", "9007199254740993", "9007199254740992",
]  # fmt: skip
NUMBER_TEXT = [
    "1", "01", "001", "2", "10", "100", "1.5", "-3", "1e2", "0", "-0", "+7", " 8",
    "9007199254740993", "9007199254740992", "18446744073709551617", "3.0", "0.1",
]  # fmt: skip
FLOATS = [1001.0, 1001.5, 0.0, -0.0, 1e20, 1e-7, 0.1 + 0.2, 2.0**53 + 2, -5.0, 3.0, 1 / 3]
POPULATIONS = [1.0, 444.0, 84.0, 1000.0, 1e-5, 0.1 + 0.2, 2.5e9, 1e22, 7.0, 123456789.0]


def nasty_column(kind: str, n: int, rng: np.random.Generator) -> pd.Series:
    pick = lambda pool: [pool[i] for i in rng.integers(0, len(pool), n)]  # noqa: E731
    if kind == "text":
        return pd.Series(pick(NASTY_TEXT), dtype="str")
    if kind == "object text":
        return pd.Series(pick(NASTY_TEXT), dtype=object)
    if kind == "numbers as text":
        return pd.Series(pick(NUMBER_TEXT), dtype="str")
    if kind == "int":
        return pd.Series(rng.integers(-5, 3000, n))
    if kind == "big int":
        return pd.Series(rng.integers(0, 2**62, n) * rng.choice([1, -1], n))
    if kind == "uint":
        return pd.Series(rng.integers(0, 50, n).astype(np.uint16))
    if kind == "float":
        return pd.Series(pick(FLOATS), dtype=float)
    if kind == "float32":
        return pd.Series(pick(FLOATS[:3] + [0.1, 2.5]), dtype=np.float32)
    if kind == "bool":
        return pd.Series(rng.integers(0, 2, n).astype(bool))
    if kind == "mixed objects":
        pool = [1, 1.0, True, False, 0, "1", " 1", np.int64(2), 2.5, "x", b"b", None]
        return pd.Series(pick(pool), dtype=object)
    if kind == "category":
        values = pick(["b", "a", "c", "10", "2"])
        return pd.Series(pd.Categorical(values, categories=["c", "b", "a", "10", "2"]))
    raise AssertionError(kind)


KINDS = [
    "text", "object text", "numbers as text", "int", "big int", "uint", "float", "float32",
    "bool", "mixed objects", "category",
]  # fmt: skip


def nasty_strata(seed: int, n_keys: int, n: int = 60, kinds=KINDS) -> Strata:
    rng = np.random.default_rng(seed)
    names = ["fips", "age", "Race", "sex", "zeta"][:n_keys]
    chosen = rng.choice(kinds, n_keys)
    keys = pd.DataFrame(
        {name: nasty_column(k, n, rng) for name, k in zip(names, chosen, strict=True)}
    )
    population = np.array([POPULATIONS[i] for i in rng.integers(0, len(POPULATIONS), n)])
    population = np.where(rng.random(n) < 0.5, rng.integers(1, 10**6, n), population)
    return Strata(keys, np.zeros(n, dtype=np.int64), population.astype(float), None, None, "c")


def reordered(strata: Strata, seed: int) -> Strata:
    """The same table, its columns and rows in another order."""
    rng = np.random.default_rng(seed)
    columns = list(rng.permutation(list(strata.keys.columns)))
    rows = rng.permutation(len(strata.keys))
    keys = strata.keys[columns].iloc[rows].reset_index(drop=True)
    return Strata(keys, strata.counts[rows], strata.population[rows], None, None, "c")


@pytest.mark.parametrize("n_keys", [1, 2, 3, 4, 5])
@pytest.mark.parametrize(
    "seed", [*range(3), *(pytest.param(seed, marks=pytest.mark.slow) for seed in range(3, 12))]
)
def test_dataset_id_and_legacy_ids_are_those_of_the_row_by_row_code(seed, n_keys):
    strata = nasty_strata(seed, n_keys)
    for variant in (strata, reordered(strata, seed), reordered(strata, seed + 100)):
        expected = reference_dataset_id(variant.keys, variant.population)
        assert variant.table_id() == expected
        assert variant.legacy_ids() == reference_legacy_ids(variant.keys, variant.population)
    # the canonical id does not depend on the order of columns or rows
    assert reordered(strata, seed).table_id() == strata.table_id()


@pytest.mark.parametrize("seed", range(6))
def test_the_ids_computed_side_by_side_are_those_of_the_row_by_row_code(seed):
    """:meth:`Strata.identities` hashes both ids in two threads: the same ids."""
    strata = nasty_strata(seed, 1 + seed % 5, n=400)
    table, aliases = strata.identities()
    assert table == reference_dataset_id(strata.keys, strata.population)
    assert aliases == reference_legacy_ids(strata.keys, strata.population)


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_column_alone_and_with_text_hashes_as_before(kind):
    for seed in range(5):
        strata = nasty_strata(seed, 2, n=40, kinds=[kind, "text"])
        assert strata.table_id() == reference_dataset_id(strata.keys, strata.population)
        assert strata.legacy_ids() == reference_legacy_ids(strata.keys, strata.population)


def test_big_tables_are_hashed_in_chunks_to_the_same_bytes(monkeypatch):
    import dpcounts.release.inputs as inputs

    strata = nasty_strata(7, 3, n=3000, kinds=["text", "numbers as text", "int"])
    monkeypatch.setattr(inputs, "HASH_CHUNK", 7)
    assert strata.table_id() == reference_dataset_id(strata.keys, strata.population)
    assert strata.legacy_ids() == reference_legacy_ids(strata.keys, strata.population)


def test_a_national_table_hashes_as_before():
    """Zero-padded codes as text, as a WONDER or FIPS table holds them."""
    rng = np.random.default_rng(3)
    county = [f"{c:05d}" for c in rng.integers(1001, 56045, 400)]
    keys = pd.DataFrame(
        {"county": pd.Series(county, dtype="str"), "age": rng.integers(0, 20, 400).astype(str)}
    ).drop_duplicates()
    population = rng.integers(1, 10**5, len(keys)).astype(float)
    strata = Strata(keys, np.zeros(len(keys), dtype=np.int64), population, None, None, "c")
    assert strata.table_id() == reference_dataset_id(keys, population)
    assert strata.legacy_ids() == reference_legacy_ids(keys, population)


def test_ids_are_computed_once_per_table(monkeypatch):
    import dpcounts.release.inputs as inputs

    strata = nasty_strata(1, 2)
    first = strata.table_id(), strata.legacy_ids()
    monkeypatch.setattr(inputs, "_hash_rows", None)  # a second computation would fail
    assert (strata.table_id(), strata.legacy_ids()) == first


def test_the_populations_texts_are_computed_once_for_both_ids(monkeypatch):
    import dpcounts.release.inputs as inputs

    calls = []
    texts = inputs._population_texts
    monkeypatch.setattr(inputs, "_population_texts", lambda *a: calls.append(1) or texts(*a))
    strata = nasty_strata(2, 3)
    table, aliases = strata.identities()
    assert calls == [1]
    assert table == reference_dataset_id(strata.keys, strata.population)
    assert aliases == reference_legacy_ids(strata.keys, strata.population)


@pytest.mark.parametrize("seed", range(20))
def test_key_positions_and_kinds_are_those_of_the_old_pandas_code(seed):
    rng = np.random.default_rng(seed)
    kinds = [k for k in KINDS if k != "mixed objects"]  # the old code cannot sort them
    frame = pd.DataFrame({f"k{j}": nasty_column(str(rng.choice(kinds)), 80, rng) for j in range(4)})
    frame["k9"] = nasty_column("float", 80, rng).where(rng.random(80) > 0.2)  # NaN last
    for keys in itertools.islice(itertools.permutations(frame.columns, 3), 0, None, 7):
        keys = list(keys)
        assert np.array_equal(key_positions(frame, keys), reference_key_positions(frame, keys)), (
            keys
        )
    for column in frame.columns:
        assert _key_kind(frame[column]) == reference_key_kind(frame[column])


@pytest.mark.parametrize(
    "values",
    [
        ["10", "9", "01", "1", "1.5", "-2", "1e1", "+1"],
        ["9007199254740993", "9007199254740992", "1", "18446744073709551617"],
        ["9007199254740993", "9007199254740992", "1.5"],
        ["a", "1", "B", "é", " 2"],
        ["nan", "1"],
        ["1", "NA"],
    ],
)
def test_text_keys_sort_as_before(values):
    rng = np.random.default_rng(0)
    column = pd.Series([values[i] for i in rng.integers(0, len(values), 50)], dtype="str")
    other = pd.Series(rng.integers(0, 3, 50))
    frame = pd.DataFrame({"a": column, "b": other})
    for keys in (["a"], ["a", "b"], ["b", "a"]):
        assert np.array_equal(key_positions(frame, keys), reference_key_positions(frame, keys))
    assert _key_kind(column) == reference_key_kind(column)


def reference_fingerprint(keys: pd.DataFrame, secret: bytes) -> np.ndarray:
    """The overlap fingerprint of the steward's index as dpcounts 0.2 computed it, column
    operations in numpy (equal values of other types, 1 == 1.0 == True, hash as the first)."""
    from dpcounts.ledger.index import _mix, _value_hash, normal_value

    columns = []
    for name in keys.columns:
        codes, uniques = pd.factorize(keys[name].reset_index(drop=True), use_na_sentinel=False)
        hashes = np.array([_value_hash(normal_value(v), secret) for v in uniques], np.uint64)
        columns.append(hashes[codes])
    state = np.full(len(keys), len(columns), dtype=np.uint64)
    if columns:
        values = np.sort(np.stack(columns, axis=1), axis=1)
        for j in range(values.shape[1]):
            state = _mix(state ^ values[:, j])
    else:
        state = _mix(state)
    return np.unique(state)


@pytest.mark.parametrize("kind", KINDS)
def test_the_overlap_fingerprint_is_that_of_the_row_by_row_code(kind):
    """The compiled fingerprint, of the key columns or of the release's coded keys (the
    columns as categoricals), is the fingerprint computed before (the index's stored
    fingerprints stay comparable)."""
    from dpcounts.ledger.index import fingerprint

    for seed in range(3):
        strata = nasty_strata(seed, 3, n=60, kinds=[kind, "text", "int"])
        expected = reference_fingerprint(strata.keys, b"s" * 32)
        assert np.array_equal(fingerprint(strata.keys, b"s" * 32), expected)
        assert np.array_equal(fingerprint(strata.coded_keys(), b"s" * 32), expected)


def test_positions_of_sorted_and_unsorted_codes_are_those_of_lexsort():
    from dpcounts.data.validation import positions_by_codes

    rng = np.random.default_rng(5)
    for n in (0, 1, 2, 50):
        codes = [rng.integers(-1, 4, n), rng.integers(0, 3, n), rng.integers(0, 2**40, n)]
        expected = np.lexsort(codes[::-1])
        assert np.array_equal(positions_by_codes(codes, n), expected)
        ordered = [c[expected] for c in codes]
        assert np.array_equal(positions_by_codes(ordered, n), np.arange(n))
        huge = [rng.integers(0, 2**40, n), rng.integers(0, 2**40, n)]  # beyond 62 bits
        assert np.array_equal(positions_by_codes(huge, n), np.lexsort(huge[::-1]))
