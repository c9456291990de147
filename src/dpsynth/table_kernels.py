"""Compiled loops of a table's identities (issue #36): the bytes of its rows for
:meth:`dpsynth.release.inputs.Strata.dataset_id` and the per-stratum hashes of
:func:`dpsynth.ledger_index.fingerprint`, one pass over the rows instead of a column
operation per piece of text.

Both compute exactly what the column-by-column code computed (the tests compare them with
the row-by-row definitions); only the time changes: about a second per 10 million rows.
"""

from __future__ import annotations

import weakref

import numba
import numpy as np
import pandas as pd

from dpsynth import compile_cache

#: Cache the machine code on disk when numba can write it somewhere (dpsynth.compile_cache).
CACHE = compile_cache.available(__file__)


#: id of a pyarrow text array -> its :func:`factorize` (read-only codes, uniques). Arrays
#: are immutable, and a column's array is shared by the frames copied or selected from it,
#: so a release's steps (the prior's grouping, the table's ids, the utility report) encode
#: each key column once; an entry goes when its array does.
_ENCODED: dict[int, tuple[np.ndarray, list]] = {}


def factorize(column: pd.Series, sort: bool = False) -> tuple[np.ndarray, list]:
    """``pd.factorize(column, sort=sort, use_na_sentinel=False)`` as (integer codes, list
    of uniques), through pyarrow's dictionary encoding for a text column that pyarrow holds
    without a missing value (several times faster on 10 million rows, and computed once
    per array: the codes are then read-only int32, else int64). Unsorted, the codes may
    number the uniques in another order, never group other rows; sorted, text is in
    Python's order (its UTF-8 bytes'), as pandas sorts it."""
    array = getattr(column.array, "_pa_array", None)
    if array is not None and array.null_count == 0 and len(array):
        import pyarrow as pa

        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            if id(array) not in _ENCODED:
                encoded = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
                encoded = encoded.dictionary_encode()
                codes = encoded.indices.to_numpy(zero_copy_only=False)  # int32: half the bytes
                codes.flags.writeable = False
                _ENCODED[id(array)] = (codes, encoded.dictionary.to_pylist())
                weakref.finalize(array, _ENCODED.pop, id(array), None)
            codes, uniques = _ENCODED[id(array)]
            return sorted_codes(codes, uniques) if sort else (codes, list(uniques))
    codes, uniques = pd.factorize(column.reset_index(drop=True), sort=sort, use_na_sentinel=False)
    return np.asarray(codes, dtype=np.int64), list(uniques)


def sorted_codes(codes: np.ndarray, uniques: list[str]) -> tuple[np.ndarray, list[str]]:
    """A factorisation of text (``codes`` into distinct ``uniques``) renumbered in Python's
    order of the texts (their UTF-8 bytes', as pyarrow sorts them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    order = pc.sort_indices(pa.array(uniques, type=pa.large_string())).to_numpy()
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], [uniques[i] for i in order]


def encode_texts(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes of ``texts`` one after another, offsets: text i is
    ``data[offsets[i]:offsets[i + 1]]``)."""
    encoded = [t.encode("utf-8") for t in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    return data, offsets


@numba.njit(cache=CACHE, nogil=True)  # the table's two ids are hashed side by side
def row_bytes(rows, codes, data, offsets, bases, separator, out):  # pragma: no cover
    """Write into ``out`` the rows ``rows`` one after another, each its pieces' texts
    joined by ``separator``: piece p of row r is text ``codes[p, r]`` of piece p, whose
    bytes are ``data[offsets[bases[p] + t]:offsets[bases[p] + t + 1]]``. Returns the bytes
    written (``out`` must hold them)."""
    pieces = codes.shape[0]
    at = 0
    for i in range(rows.shape[0]):
        r = rows[i]
        for p in range(pieces):
            if p:
                for b in range(separator.shape[0]):
                    out[at] = separator[b]
                    at += 1
            t = bases[p] + codes[p, r]
            for b in range(offsets[t], offsets[t + 1]):
                out[at] = data[b]
                at += 1
    return at


@numba.njit(cache=CACHE)
def stratum_hashes(codes, hashes, bases):  # pragma: no cover
    """Per row, :func:`dpsynth.ledger_index.fingerprint`'s hash of a stratum: its values'
    hashes (value t of column j is ``hashes[bases[j] + codes[j, r]]``) sorted, then mixed
    into a state that starts at the number of columns (splitmix64's finaliser)."""
    columns, n = codes.shape
    out = np.empty(n, dtype=np.uint64)
    values = np.empty(columns, dtype=np.uint64)
    golden = np.uint64(0x9E3779B97F4A7C15)
    m1 = np.uint64(0xBF58476D1CE4E5B9)
    m2 = np.uint64(0x94D049BB133111EB)
    s30, s27, s31 = np.uint64(30), np.uint64(27), np.uint64(31)
    for r in range(n):
        for j in range(columns):
            v = hashes[bases[j] + codes[j, r]]
            k = j
            while k > 0 and values[k - 1] > v:  # insertion sort: a few columns
                values[k] = values[k - 1]
                k -= 1
            values[k] = v
        state = np.uint64(columns)
        for j in range(columns):
            z = (state ^ values[j]) + golden
            z = (z ^ (z >> s30)) * m1
            z = (z ^ (z >> s27)) * m2
            state = z ^ (z >> s31)
        out[r] = state
    return out
