"""Reading a release folder within bounds decided before a table is read.

The verifier reads no more than the files hold, and no more than the manifest's shape can
need: the manifest at most :data:`MAX_MANIFEST_BYTES`; at most :data:`MAX_ROWS` rows,
:data:`MAX_STRATA` strata and :data:`MAX_KEYS` keys (:func:`bounds`); a listed file no
larger than :func:`table_bytes` before it is hashed; a table only once the file itself says
the manifest's row count (a Parquet footer of at most :data:`MAX_FOOTER_BYTES`, a CSV
file's lines of bounded length), flat columns of numbers or text and a decoded size within
:data:`MAX_CELL_BYTES` a cell and :func:`table_bytes` in all; its rows in batches
(:func:`batches`: text columns kept dictionary-encoded, no text longer than
:data:`MAX_CELL_BYTES`). :class:`_Release` is the folder, its manifest and its tables, each
read once; the synthetic sets are streamed (:meth:`_Release.batches`), so memory does not
grow with ``sets``, and neither a manifest's ``sets`` nor a small compressed file makes it
allocate more. Freed memory goes back to the system between the checks
(:func:`return_freed_memory`, :func:`_give_back`).
"""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path

import numpy as np
import pandas as pd

from dpcounts.data.validation import key_codes_by_entry, key_runs, key_sort_codes
from dpcounts.verify.words import shown

#: The largest manifest read, in bytes (a real one is a few kilobytes).
MAX_MANIFEST_BYTES = 1 << 20
#: The most rows a release's synthetic table may hold (``sets`` x ``strata``) and the most
#: strata (rows of the hyperparameters, held in memory): a manifest claiming more fails
#: before any table is read.
MAX_ROWS = 50_000_000
MAX_STRATA = 50_000_000
#: The most key columns, and columns of any table (keys, groups and the fixed columns).
MAX_KEYS = 32
MAX_COLUMNS = MAX_KEYS + 16
#: The longest text a cell may hold, in bytes (keys are short: a code, a region's name).
MAX_CELL_BYTES = 1024
#: The decoded bytes a table may need on average per cell (numbers take 8, keys a few more):
#: a file whose footer or content says more is refused before it is decoded.
MAX_MEAN_CELL_BYTES = 48
#: Slack for a small table's fixed costs (headers, dictionaries, a footer).
TABLE_SLACK_BYTES = 1 << 20
#: The largest Parquet footer read (a release's is a few kilobytes).
MAX_FOOTER_BYTES = 1 << 22
#: Rows decoded at a time.
BATCH_ROWS = 1 << 17
#: The most entries (files and folders) of a release folder looked at.
MAX_ENTRIES = 1000


def attributes(manifest: dict) -> list[str]:
    """The release's attribute columns, published after the keys in both tables: the
    manifest's ``attributes``, or in a release made before that field the columns of a
    sanitised prior's groups that are not keys (then the hyperparameters' only)."""
    if "attributes" in manifest:
        return list(manifest["attributes"])
    prior = manifest.get("prior") if isinstance(manifest.get("prior"), dict) else {}
    groups = prior.get("groups") if prior.get("kind") == "sanitised" else None
    return [c for c in groups or [] if c not in manifest["keys"]]


def bounds(manifest: dict) -> list[str]:
    """What the manifest's shape asks beyond this verifier's bounds (:data:`MAX_ROWS`,
    :data:`MAX_STRATA`, :data:`MAX_KEYS`), decided before any table is read."""
    sets, strata, keys = manifest["sets"], manifest["strata"], manifest["keys"]
    over = []
    if strata > MAX_STRATA:
        over.append(f"strata {strata} is more than {MAX_STRATA}")
    if sets * strata > MAX_ROWS:
        over.append(f"sets x strata = {sets * strata} rows is more than {MAX_ROWS}")
    if len(keys) > MAX_KEYS:
        over.append(f"{len(keys)} keys, more than {MAX_KEYS}")
    elif len(keys) + len(attributes(manifest)) > MAX_KEYS:
        over.append(f"{len(keys)} keys and {len(attributes(manifest))} attributes, more than "
                    f"{MAX_KEYS} columns")  # fmt: skip
    return over


def regular_file(path: Path) -> bool:
    """Whether ``path`` is a regular file itself: not a symbolic link (which may point
    outside the folder), a folder, a pipe or a device (which may block or never end)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _refuse_irregular(path: Path) -> None:
    """ValueError unless ``path`` is a regular file itself (:func:`regular_file`)."""
    if not regular_file(path):
        raise ValueError(f"{shown(path.name)} is not a regular file in the folder")


def table_bytes(rows: int, columns: int = MAX_COLUMNS) -> int:
    """The most bytes a table of ``rows`` x ``columns`` may take, on disk or decoded."""
    return rows * columns * MAX_MEAN_CELL_BYTES + TABLE_SLACK_BYTES


def _footer(path: Path) -> int:
    """The length of a Parquet file's footer, from its last 8 bytes; ValueError when it
    is no Parquet file or its footer is longer than :data:`MAX_FOOTER_BYTES`."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        handle.seek(max(size - 8, 0))
        tail = handle.read(8)
    if size < 12 or tail[4:] != b"PAR1":
        raise ValueError(f"{shown(path.name)} is not a Parquet file")
    footer = int.from_bytes(tail[:4], "little")
    if footer > MAX_FOOTER_BYTES or footer > size - 8:
        raise ValueError(
            f"{shown(path.name)}: a footer of {footer} bytes, more than any release's "
            f"({MAX_FOOTER_BYTES}) or the file's"
        )
    return footer


def _parquet(path: Path, rows: int | None = None):
    """The Parquet file's reader, once its footer is known to be small, its columns flat and
    few, its row count ``rows`` (when given) and its decoded size (the footer's uncompressed
    sizes) within :func:`table_bytes`; ValueError otherwise, before any value is read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _footer(path)
    reader = pq.ParquetFile(path)
    meta = reader.metadata
    found = int(meta.num_rows)
    if rows is not None and found != rows:
        raise ValueError(f"{shown(path.name)} holds {found} rows, the manifest says {rows}")
    if meta.num_columns > MAX_COLUMNS:
        raise ValueError(f"{shown(path.name)}: {meta.num_columns} columns, more than {MAX_COLUMNS}")
    schema = reader.schema_arrow
    for f in schema:
        kind = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                or pa.types.is_string(kind) or pa.types.is_large_string(kind)
                or pa.types.is_boolean(kind)):  # fmt: skip
            raise ValueError(
                f"{shown(path.name)}: column {shown(f.name, 60)} is of type {shown(f.type, 60)}, "
                "not numbers or text"
            )
    groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
    if sum(g.num_rows for g in groups) != found or any(g.num_rows < 0 for g in groups):
        raise ValueError(f"{shown(path.name)}: its row groups do not add up to its {found} rows")
    decoded = 0
    for g in groups:
        for j in range(g.num_columns):
            chunk = g.column(j).total_uncompressed_size
            if chunk < 0 or chunk > g.num_rows * MAX_CELL_BYTES + TABLE_SLACK_BYTES:
                raise ValueError(
                    f"{shown(path.name)}: column {shown(g.column(j).path_in_schema, 60)} "
                    f"decodes to {chunk} bytes for {g.num_rows} rows, more than "
                    f"{MAX_CELL_BYTES} bytes a cell"
                )
            decoded += chunk
    limit = table_bytes(found, max(meta.num_columns, 1))
    if decoded > limit:
        raise ValueError(
            f"{shown(path.name)}: {decoded} bytes decoded, more than {found} rows of "
            f"{meta.num_columns} columns need ({limit})"
        )
    return reader


def _csv_rows(path: Path) -> int:
    """A CSV file's rows (its lines, the header aside), streamed, once no line is longer
    than :data:`MAX_COLUMNS` cells of :data:`MAX_CELL_BYTES`."""
    longest, since, lines = MAX_COLUMNS * (MAX_CELL_BYTES + 3), 0, 0
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
            if ends.size:
                gaps = np.diff(ends, prepend=-1)
                gaps[0] += since
                if int(gaps.max()) > longest:
                    raise ValueError(f"{shown(path.name)}: a line longer than {longest} bytes")
                since = len(chunk) - 1 - int(ends[-1])
            else:
                since += len(chunk)
            if since > longest:
                raise ValueError(f"{shown(path.name)}: a line longer than {longest} bytes")
            lines += ends.size
    return max(lines + (since > 0) - 1, 0)


def table_rows(path: Path) -> int:
    """How many rows a published table holds, from the file itself and without reading its
    values: a Parquet file's footer (once it is small and consistent), or a CSV file's
    lines (streamed, each of bounded length), the header aside."""
    _refuse_irregular(path)
    if path.suffix == ".csv":
        return _csv_rows(path)
    return int(_parquet(path).metadata.num_rows)


def _check_text(batch, name: str) -> None:
    """Refuse a batch whose text cells are longer than :data:`MAX_CELL_BYTES`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for field_, column in zip(batch.schema, batch.columns, strict=True):
        values = column.dictionary if pa.types.is_dictionary(column.type) else column
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            longest = pc.max(pc.binary_length(values)).as_py() if len(values) else 0
            if longest is not None and longest > MAX_CELL_BYTES:
                raise ValueError(
                    f"{shown(name)}: column {shown(field_.name, 60)} holds a text of "
                    f"{longest} bytes, more than any key ({MAX_CELL_BYTES})"
                )


def batches(path: Path, rows: int):
    """The table's rows in Arrow record batches of at most :data:`BATCH_ROWS`, text cells
    at most :data:`MAX_CELL_BYTES` long and the decoded bytes within :func:`table_bytes`;
    Parquet as written (text columns dictionary-encoded, so that a few values repeated
    many times decode to no more than they are), CSV as text. ValueError once the file
    is not what ``rows`` and these bounds allow, before its values are decoded where the
    file says so, else at the first batch beyond them."""
    import pyarrow as pa

    _refuse_irregular(path)
    if path.suffix == ".csv":
        found = _csv_rows(path)
        if found != rows:
            raise ValueError(f"{shown(path.name)} holds {found} rows, the manifest says {rows}")
        if path.stat().st_size > table_bytes(rows):
            raise ValueError(f"{shown(path.name)}: more bytes than {rows} rows need")
        chunks = pd.read_csv(path, dtype=str, keep_default_na=False, chunksize=BATCH_ROWS)
        source = (pa.RecordBatch.from_pandas(c, preserve_index=False) for c in chunks)
        columns = None
    else:
        reader = _parquet(path, rows)
        schema = reader.schema_arrow
        text = [f.name for f in schema if pa.types.is_string(f.type)
                or pa.types.is_large_string(f.type)
                or pa.types.is_dictionary(f.type)]  # fmt: skip
        reader = type(reader)(path, read_dictionary=text)
        columns = len(schema)
        source = reader.iter_batches(batch_size=BATCH_ROWS, use_pandas_metadata=False)
    limit, decoded = None, 0
    for batch in source:
        if limit is None:
            limit = table_bytes(rows, max(columns or batch.num_columns, 1))
        _check_text(batch, path.name)
        decoded += batch.nbytes
        if decoded > limit:
            raise ValueError(
                f"{shown(path.name)}: more than {limit} bytes decoded, more than {rows} rows need"
            )
        yield batch


def _large(values):
    """Arrow text as large text, what pandas holds text as (other values as they are)."""
    import pyarrow as pa

    return values.cast(pa.large_string()) if pa.types.is_string(values.type) else values


def _plain(batch):
    """``batch`` with its dictionary-encoded columns decoded (their text checked short),
    text as large text (:func:`_large`: the distinct values cast, not every row after)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = []
    for c in batch.columns:
        if pa.types.is_dictionary(c.type):
            c = pc.take(_large(c.dictionary), c.indices)
        columns.append(c)
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _read_table(path: Path, rows: int) -> tuple[pd.DataFrame, dict]:
    """A published table: Parquet as written, CSV as text (as the release's inputs are),
    read by :func:`batches`, so within its bounds; and its columns read
    dictionary-encoded (a Parquet file's text), by name, each one Arrow dictionary array
    of the same rows (the distinct values once, an integer per row).

    ``rows`` is what the manifest says it holds: a file with other row counts is refused
    before its values are read, so the manifest cannot make the verifier allocate more than
    the file holds, nor the file (a small compressed Parquet file may expand to billions
    of rows) more than the manifest says.
    """
    import pyarrow as pa

    read = list(batches(path, rows))
    if read:
        encoded = pa.Table.from_batches(read).unify_dictionaries()
        encoded = {
            f.name: encoded.column(f.name).combine_chunks()
            for f in encoded.schema
            if pa.types.is_dictionary(f.type)
        }
        table = pa.Table.from_batches([_plain(b) for b in read])
        del read
        frame = table.to_pandas(ignore_metadata=True, self_destruct=True, split_blocks=True)
        del table
        _give_back()  # the decoded batches
        return frame, encoded
    if path.suffix == ".csv":
        return pd.read_csv(path, dtype=str, keep_default_na=False, nrows=0), {}
    return _parquet(path).schema_arrow.empty_table().to_pandas(ignore_metadata=True), {}


def _floats(frame: pd.DataFrame, column: str) -> np.ndarray:
    """A column as doubles; text is parsed by Python's correctly rounded ``float``."""
    values = frame[column]
    if pd.api.types.is_numeric_dtype(values):
        return values.to_numpy(dtype=float)
    try:
        return np.array([float(v) for v in values], dtype=float)
    except ValueError as err:
        raise ValueError(
            f"column {shown(repr(column), 60)} is not numeric ({shown(err, 80)})"
        ) from None


class _Release:
    """The folder, its manifest and its tables, each read once (None when unreadable)."""

    def __init__(self, path: Path, manifest: dict, key=None):
        self.path = path
        self.manifest = manifest
        self.key = key  # the steward's public key (--key), or None
        self.hashes: dict[str, str] = {}  # each listed file's SHA-256, by its name in files
        self._tables: dict[str, pd.DataFrame] = {}
        self._encoded: dict[str, dict] = {}  # per table, its dictionary-encoded columns
        self._key_runs: tuple[bool, int] | None = None

    def file(self, name: str) -> Path:
        entry = self.manifest["files"][name]
        relative = entry["path"]
        if Path(relative).name != relative or relative in ("", ".", ".."):
            raise ValueError(
                f"files.{shown(name, 60)}.path {shown(repr(relative), 80)} is not a file name "
                "in the folder"
            )
        return self.path / relative

    def rows(self, name: str) -> int:
        """The rows the manifest says the table ``name`` holds (within :func:`bounds`)."""
        m = self.manifest
        over = bounds(m)
        if over:
            raise ValueError("; ".join(over))
        if name == "synthetic":
            return m["sets"] * m["strata"]
        if name == "hyperparameters":
            return m["strata"]
        found = table_rows(self.file(name))  # the prior's groups: any number up to the strata
        if found > m["strata"]:
            raise ValueError(
                f"{shown(self.file(name).name)} holds {found} rows, more than the "
                f"{m['strata']} strata"
            )
        return found

    def largest(self, name: str) -> int:
        """The most bytes the listed file ``name`` may take (:func:`table_bytes`)."""
        m = self.manifest
        return table_bytes(m["sets"] * m["strata"] if name == "synthetic" else m["strata"])

    def table(self, name: str) -> pd.DataFrame:
        if name not in self._tables:
            self._tables[name], self._encoded[name] = _read_table(self.file(name), self.rows(name))
        return self._tables[name]

    def encoded(self, name: str, column: str):
        """The table's ``column`` as read when it was dictionary-encoded (Arrow), else None."""
        self.table(name)
        return self._encoded[name].get(column)

    def key_column(self, name: str, column: str):
        """The table's ``column`` as one Arrow array: dictionary-encoded as read, when it
        was, else converted from the table."""
        import pyarrow as pa

        found = self.encoded(name, column)
        if found is None:
            frame = self.table(name)[[column]]
            found = pa.Table.from_pandas(frame, preserve_index=False).column(column)
            found = found.combine_chunks()
        return found

    def batches(self, name: str):
        return batches(self.file(name), self.rows(name))

    def key_runs(self) -> tuple[bool, int]:
        """Whether the hyperparameters' rows are in key order, and how many repeat the keys
        of another (:func:`dpcounts.data.validation.key_runs`), computed once."""
        if self._key_runs is None:
            import pyarrow as pa

            hyper = self.table("hyperparameters")
            codes = []
            for key in self.manifest["keys"]:
                column = self.encoded("hyperparameters", key)
                if column is None:
                    codes += key_sort_codes(hyper, [key])
                else:  # the distinct values coded once (a null as one more)
                    values = _large(column.dictionary)
                    if column.null_count:
                        values = pa.concat_arrays([values, pa.nulls(1, values.type)])
                    values = values.to_pandas().astype(hyper[key].dtype)  # as the table's
                    entry = column.indices
                    if entry.null_count:
                        entry = entry.fill_null(len(values) - 1)
                    codes.append(key_codes_by_entry(values, entry.to_numpy(zero_copy_only=False)))
            self._key_runs = key_runs(codes, len(hyper))
        return self._key_runs

    def entries(self) -> list[Path]:
        """Every entry of the folder, at most :data:`MAX_ENTRIES` (ValueError beyond)."""
        found = sorted(itertools.islice(self.path.rglob("*"), MAX_ENTRIES + 1))
        if len(found) > MAX_ENTRIES:
            raise ValueError(f"the folder holds more than {MAX_ENTRIES} entries")
        return found


def return_freed_memory() -> None:
    """The ``dpcounts verify`` process's allocation policy, set before it reads a table:
    Arrow allocates through the C library, whose freed memory :func:`_give_back` returns
    between the checks (Arrow's own pool keeps the pages of every decoded batch for
    reuse). The peak is then about what the checks hold at once
    (benchmarks/verify_hostile.py measures it). A process-wide choice, so the command's
    and not the library's."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())


def _give_back() -> None:
    """Return what the process has freed to the system: Arrow's pool's unused pages and,
    with glibc, the free top of its heaps (``malloc_trim``); elsewhere nothing."""
    import ctypes

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
