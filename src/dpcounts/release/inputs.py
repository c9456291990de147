"""Reading and checking a release's input: strata, in key order, and nothing else.

Only named columns go anywhere: every input column must be a key (``--keys``), an
attribute (``--attributes``: a public column of the strata, published beside the keys;
:func:`_refuse_attribute_clash`), the count, the population or the prior-rate column; any
other column is refused by name (an unnamed ``crude_rate`` column would otherwise be
copied into the public release). WONDER exports
(``--wonder``) carry descriptive columns of their own (the label beside each ``..._code``
key, rates, notes, flags): they are dropped, never published.

Strata are sorted by their keys before anything is drawn and in every output, so the
release depends on the table's content, not its row order, and no file reveals the
input's order (a file sorted by count would reveal a ranking). The order is
:func:`dpcounts.data.validation.key_order`'s, the study stage's: a key column whose every
value is a number sorts numerically (ids 1, 2, 10, 100), any other as text.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from dpcounts.data.rounding import RoundingReport, round_counts
from dpcounts.data.validation import (
    CSV_SUFFIXES,
    SHOWN,
    describe_duplicates,
    key_order,
    key_sort_codes,
    positions_by_codes,
    refuse_empty_cells,
    validate_strata,
)
from dpcounts.data.validation import read_table as data_read_table
from dpcounts.release import attribute_check, prior_check, prior_source
from dpcounts.release.folder import values_only
from dpcounts.release.request import ReleaseError, ReleaseRequest
from dpcounts.release.strata_list import check_cross_product, match_to_list

#: Column names the release's own files use: a key may not take them.
RESERVED = ("set", "count", "a", "b", "population", "prior_rate", "lower", "upper", "cell")
#: Descriptive columns of a CDC WONDER export that are dropped (besides code labels).
WONDER_DESCRIPTIVE = ("notes", "suppressed", "missing", "not_applicable", "rate_unreliable")


@dataclass(frozen=True)
class Strata:
    """Checked strata sorted by key: key columns, counts, populations, prior rates."""

    keys: pd.DataFrame
    counts: np.ndarray
    population: np.ndarray
    prior_rate: np.ndarray | None
    prior_description: str | None
    count_column: str
    #: what ``--rounding`` did: strata changed, total before and after (private: it
    #: depends on the confidential counts, so only the steward's folder states it)
    rounding: RoundingReport | None = None
    #: the key columns a public prior is constant within (:func:`.prior_source.grouping`;
    #: [] for one rate), None when it varies stratum by stratum or is not public
    prior_groups: list[str] | None = None
    #: the steward's declaration of the public prior's source (``--prior-source``), or None
    prior_declared: str | None = None
    #: the attribute columns per stratum (``--attributes``, a study's ``attributes``:
    #: public, like the keys, published beside them; a sanitised prior and ``dpcounts
    #: estimate`` may group by them), or None
    attributes: pd.DataFrame | None = None
    #: per stratum, its population unit's code when strata share populations
    #: (``population_keys``); None when every stratum is its own unit
    units: np.ndarray | None = None
    #: where a public prior's rates come from (the input or ``--prior FILE``), for the
    #: count-fit check's refusal (:func:`check_prior_fit`); None without a public prior
    prior_where: str | None = None

    def groupable(self) -> pd.DataFrame:
        """The columns a prior may be grouped by: the keys, then any attributes."""
        if self.attributes is None:
            return self.keys
        return pd.concat([self.keys.reset_index(drop=True), self.attributes], axis=1)

    def unit_population(self) -> float:
        """The people counted once: the sum of the populations of the distinct units."""
        if self.units is None:
            return float(self.population.sum())
        first = np.unique(self.units, return_index=True)[1]
        return float(self.population[first].sum())

    #: :meth:`table_id` and :meth:`legacy_ids`, computed once (the keys never change)
    _ids: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def rounded(self) -> int:
        """How many strata's fractional counts ``--rounding nearest`` rounded."""
        return 0 if self.rounding is None else self.rounding.strata_changed

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def table_id(self) -> str:
        """SHA-256 of the canonical public identity of the table: key names, keys and
        populations, whatever the order of its key columns or rows and the file's types.

        The key columns are taken in sorted order of their names and the rows sorted by
        their values as text in that order; a value is its text with surrounding spaces
        stripped, a number written canonically (1001, 1001.0 and "1001" are "1001"; leading
        zeros and letter case are kept: "01001" and "1001" are different codes); a
        population is the number given to the release. The ledger binds the table to its
        dataset's name by this id. It deliberately leaves the counts out: a corrected count
        is a neighbouring dataset, exactly what the budget must cover.

        Exactly: ``sha256(b"dpcounts table identity 2\\n" + repr(names).encode() + the
        rows' repr(row).encode(), one after the other)``, each row the tuple of its values'
        texts (:func:`_canonical`) and ``repr(float(population))``, rows in Python's order
        of those tuples. Computed once per table, over its distinct values
        (:func:`_hash_rows`).
        """
        if "table_id" not in self._ids:
            names = sorted(self.keys.columns)
            columns = [_distinct(self._factorized(name), _canonical_texts) for name in names]
            columns.append(self._population_codes())
            # Python's order of the tuples: each column's texts ranked as Python sorts them
            order = _lex_order([(_ranks(texts), codes) for codes, texts in columns])
            # every value is text, the population's too (repr quotes it: "'444.0'")
            pieces = [(codes, [repr(t) for t in texts]) for codes, texts in columns]
            # one row: "(k1, k2, population)", or "(population,)" with no key
            pieces = _decorate(pieces, "(", ")" if names else ",)")
            digest = hashlib.sha256(b"dpcounts table identity 2\n")
            digest.update(repr(names).encode())
            _hash_rows(digest, pieces, order)
            self._ids["table_id"] = digest.hexdigest()
        return self._ids["table_id"]

    def legacy_ids(self) -> tuple[str, ...]:
        """The ids this table had before :meth:`table_id` was canonical (dpcounts 0.1: the
        key columns in the order given, rows in key order, values as pandas wrote them),
        one per order of its key columns (up to 4 keys): the ledger adds up the releases
        recorded under them with the table's (the migration, docs/privacy.md Part 4).

        Exactly, per order: ``sha256(repr(list(order)).encode() + the rows'
        repr((tuple(keys as str), float(population))).encode())``, rows in
        :func:`~dpcounts.data.validation.key_order` by ``order``, the keys' texts pandas'
        ``astype(str)``. Computed once per table, over its distinct values."""
        if "legacy_ids" not in self._ids:
            names = list(self.keys.columns)
            orders = itertools.permutations(names) if len(names) <= 4 else [tuple(names)]
            reprs = {name: _distinct(self._factorized(name), _legacy_reprs) for name in names}
            sort_codes = dict(zip(names, key_sort_codes(self.keys, names), strict=True))
            population = self._population_codes()
            ids = []
            for order in map(list, orders):
                positions = positions_by_codes([sort_codes[n] for n in order], len(self.keys))
                # one row: "((k1, k2), population)", "((k1,), population)", "((), population)"
                keys = [reprs[n] for n in order]
                keys = _decorate(keys, "((", ")" if len(keys) > 1 else ",)") if keys else []
                pieces = [*keys, *_decorate([population], "" if keys else "((), ", ")")]
                digest = hashlib.sha256()
                digest.update(repr(order).encode())
                _hash_rows(digest, pieces, positions)
                ids.append(digest.hexdigest())
            self._ids["legacy_ids"] = tuple(dict.fromkeys(ids))
        return self._ids["legacy_ids"]

    def identities(self) -> tuple[str, tuple[str, ...]]:
        """(:meth:`table_id`, :meth:`legacy_ids`), the two computed side by side in two
        threads (their hashes, compiled loops and sorts run without Python's lock): about
        the time of the longer one on a machine of two cores. The same ids."""
        if not {"table_id", "legacy_ids"} <= self._ids.keys():
            from concurrent.futures import ThreadPoolExecutor

            for name in self.keys.columns:  # both use them: encoded once, before
                self._factorized(name)
            self._population_codes()
            with ThreadPoolExecutor(2) as pool:
                jobs = [pool.submit(self.table_id), pool.submit(self.legacy_ids)]
                for job in jobs:
                    job.result()
        return self.table_id(), self.legacy_ids()

    def _factorized(self, name: str) -> tuple[pd.Series, tuple[np.ndarray, list] | None]:
        """(key column ``name``, its codes and uniques by
        :func:`dpcounts.encoding.factorize`, computed once for both ids)."""
        from dpcounts.encoding import factorize

        cache = self._ids.setdefault("factorized", {})
        if name not in cache:
            cache[name] = factorize(self.keys[name])
        return self.keys[name], cache[name]

    def _population_codes(self) -> tuple[np.ndarray, list[str]]:
        """:func:`_population_texts` of the populations, computed once for both ids."""
        if "population" not in self._ids:
            self._ids["population"] = _population_texts(self.population, len(self.keys))
        return self._ids["population"]

    def coded_keys(self) -> pd.DataFrame:
        """The key columns as categoricals of the values they hold (the ledger's overlap
        fingerprint factorises them at no cost; the values, hence the fingerprint, are the
        keys'); a column whose values include a missing one stays as it is."""
        columns = {}
        for name in self.keys.columns:
            column, (codes, uniques) = self._factorized(name)
            if any(pd.isna(u) for u in uniques if not isinstance(u, list | tuple | np.ndarray)):
                columns[name] = column.reset_index(drop=True)
                continue
            try:
                categories = pd.Index(uniques, dtype=object, tupleize_cols=False)
                columns[name] = pd.Categorical.from_codes(codes, categories=categories)
            except (ValueError, TypeError):  # equal values of other types (1, 1.0, True)
                columns[name] = column.reset_index(drop=True)
        return pd.DataFrame(columns)


def _lex_order(columns: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The rows sorted by ``columns`` (a rank per code, a code per row; the first most
    significant): one sort of a combined rank when it fits in 63 bits, else ``lexsort``.
    Rows with the same ranks are the same row text, so their order does not matter."""
    sizes = [max(1, len(rank)) for rank, _ in columns]
    if sum(np.log2(sizes)) < 62:
        key = np.zeros(len(columns[0][1]), dtype=np.int64)
        for (rank, codes), size in zip(columns, sizes, strict=True):
            key *= size
            key += rank[codes]
        return np.argsort(key, kind="stable")
    return np.lexsort([rank[codes] for rank, codes in columns][::-1])


def _decorate(pieces: list, prefix: str, suffix: str) -> list:
    """``pieces`` (codes, texts) with ``prefix`` before the first's texts and ``suffix``
    after the last's."""
    pieces = list(pieces)
    codes, texts = pieces[0]
    pieces[0] = (codes, [prefix + t for t in texts])
    codes, texts = pieces[-1]
    pieces[-1] = (codes, [t + suffix for t in texts])
    return pieces


#: Rows hashed at once by :func:`_hash_rows` (bounds the memory of the joined text).
HASH_CHUNK = 1 << 18


def _hash_rows(digest, pieces, order) -> None:
    """Feed ``digest`` the rows ``order`` one after another, each row its pieces' texts
    joined by ", ": the same bytes as ``digest.update(row_text.encode())`` row by row.

    ``pieces`` are (a code per row, a text per code); a compiled loop
    (:func:`dpcounts.table_kernels.row_bytes`) writes a chunk of rows' bytes, fed at once.
    """
    from dpcounts.table_kernels import encode_texts, row_bytes

    encoded = [encode_texts(texts) for _, texts in pieces]
    data = np.concatenate([d for d, _ in encoded])
    offsets, bases, base, start_byte = [], [], 0, 0
    for d, o in encoded:
        offsets.append(o[:-1] + start_byte)
        bases.append(base)
        base += len(o) - 1
        start_byte += len(d)
    offsets = np.concatenate([*offsets, [start_byte]]).astype(np.int64)
    rows = len(order)
    width = np.int32 if rows < 2**31 else np.int64
    codes = np.empty((len(pieces), rows), dtype=width)
    for p, (piece_codes, _) in enumerate(pieces):
        codes[p] = piece_codes
    separator = np.frombuffer(b", ", dtype=np.uint8)
    longest = sum(int(np.diff(o).max(initial=0)) for _, o in encoded)
    longest += len(separator) * (len(pieces) - 1)
    order = np.asarray(order, dtype=np.int64)
    out = np.empty(min(rows, HASH_CHUNK) * longest, dtype=np.uint8)
    for start in range(0, rows, HASH_CHUNK):
        written = row_bytes(
            order[start : start + HASH_CHUNK],
            codes,
            data,
            offsets,
            np.asarray(bases, dtype=np.int64),
            separator,
            out,
        )
        digest.update(memoryview(out)[:written])


def _distinct(factorized, texts_of) -> tuple[np.ndarray, list[str]]:
    """(a code per row, the distinct texts): ``texts[codes[i]]`` is row i's text by
    ``texts_of`` (a function of (the column, its factorisation) giving (codes, texts),
    texts maybe repeated)."""
    codes, texts = texts_of(*factorized)
    merged, distinct = pd.factorize(np.asarray(texts, dtype=object))
    return merged[codes].astype(np.int64), list(distinct)


def _canonical_texts(column: pd.Series, factorized) -> tuple[np.ndarray, list[str]]:
    """:func:`_canonical` of each value, computed once per distinct value where the column's
    type makes equal values equal texts (numbers, bools, text), else row by row
    (``factorized``: the column's codes and uniques)."""
    column = column.reset_index(drop=True)
    dtype = column.dtype
    plain = (
        (isinstance(dtype, np.dtype) and dtype.kind in "biuf")
        or isinstance(dtype, pd.StringDtype)
        or (
            pd.api.types.is_object_dtype(dtype)
            and pd.api.types.infer_dtype(column, skipna=False) == "string"
        )
    )
    if not plain:  # mixed objects (1 == 1.0 == True), categories, dates: every row
        return np.arange(len(column)), [_canonical(v) for v in column]
    codes, uniques = factorized
    return codes, [_canonical(v) for v in uniques]


def _legacy_reprs(column: pd.Series, factorized) -> tuple[np.ndarray, list[str]]:
    """``repr`` of each value as ``astype(str)`` writes it, once per distinct text (row
    by row where a value is missing: ``astype(str)`` keeps it missing). A text column
    without a missing value is its own text: its factorisation ``factorized`` serves."""
    dtype = column.dtype
    if isinstance(dtype, pd.StringDtype) and not column.hasnans:
        codes, uniques = factorized
        if all(type(u) is str for u in uniques):
            return codes, [repr(u) for u in uniques]
    text = column.reset_index(drop=True).astype(str)
    if text.isna().any():
        return np.arange(len(text)), [repr(v) for v in text]
    codes, uniques = pd.factorize(text)
    return codes, [repr(v) for v in uniques]


def _population_texts(population, rows: int) -> tuple[np.ndarray, list[str]]:
    """(a code per row, distinct texts ``repr(float(p))``): one repr per distinct float."""
    values = np.asarray(population, dtype=float)
    if values.shape != (rows,):
        raise ValueError(f"{values.size} populations for {rows} strata")
    codes, bits = pd.factorize(np.ascontiguousarray(values).view(np.uint64))
    texts = [repr(float(v)) for v in np.asarray(bits, dtype=np.uint64).view(np.float64)]
    merged, distinct = pd.factorize(np.asarray(texts, dtype=object))
    return merged[codes].astype(np.int64), list(distinct)


def _ranks(texts: list[str]) -> np.ndarray:
    """The rank of each of the distinct ``texts`` in Python's order of strings."""
    try:  # UTF-8's byte order is the order of the code points, Python's
        import pyarrow as pa
        import pyarrow.compute as pc

        order = pc.sort_indices(pa.array(texts, type=pa.large_string())).to_numpy()
    except (pa.ArrowException, UnicodeError, TypeError):  # a lone surrogate, say
        order = sorted(range(len(texts)), key=texts.__getitem__)
    rank = np.empty(len(texts), dtype=np.int64)
    rank[order] = np.arange(len(texts))
    return rank


def _canonical(value) -> str:
    """A key value as text: numbers canonical (1001.0 -> 1001), text stripped as given."""
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        number = float(value)
        return str(int(number)) if number.is_integer() else repr(number)
    return str(value).strip()


def read_table(path: Path) -> pd.DataFrame:
    """:func:`dpcounts.data.validation.read_table`, its errors as :class:`ReleaseError`."""
    try:
        return data_read_table(path)
    except ValueError as err:
        raise ReleaseError(str(err)) from err


def _read_input(request: ReleaseRequest) -> tuple[pd.DataFrame, str, list[str], list[str]]:
    """The input frame, its count column, its key columns and the columns dropped."""
    path = request.input
    if request.wonder:
        from dpcounts.data.wonder import read_wonder, snake_case

        if not path.is_file():
            raise ReleaseError(f"{path}: file not found; expected a CDC WONDER export")
        try:
            frame = read_wonder(path)
        except ValueError as err:
            raise ReleaseError(str(err)) from err
        zeros = frame.attrs.get("query", {}).get("Show Zero Values")
        listed = request.strata_source == "external-file"
        if zeros is not None and zeros.lower() not in ("true", "enabled") and not listed:
            raise ReleaseError(
                f"{path}: the export was made with 'Show Zero Values: {zeros}', so its "
                "strata without deaths are missing and the release would publish which "
                "strata have deaths. Export again with Show Zero Values ticked, or give "
                "--strata FILE (a public list of every stratum and its population; "
                "unlisted strata count 0)"
            )
        keys = [snake_case(k) for k in request.keys]
        labels = [k[: -len("_code")] for k in keys if k.endswith("_code")]
        descriptive = {*WONDER_DESCRIPTIVE, *labels}
        dropped = [c for c in frame.columns if c in descriptive or "rate" in c]
        return frame, request.count_column or "deaths", keys, dropped
    return read_table(path), request.count_column or "count", list(request.keys), []


def _describe_keys(keys: pd.DataFrame, mask: np.ndarray) -> str:
    rows = keys.loc[mask]
    shown = [
        ", ".join(f"{name}={value!r}" for name, value in zip(keys.columns, row, strict=True))
        for row in rows.head(SHOWN).itertuples(index=False)
    ]
    text = "; ".join(f"({item})" for item in shown)
    if len(rows) > SHOWN:
        text += f" and {len(rows) - SHOWN} more"
    return text


def _check_columns(request, frame, count, keys, dropped, prior_in_input, listed=False) -> None:
    """The input's columns are the keys, the count and the value columns (only the count
    when the strata come from a list, which holds the populations and prior rates)."""
    source = request.input
    if not keys:
        raise ReleaseError(f"{source}: --keys names no column; expected the stratum keys")
    reserved = [k for k in keys if k in RESERVED]
    if reserved:
        raise ReleaseError(
            f"{source}: key column(s) {reserved} clash with the release's own columns "
            f"{list(RESERVED)}; rename them in the input"
        )
    value_columns = [count, request.population_column]
    if prior_in_input:
        value_columns.append(request.prior_rate_column)
    _refuse_attribute_clash(request, keys, value_columns, source)
    attributes = [] if listed else list(request.attributes)  # a list's are the list's
    if listed:
        dropped = [*dropped, *value_columns[1:]]  # the list's values are used
        value_columns = [count]
    clash = [k for k in keys if k in value_columns]
    if clash:
        raise ReleaseError(f"{source}: {clash} named both as key and as a value column")
    missing = [c for c in [*keys, *attributes, *value_columns] if c not in frame.columns]
    if missing:
        hint = ""
        spare = [c for c in frame.columns if c not in keys and c not in value_columns]
        options = {
            count: ("counts", "--count-column"),
            request.population_column: ("populations", "--population-column"),
        }
        for column in missing:  # a value column under another name: which option names it
            if column in options and spare:
                what, option = options[column]
                hint += f"; name the {what}' column with {option} (one of {spare})"
        if prior_in_input and request.prior_rate_column in missing:  # where else it can come from
            hint += (
                "; without public prior rates, give --sanitised-prior-by with no column (the "
                "overall rate, no budget) or with columns (their noisy rates), or --prior FILE"
            )
        raise ReleaseError(
            f"{source}: missing column(s) {missing}; expected the keys {keys}"
            + (f", the attributes {attributes}" if attributes else "")
            + f" and the value columns {value_columns}, found {list(frame.columns)}{hint}"
        )
    # md uses no prior: its prior-rate column may stay in the table (it is never read).
    unused_prior = [request.prior_rate_column] if not request.needs_prior else []
    allowed = {*keys, *request.attributes, *value_columns, *dropped, *unused_prior}
    unnamed = [c for c in frame.columns if c not in allowed]
    rate = request.prior_rate_column
    if rate in unnamed and request.needs_prior:  # the prior comes from elsewhere
        other = (
            "--sanitised-prior-by, which derives the prior from the counts"
            if request.sanitised_prior_by is not None
            else f"--prior {request.prior_file}"
        )
        instead = "--sanitised-prior-by" if request.sanitised_prior_by is not None else "--prior"
        raise ReleaseError(
            f"{source}: column {rate!r} holds prior rates, but the prior comes from {other}: "
            f"drop the column from the input, or use it as the prior instead of {instead} "
            "(leave that option out; the rates are then published, declared public by you)"
        )
    if unnamed:
        raise ReleaseError(
            f"{source}: column(s) {unnamed} are not named as a key (--keys), an attribute "
            f"(--attributes), the count "
            f"({count!r}), the population ({request.population_column!r})"
            + (f" or the prior rate ({request.prior_rate_column!r})" if prior_in_input else "")
            + "; remove them from the input or name them: unnamed columns are refused so "
            "that nothing reaches the release by accident"
        )


def _refuse_attribute_clash(request, keys, value_columns, source) -> None:
    """An attribute (``--attributes``) is a column of its own: not a key, the count, the
    population, the prior rate or a name the release's files use, and named once."""
    attributes = list(request.attributes)
    taken = {
        **{c: "a name the release's own files use" for c in RESERVED},
        **{c: "the count, population or prior-rate column" for c in value_columns},
        **{c: "a key (--keys)" for c in keys},
    }
    clash = [f"{c!r} ({taken[c]})" for c in attributes if c in taken]
    if clash:
        raise ReleaseError(
            f"{source}: --attributes {', '.join(clash)}: expected public columns of the "
            "strata other than the keys, the count, the population and the prior rate"
        )
    twice = sorted({c for c in attributes if attributes.count(c) > 1})
    if twice:
        raise ReleaseError(f"{source}: --attributes names {twice} more than once")


def _prior_from_file(request: ReleaseRequest, keys: pd.DataFrame) -> np.ndarray:
    """The prior rate of every stratum from ``--prior FILE``, joined on the key columns the
    file has: all of them (a rate per stratum), some (a rate per group, e.g. national rates
    by age and sex) or none (one row: an overall rate)."""
    prior_path = request.prior_file
    prior = read_table(prior_path)
    column = request.prior_rate_column
    names = [name for name in keys.columns if name in prior.columns]
    if column not in prior.columns or (not names and len(prior) != 1):
        raise ReleaseError(
            f"{prior_path}: expected the column {column!r} and some of the input's key "
            f"columns {list(keys.columns)} to join on (or {column!r} alone in one row, an "
            f"overall rate), found {list(prior.columns)}"
        )
    prior = prior[[*names, column]]
    if names and prior.duplicated(subset=names).any():
        raise ReleaseError(
            f"{prior_path}: duplicate key(s) {describe_duplicates(prior, names)}; "
            f"expected one prior rate per value of {names}"
        )
    if not names:
        return np.full(len(keys), pd.to_numeric(prior[column], errors="coerce").iloc[0])
    # Join on the keys as text, so a Parquet input with integer codes matches a CSV prior.
    left = keys[names].astype(str).reset_index(drop=True)
    right = prior.astype({name: str for name in names})
    joined = left.merge(right, on=names, how="left", validate="many_to_one")
    absent = joined[column].isna().to_numpy()
    if absent.any():
        raise ReleaseError(
            f"{prior_path}: no {column!r} for stratum/strata "
            f"{_describe_keys(keys.reset_index(drop=True), absent)} of {request.input}; "
            "expected a prior rate for every stratum of the input"
        )
    return pd.to_numeric(joined[column], errors="coerce").to_numpy(dtype=float)


def _refuse_empty_keys(frame: pd.DataFrame, keys: list[str], path: Path, csv: bool) -> None:
    """An empty key cell is refused naming the column and the file's lines (a CSV's)."""
    try:
        refuse_empty_cells(
            frame, keys, str(path), lines=csv and path.name.lower().endswith(CSV_SUFFIXES)
        )
    except ValueError as err:
        raise ReleaseError(str(err)) from None


def _input_table(request: ReleaseRequest):
    """The input's strata, checked and sorted by the keys: (frame, count column, keys,
    what the rounding did, where they come from)."""
    prior_in_input = (
        request.needs_prior and request.prior_file is None and request.sanitised_prior_by is None
    )
    frame, count, keys, dropped = _read_input(request)
    frame = values_only(frame)  # the input's metadata (attrs, footer, categories) stops here
    source = str(request.input)
    listed = request.strata_source == "external-file"
    _check_columns(request, frame, count, keys, dropped, prior_in_input, listed)
    named = keys if listed else [*keys, *request.attributes]
    _refuse_empty_keys(frame, named, request.input, csv=not request.wonder)
    if listed:  # the list holds the strata's public columns: populations, attributes, rates
        values = [*request.attributes, request.population_column]
        values += [request.prior_rate_column] if prior_in_input else []
        strata_list = read_table(Path(request.strata))
        named = [*keys, *request.attributes]
        if all(column in strata_list.columns for column in named):
            _refuse_empty_keys(strata_list, named, Path(request.strata), csv=True)
        frame = match_to_list(frame, strata_list, keys, count, values, source, str(request.strata))
    try:
        # the rule the study stage applies too (studies.<name>.rounding)
        frame, rounding = round_counts(
            frame, count=count, keys=keys, rounding=request.rounding, source=source,
            option="--rounding nearest",
        )  # fmt: skip
        validate_strata(
            frame, count=count, population=request.population_column, keys=keys, source=source,
            denominator=request.denominator,
        )  # fmt: skip
    except ValueError as err:
        raise ReleaseError(str(err)) from err
    if request.strata_source == "cross-product":
        check_cross_product(frame, keys, source)
    return key_order(frame, keys), count, keys, rounding, source


def _study_table(request: ReleaseRequest):
    """The study's strata (``--study``), checked by the study stage's code."""
    from dpcounts.studies.stage.table import StudyDataError

    study = request.study
    if request.strata_source == "external-file":
        raise ReleaseError(
            f"--study {study.config}:{study.name}: --strata FILE does not apply; the study's "
            "table (after its row selection) is the list of strata: say how it was made with "
            "--strata input or --strata cross-product"
        )
    try:
        frame, rounding = study.strata()
    except (StudyDataError, ValueError) as err:
        raise ReleaseError(str(err)) from None
    keys, source = list(study.definition.keys), f"{study.definition.table} (studies.{study.name})"
    if request.strata_source == "cross-product":
        check_cross_product(frame, keys, source)
    return frame, study.definition.count, keys, rounding, source


def load_strata(request: ReleaseRequest, check_fit: bool = True) -> Strata:
    """Read, check and sort the input; raise :class:`ReleaseError` naming what is wrong.

    ``check_fit=False`` leaves the checks that read the counts beyond their total (a
    public prior's fit, the attributes' split) to :func:`check_count_fit`, so that a release
    makes every decision of its public inputs first (``build_release``)."""
    if request.prior_file is not None and request.sanitised_prior_by is not None:
        raise ReleaseError("give either --prior FILE or --sanitised-prior-by, not both")
    if request.denominator not in ("population", "expected"):
        raise ReleaseError(f"denominator {request.denominator!r}; expected population or expected")
    read = _input_table if request.study is None else _study_table
    frame, count, keys, rounding, source = read(request)
    counts = pd.to_numeric(frame[count]).to_numpy(dtype=float).astype(np.int64)
    populations = pd.to_numeric(frame[request.population_column]).to_numpy(dtype=float)
    attributes = list(request.attributes)
    for name in request.population_keys or ():
        if name not in keys:
            raise ReleaseError(f"--population-keys {name!r} is not a key column; keys are {keys}")
    key_frame = frame[keys].copy()

    prior_rate = prior_description = prior_groups = where = None
    try:
        declared = prior_source.check_declaration(request.prior_source)
    except ValueError as err:
        raise ReleaseError(str(err)) from None
    if declared is not None and (not request.needs_prior or request.sanitised_prior_by):
        raise ReleaseError(
            f"{prior_source.OPTION} declares the source of public prior rates (--prior FILE "
            "or the input's prior-rate column); "
            + (
                "md uses no prior"
                if not request.needs_prior
                else "--sanitised-prior-by derives the prior from the counts, privately"
            )
        )
    if request.needs_prior and request.sanitised_prior_by is None:
        if request.prior_file is not None:
            prior_rate = _prior_from_file(request, key_frame)
            prior_description = f"column {request.prior_rate_column!r} of an external file (public)"
            where = str(request.prior_file)
        else:
            column = request.prior_rate_column
            prior_rate = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)
            not_number = np.isnan(prior_rate) & frame[column].notna().to_numpy()
            if not_number.any():
                raise ReleaseError(
                    f"{source}: column {column!r} is not numeric at "
                    f"{_describe_keys(key_frame, not_number)}; expected rates such as 0.0012"
                )
            prior_description = f"column {column!r} of the input, declared public by the steward"
            where = source
        bad = ~np.isfinite(prior_rate) | (prior_rate <= 0)
        if bad.any():
            raise ReleaseError(
                f"{where}: prior rate missing or <= 0 at {_describe_keys(key_frame, bad)}; "
                + prior_check.ZERO_RATE
            )
        # public inputs first: the prior's shape needs no count
        prior_groups = prior_source.grouping(key_frame, prior_rate)
        if declared is None:
            raise ReleaseError(prior_source.refusal(where, keys, prior_groups, request.study))
    if request.sanitised_prior_by:
        absent = [c for c in request.sanitised_prior_by if c not in (*keys, *attributes)]
        if absent:
            raise ReleaseError(
                f"{source}: --sanitised-prior-by column(s) {absent} are not key columns; keys "
                f"are {keys}"
                + (f", attributes {attributes}" if attributes else "")
                + " (a public column of the strata can group the prior: name it with "
                "--attributes)"
            )
    strata = Strata(
        key_frame, counts, populations, prior_rate, prior_description, count, rounding,
        prior_groups=prior_groups, prior_declared=declared,
        attributes=frame[attributes].reset_index(drop=True) if attributes else None,
        units=_units(frame, request.population_keys, keys),
        prior_where=where,
    )  # fmt: skip
    if check_fit:
        check_count_fit(request, strata)
    return strata


def check_count_fit(request: ReleaseRequest, strata: Strata) -> None:
    """The refusals that read the counts beyond their total, before anything is spent:
    public prior rates that fit the counts (:func:`check_prior_fit`) and attributes that
    split them (:func:`check_attributes`)."""
    check_prior_fit(request, strata)
    check_attributes(request, strata)


def check_attributes(request: ReleaseRequest, strata: Strata) -> None:
    """Refuse (ReleaseError) an attribute that splits the counts or rates with no overlap
    (:mod:`.attribute_check`), unless the steward overrode it."""
    if strata.attributes is None or request.attributes_are_public_i_am_sure:
        return
    found = attribute_check.attribute_separation(
        strata.keys, strata.attributes, strata.counts, strata.population
    )
    if found is not None:
        where = request.input if request.study is None else f"study {request.study.name}"
        raise ReleaseError(attribute_check.refusal(str(where), found))


def check_prior_fit(request: ReleaseRequest, strata: Strata) -> None:
    """Refuse (ReleaseError) public prior rates that fit the counts far better than chance
    (:mod:`.prior_check`), unless the steward overrode it: a refusal that reads the counts."""
    if strata.prior_rate is None or request.prior_is_public_i_am_sure:
        return
    poisson = request.denominator == "expected" or strata.units is not None
    why = prior_check.prior_reproduces_counts(
        strata.counts, strata.population, strata.prior_rate, poisson=poisson
    )
    if why is not None:
        raise ReleaseError(prior_check.refusal(strata.prior_where, why))
    columns = strata.prior_groups
    if columns:  # a grouped prior: are its rates the table's own group rates?
        codes = prior_source.group_codes(strata.keys, columns)
        found = prior_check.group_fit(
            strata.counts, strata.population, strata.prior_rate, codes, poisson=poisson
        )
        if found is not None:
            mask = np.zeros(len(strata.keys), dtype=bool)
            mask[found.groups] = True
            named = _describe_keys(strata.keys[columns].reset_index(drop=True), mask)
            raise ReleaseError(prior_check.group_refusal(strata.prior_where, columns, found, named))


def _units(frame: pd.DataFrame, population_keys, keys: list[str]) -> np.ndarray | None:
    """Per stratum, the code of its population unit (strata that share a population, such
    as the causes of death of one county and age group), or None when each is its own."""
    if not population_keys or list(population_keys) == keys:
        return None
    return frame.groupby(list(population_keys), sort=False).ngroup().to_numpy()
