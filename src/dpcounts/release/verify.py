"""Check a published release against its manifest, from the public folder alone.

``dpcounts verify RELEASE_DIR`` is the reviewer's side of ``dpcounts synthesize``: given
only the public folder (never the data, the root key or the private folder) it checks
that the folder is what its manifest lists and recomputes what the published numbers
give of the epsilon the manifest states. It reads files and recomputes; it never draws.
Its checks go by topic (:data:`TOPICS`: ``files``, ``synthetic``, ``hyperparameters``,
``promise``, ``metadata``) and are listed, each with what it compares and why, in one place:
:data:`CHECKS`, a :class:`CheckSpec` each. Every :class:`Check` is made by :func:`_check`
from an entry of it (an unregistered name raises :class:`UnregisteredCheck`, a bug, not a
finding); ``dpcounts verify --help`` and docs/verify-checks.md
(``tools/write_verify_checks.py``) are written from it, and the tests check that every
entry is emitted by some release of their corpus and nothing else is.

What it cannot check: that the sets were drawn by this calibration. Any table of whole
counts with the total fits the published numbers, the confidential table itself
included; no check can tell draws from data. Nor a sanitised prior's epsilon (noisy
totals are whole numbers whatever their noise's scale), a declared prior's source or the
count-fit check's verdict, which are the steward's word. :func:`summary` says which parts
it recomputed and which it takes on trust (:func:`accounting`), never that the public
numbers back the latter. What the folder cannot show, that it is unchanged since the
steward published it, the steward's signature can (:mod:`dpcounts.release.signature`):
with the steward's public key (``--key``) the check ``files/signature`` verifies it, and
the summary says whether the folder is signed and checked, signed but not checked, or
unsigned (:func:`signature_state`).

It reads no more than the files hold, and no more than the manifest's shape can need,
in bounds decided before a table is read: the manifest at most :data:`MAX_MANIFEST_BYTES`;
at most :data:`MAX_ROWS` rows, :data:`MAX_STRATA` strata and :data:`MAX_KEYS` keys
(:func:`bounds`); a listed file no larger than :func:`table_bytes` before it is hashed; a
table only once the file itself says the manifest's row count (a Parquet footer of at
most :data:`MAX_FOOTER_BYTES`, a CSV file's lines of bounded length), flat columns of
numbers or text and a decoded size within :data:`MAX_CELL_BYTES` a cell and
:func:`table_bytes` in all; its rows in batches (:func:`batches`: text columns kept
dictionary-encoded, no text longer than :data:`MAX_CELL_BYTES`). The synthetic sets are
streamed against the hyperparameters, so memory does not grow with ``sets``, and neither
a manifest's ``sets`` nor a small compressed file makes it allocate more. Every field
:func:`format_checks` prints, from the manifest, a file or a file's name, is passed
through :func:`shown`: control characters escaped, not obeyed, and cut to length.

:func:`verify_release` returns the :class:`Check` records; :func:`format_checks` and
:func:`summary` put them into words; :func:`failed` says whether any failed. A folder
that is not a dpcounts release at all, or whose manifest is not a JSON object it can read
(not a regular file, too large, invalid or too deeply nested JSON), raises
:class:`NotARelease`, one line.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from dpcounts.data.validation import key_codes_by_entry, key_runs, key_sort_codes
from dpcounts.io import sha256_file
from dpcounts.mechanisms import registry
from dpcounts.release import folder
from dpcounts.release.manifest import RELEASE_FORMAT, SYNTHETIC_COUNT, schema, status
from dpcounts.release.signature import SIGNATURE

#: Relative tolerance of the recomputed privacy bound against ``epsilon_per_set``.
BOUND_RTOL = registry.BOUND_RTOL  # the release's own check of its calibration uses it too
#: Relative tolerance of the budget's arithmetic (sums and products of decimals).
BUDGET_RTOL = 1e-9
#: Relative tolerance of quantities the release computes by one division or a copy.
VALUE_RTOL = 1e-12
#: The largest manifest read, in bytes (a real one is a few kilobytes).
MAX_MANIFEST_BYTES = 1 << 20
#: Statuses: ``FAIL`` makes the verification fail; the others do not.
OK, FAIL, WARNING, NOMINAL = "ok", "FAIL", "warning", "nominal"
TOPICS = ("files", "synthetic", "hyperparameters", "promise", "metadata")


class NotARelease(ValueError):
    """The folder does not exist or holds no dpcounts release (a usage error)."""


@dataclass(frozen=True)
class Check:
    """One comparison: its topic, a short name, the outcome and what was compared."""

    topic: str
    name: str
    status: str
    detail: str
    values: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def failed(checks: list[Check]) -> bool:
    return any(c.status == FAIL for c in checks)


# --- reading ------------------------------------------------------------------------------

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


# --- the checks ----------------------------------------------------------------------------


class UnregisteredCheck(LookupError):
    """A check emitted under a (topic, name) that :data:`CHECKS` does not hold: a
    programming error of this module, never a finding about a release."""


@dataclass(frozen=True)
class CheckSpec:
    """One check :func:`verify_release` may emit: its topic, its name (a pattern when it
    holds ``{file}``, a name of the manifest's ``files``) and one line saying what it
    compares and why that matters."""

    topic: str
    name: str
    what: str

    def matches(self, topic: str, name: str) -> bool:
        """Whether a :class:`Check` of ``topic`` named ``name`` is this check."""
        if topic != self.topic:
            return False
        head, placeholder, tail = self.name.partition("{file}")
        if not placeholder:
            return name == self.name
        return len(name) > len(head) + len(tail) and name.startswith(head) and name.endswith(tail)


def _e(x: float) -> str:
    """A tolerance as the docs write it: ``1e-9``."""
    return f"{x:.0e}".replace("e-0", "e-")


#: Every check of ``dpcounts verify``, by topic in the order it runs them: the one list,
#: from which ``dpcounts verify --help`` and docs/verify-checks.md
#: (``tools/write_verify_checks.py``) are written. A check named after its topic (or
#: ``listed files``) is the topic's failure when a file or field it reads cannot be read.
CHECKS: tuple[CheckSpec, ...] = (
    CheckSpec("files", "manifest",
              "The manifest's own checks ran: a field they could not read fails here, with "
              "the reason, never a traceback."),
    CheckSpec("files", "format",
              "`dpcounts_release_format` is the one this version reads: the fields of another "
              "format may mean other things."),
    CheckSpec("files", "schema",
              "The manifest follows `dpcounts.release.manifest.SCHEMA` and its budget is "
              "finite: every later check reads its fields."),
    CheckSpec("files", "not checked",
              "After a manifest this version does not read (format or schema failed) nothing "
              "else is checked, and that is a failure."),
    CheckSpec("files", "bounds",
              f"`sets` x `strata` rows (at most {MAX_ROWS // 10**6} M), the strata "
              f"({MAX_STRATA // 10**6} M) and the keys ({MAX_KEYS}) are "
              "within the verifier's bounds, decided before any table is read: a manifest "
              "cannot make it allocate without limit."),
    CheckSpec("files", "listed files",
              f"The listing's checks ran: a folder they could not read (more than {MAX_ENTRIES} "
              "entries) fails here, with the reason."),
    CheckSpec("files", "{file} path",
              "The path of the listed file `{file}` is a plain file name in the folder: no "
              "`..`, no sub-folder, nothing outside it."),
    CheckSpec("files", "names",
              "`files` names only `synthetic`, `hyperparameters` and `prior`, each file once."),
    CheckSpec("files", "regular files",
              "Every entry of the folder is a regular file or folder: a symbolic link may "
              "point outside it, a pipe or a device may block or never end."),
    CheckSpec("files", "nothing unlisted",
              "The folder holds exactly the files `files` lists (the manifest aside): nothing "
              "published by mistake rides along."),
    CheckSpec("files", "{file} sha256",
              "The listed file `{file}` is there, a regular file no larger than the "
              "manifest's rows can need, with its listed `sha256`."),
    CheckSpec("files", "signature",
              f"With `--key PUBLIC`, the steward's public key: `{SIGNATURE}` is that key's "
              "Ed25519 signature of the manifest as published, and every listed file has the "
              "SHA-256 the signed manifest lists (nothing changed since the steward signed); "
              "an unsigned folder fails. Without it, a signature file is well formed and said "
              "not checked, and an unsigned folder is said unsigned."),
    CheckSpec("synthetic", "synthetic",
              "The synthetic sets could be read within the bounds (the rows the manifest "
              "says, flat columns of numbers or text, texts of at most "
              f"{MAX_CELL_BYTES >> 10} KiB, a footer of at most {MAX_FOOTER_BYTES >> 20} MiB); "
              "a table they refuse fails here, with the reason."),
    CheckSpec("synthetic", "columns",
              "`synthetic.*` has the columns `set`, the `keys`, `count` and the "
              "`population_column`, in that order."),
    CheckSpec("synthetic", "sets",
              "`sets` sets of `strata` rows, numbered set by set: as many sets as the budget "
              "was split over."),
    CheckSpec("synthetic", "whole counts",
              "Every count is a whole number >= 0, as every draw of the mechanisms is."),
    CheckSpec("synthetic", "set sums",
              "Each set sums to the published `total`, as every synthetic set does."),
    CheckSpec("synthetic", "order",
              "Rows sorted by `set`, then by the `keys` (`dpcounts.data.validation.key_order`: "
              "a key column whose every value is a number numerically, ties such as `01` and "
              "`1` by their text, any other as text)."),
    CheckSpec("synthetic", "strata",
              "Every set has the keys and populations of `hyperparameters.*`, stratum by "
              "stratum."),
    CheckSpec("synthetic", "bounds",
              "truncated: every count within [`lower`, `upper`] of its stratum, the support "
              "the privacy bound is proven for."),
    CheckSpec("hyperparameters", "hyperparameters",
              "The hyperparameters could be read within the bounds; a table they refuse, or "
              "a field they cannot read, fails here, with the reason."),
    CheckSpec("hyperparameters", "columns",
              "`hyperparameters.*` has one row per stratum and the columns of the keys, a "
              "sanitised prior's group columns and the mechanism's (md: `a`, `population`; pg "
              "adds `b`, `prior_rate`; truncated `lower`, `upper`), every `a` finite and > 0."),
    CheckSpec("hyperparameters", "b = a / prior_rate",
              f"pg and truncated: each stratum's `b` is `a / prior_rate` (relative tolerance "
              f"{_e(VALUE_RTOL)}), so the prior is the one the shapes were calibrated with."),
    CheckSpec("hyperparameters", "bounds",
              "truncated: whole bounds 0 <= `lower` <= `upper`, and the sum of `lower` <= "
              "`total` <= the sum of `upper`, so a set summing to the total fits them."),
    CheckSpec("hyperparameters", "prior (overall rate)",
              "`prior.kind` `total`: `prior_rate` is `total` over the sum of the populations, "
              "the one rate the public total gives."),
    CheckSpec("hyperparameters", "prior (groups)",
              "A public prior with `prior.groups`: `prior_rate` is constant within groups of "
              "two or more strata of those key columns, so it is no stratum's own count."),
    CheckSpec("hyperparameters", "prior (source)",
              "A prior the steward brought (a file or a column, grouped or not): a failure "
              "without `prior.declared_source`; with one, a warning that shows the steward's "
              "declaration, which no check can confirm (taken on trust)."),
    CheckSpec("hyperparameters", "prior (count fit)",
              "A warning when the steward overrode the check that the prior rates do not fit "
              "the counts far better than chance (`prior.count_fit_check` `overridden`)."),
    CheckSpec("hyperparameters", "prior",
              "A sanitised prior: `prior.file` is the listed `files.prior`, with the columns "
              "of its groups, `population`, `noisy_total` and `prior_rate`, and a numeric "
              "`prior.floor`."),
    CheckSpec("hyperparameters", "prior group rates",
              "A sanitised prior: each group's rate in `prior.*` is max(`noisy_total`, "
              "`prior.floor`) / `population`, the noisy totals whole: the rates follow from "
              "the published noisy totals alone."),
    CheckSpec("hyperparameters", "strata rates",
              "A sanitised prior: each stratum has its group's rate, and each group's "
              "population is its strata's sum."),
    CheckSpec("promise", "promise",
              "The promise's checks ran: a field or table they could not read fails here, "
              "with the reason."),
    CheckSpec("promise", "numbers",
              "Every number of the promise is finite and of its sign: epsilons and deltas > 0 "
              "(`epsilon_prior` >= 0, and > 0 exactly for a sanitised prior), deltas < 1, "
              "`sampler_tv_target` > 0."),
    CheckSpec("promise", "epsilon",
              "The budget adds up by basic composition: `epsilon_total` = `epsilon_prior` + "
              "`sets` x `epsilon_per_set`, `epsilon_synthesis` the difference, `budget.sets` "
              "= `sets`, `prior.epsilon` = `epsilon_prior`."),
    CheckSpec("promise", "delta",
              "`delta_total` = `sets` x `delta_per_set`, `delta.per_set` the same, and "
              "`delta.sampler_tv_target` = `delta_per_set` / (1 + e^`epsilon_per_set`)."),
    CheckSpec("promise", "statement",
              "The `guarantee` block (status, statement, proof) is the one "
              "`dpcounts.release.manifest.guarantee` writes for the mechanism, method and "
              "budget, so its statement says the numbers."),
    CheckSpec("promise", "status",
              "`guarantee.status` is `certified` exactly for the mechanism and method pairs "
              "this version certifies."),
    CheckSpec("promise", "bound",
              "Certified: the bound of docs/privacy.md recomputed from the published `a`, "
              "`lower`, `upper` and `total` (pg, truncated: the two largest kappa, Part 2, "
              "Step 4; md: log(1 + total / min alpha), Quick (2021), eq 5) is at most "
              f"`epsilon_per_set` (relative tolerance {_e(BOUND_RTOL)}); nominal: said, no "
              "guarantee."),
    CheckSpec("metadata", "metadata",
              "The metadata's checks ran: a file they could not read fails here, with the "
              "reason."),
    CheckSpec("metadata", "embedded",
              "No Parquet file embeds metadata beyond pandas' description of its columns (no "
              "`attributes`, other schema keys, field metadata or categorical columns): an "
              "input's metadata must not ride along."),
    CheckSpec("metadata", "times",
              "A warning (copying may change it) unless the folder and its files have the "
              "fixed time 1980-01-01 (`dpcounts.release.folder.PUBLIC_MTIME`), which says "
              "nothing about when the release ran."),
    CheckSpec("metadata", "modes",
              "A warning (copying may change them) unless the files are 0644 and the folder "
              "0755, whatever the umask."),
)  # fmt: skip
_REGISTERED = {(spec.topic, spec.name): spec for spec in CHECKS}


def registered(topic: str, name: str) -> CheckSpec:
    """The entry of :data:`CHECKS` that a check of ``topic`` named ``name`` is (a listed
    file's name fills a pattern's ``{file}``); :class:`UnregisteredCheck` if none."""
    found = _REGISTERED.get((topic, name))
    if found is None:
        found = next((spec for spec in CHECKS if spec.matches(topic, name)), None)
    if found is None:
        raise UnregisteredCheck(f"{topic}/{name} is not in dpcounts.release.verify.CHECKS")
    return found


def _check(
    topic: str, name: str, status: str, detail: str, values: dict | None = None, **fields
) -> Check:
    """The :class:`Check` of the registered check ``(topic, name)``: ``name`` is the entry's
    name as :data:`CHECKS` spells it, a pattern's ``{file}`` given in ``fields``."""
    spec = _REGISTERED.get((topic, name))
    if spec is None:
        raise UnregisteredCheck(f"{topic}/{name} is not in dpcounts.release.verify.CHECKS")
    shown_name = spec.name.format(**fields) if fields else spec.name
    return Check(topic, shown_name, status, detail, {} if values is None else values)


def describe_checks(full: bool = False, width: int = 80) -> str:
    """The checks by topic, as ``dpcounts verify --help`` shows them: their names, a line or
    two a topic; with ``full`` (``--help-all``), each with what it checks."""
    import textwrap

    lines = []
    for topic in TOPICS:
        specs = [spec for spec in CHECKS if spec.topic == topic]
        if full:
            lines.append(f"{topic}:")
            for spec in specs:
                lines += textwrap.wrap(
                    f"{spec.name}: {spec.what.replace('`', '')}", width,
                    initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False,
                )  # fmt: skip
        else:  # a name is never cut across lines
            line = f"  {topic}:"
            for k, spec in enumerate(specs):
                word = spec.name + ("," if k < len(specs) - 1 else "")
                if len(line) + 1 + len(word) > width:
                    lines.append(line)
                    line = "   "
                line += " " + word
            lines.append(line)
    return "\n".join(lines) + "\n"


def regular_file(path: Path) -> bool:
    """Whether ``path`` is a regular file itself: not a symbolic link (which may point
    outside the folder), a folder, a pipe or a device (which may block or never end)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


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
    if not regular_file(path):
        raise ValueError(f"{shown(path.name)} is not a regular file in the folder")
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

    if not regular_file(path):
        raise ValueError(f"{shown(path.name)} is not a regular file in the folder")
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


def _text(frame: pd.DataFrame, columns) -> pd.DataFrame:
    """Key columns as text, so Parquet and CSV keys compare alike."""
    return frame[list(columns)].astype(str).reset_index(drop=True)


def _g(x: float) -> str:
    return f"{x:.10g}"


def _close(a: float, b: float, rtol: float) -> bool:
    return math.isclose(a, b, rel_tol=rtol, abs_tol=0.0)


def _worst_relative(actual: np.ndarray, expected: np.ndarray) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(actual - expected) / np.abs(expected)
    rel = np.where(actual == expected, 0.0, rel)
    return float(np.nanmax(np.where(np.isfinite(rel), rel, np.inf))) if rel.size else 0.0


# --- the release ---------------------------------------------------------------------------


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
    return over


def load_manifest(path: Path) -> tuple[dict | None, str | None]:
    """(manifest, None); :class:`NotARelease` (one line, exit 2) when the folder is missing,
    is not a dpcounts release, or its manifest is no JSON object this verifier reads (not a
    regular file, too large, invalid or too deeply nested JSON)."""
    path = Path(path)
    expected = (
        "expected a dpcounts release folder, the public folder `dpcounts synthesize --out`\n"
        f"writes: {folder.MANIFEST} (with {folder.FORMAT_KEY!r}), synthetic.*, "
        "hyperparameters.*"
    )
    if not path.exists():
        raise NotARelease(f"{path}: no such folder;\n{expected}")
    if not path.is_dir():
        raise NotARelease(f"{path}: is not a folder;\n{expected}")
    manifest = path / folder.MANIFEST
    if manifest.is_symlink() or (manifest.exists() and not regular_file(manifest)):
        raise NotARelease(
            f"{manifest}: is not a regular file (a symbolic link, a folder or a device); "
            "expected the release's own manifest"
        )
    if not manifest.is_file():
        raise NotARelease(f"{path}: has no {folder.MANIFEST}, so it is not a release;\n{expected}")
    size = manifest.stat().st_size
    if size > MAX_MANIFEST_BYTES:
        raise NotARelease(
            f"{manifest}: {size} bytes, more than any manifest ({MAX_MANIFEST_BYTES}); "
            "expected a dpcounts release manifest"
        )
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        reason = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        raise NotARelease(
            f"{manifest}: is not valid JSON ({reason.splitlines()[0][:120]}); expected a "
            "dpcounts release manifest"
        ) from None
    if not isinstance(data, dict) or folder.FORMAT_KEY not in data:
        raise NotARelease(
            f"{manifest}: is JSON but not a dpcounts manifest (no {folder.FORMAT_KEY!r});\n"
            f"{expected}"
        )
    return data, None


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


def verify_release(path: Path, key=None) -> list[Check]:
    """Every check of the release in ``path``, in topic order (see the module docstring);
    ``key``, the steward's public key (:class:`dpcounts.release.signature.PublicKey`, or a
    path to one), checks the folder's signature with it.

    Raises :class:`NotARelease` when ``path`` is missing or holds no dpcounts manifest;
    anything wrong inside a release is a failed :class:`Check`, never an exception.
    """
    path = Path(path)
    manifest, _ = load_manifest(path)
    if key is not None and not hasattr(key, "raw"):
        from dpcounts.release.signature import load_public_key

        key = load_public_key(Path(key))
    release = _Release(path, manifest, key)
    checks: list[Check] = []
    readable = _run(checks, "files", "manifest", _manifest_checks, release)
    if not readable:
        checks.append(
            _check(
                "files", "not checked", FAIL,
                "the manifest is not one this version reads (format "
                f"{shown(repr(manifest.get(folder.FORMAT_KEY)), 60)}, schema of format "
                f"{RELEASE_FORMAT}): "
                "nothing else was checked",
            )
        )  # fmt: skip
        return checks
    over = bounds(manifest)
    checks.append(
        _check(
            "files", "bounds", FAIL if over else OK,
            ("; ".join(over) + ": more than this verifier reads; nothing else was checked")
            if over
            else f"{manifest['sets']} x {manifest['strata']} rows, {len(manifest['keys'])} "
                 f"key(s): within the verifier's bounds ({MAX_ROWS} rows, {MAX_STRATA} "
                 "strata)",
        )
    )  # fmt: skip
    if over:
        return checks
    _run(checks, "files", "listed files", _file_checks, release)
    _run(checks, "files", "signature", _signature_checks, release)
    _run(checks, "synthetic", "synthetic", _synthetic_checks, release)
    _run(checks, "hyperparameters", "hyperparameters", _hyper_checks, release)
    _run(checks, "promise", "promise", _promise_checks, release)
    _run(checks, "metadata", "metadata", _metadata_checks, release)
    return checks


def _run(checks: list[Check], topic: str, name: str, function, release: _Release):
    """Append ``function(release)``'s checks; a file or field it cannot read is a failure
    of its topic, not a crash (a tampered release may hold anything)."""
    try:
        found, result = function(release)
    except UnregisteredCheck:  # a mistake of this module, not a finding about the folder
        raise
    except Exception as err:  # a verifier reports, whatever the folder holds
        reason = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
        checks.append(_check(topic, name, FAIL, f"could not be checked: {shown(reason, 300)}"))
        return False
    checks.extend(found)
    _give_back()  # what the topic's checks no longer hold
    return result


# --- 1. files ------------------------------------------------------------------------------


def _manifest_checks(release: _Release):
    import jsonschema

    data = release.manifest
    out = []
    version = data.get(folder.FORMAT_KEY)
    readable = version == RELEASE_FORMAT
    out.append(
        _check(
            "files", "format", OK if readable else FAIL,
            f"{folder.FORMAT_KEY} {shown(repr(version), 60)}; this version reads {RELEASE_FORMAT}",
            {
                "format": version if isinstance(version, int | float) else shown(repr(version), 60),
                "reads": RELEASE_FORMAT,
            },
        )
    )  # fmt: skip
    errors = sorted(jsonschema.Draft202012Validator(schema()).iter_errors(data), key=str)
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(top)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        detail = f"at {shown(where, 80)}: {shown(first.message, 160)}{more}"
        out.append(_check("files", "schema", FAIL, detail))
        return out, False
    finite = all(math.isfinite(float(data["budget"][k])) for k in ("epsilon_total", "delta_total"))
    out.append(
        _check(
            "files", "schema", OK if finite else FAIL,
            "manifest.json follows dpcounts.release.manifest.SCHEMA"
            + ("" if finite else ", but its budget is not finite"),
        )
    )  # fmt: skip
    return out, readable and finite


#: The files a release lists, by name in the manifest's ``files``.
LISTED = ("synthetic", "hyperparameters", "prior")


def _file_checks(release: _Release):
    out = []
    listed = {}
    names = list(release.manifest["files"])
    unknown = [shown(repr(n), 60) for n in names if n not in LISTED]
    for name, entry in release.manifest["files"].items():
        try:
            listed.setdefault(release.file(name).name, []).append((name, entry))
        except ValueError as err:
            out.append(_check("files", "{file} path", FAIL, str(err), file=shown(name, 40)))
    twice = [shown(p, 80) for p, found in listed.items() if len(found) > 1]
    listed = {p: found[0] for p, found in listed.items()}
    out.append(
        _check(
            "files", "names", FAIL if unknown or twice else OK,
            (f"the manifest lists {', '.join(unknown[:5]) or 'no other file'} beyond "
             f"{', '.join(LISTED)}; files listed twice: {', '.join(twice[:5]) or 'none'}")
            if unknown or twice
            else f"the manifest lists {', '.join(n for n in LISTED if n in names)}, each once",
        )
    )  # fmt: skip
    entries = release.entries()
    irregular = [
        p.relative_to(release.path).as_posix()
        for p in entries
        if p.is_symlink() or not (regular_file(p) or p.is_dir())
    ]
    out.append(
        _check(
            "files", "regular files", FAIL if irregular else OK,
            (f"{len(irregular)} entr(y/ies) not a regular file or folder (a symbolic link may "
             f"point outside the folder): {shown(', '.join(irregular[:5]))}") if irregular
            else "every entry is a regular file or folder, no symbolic link",
            {"irregular": [shown(p) for p in irregular]},
        )
    )  # fmt: skip
    present = sorted(
        p.relative_to(release.path).as_posix() + ("/" if p.is_dir() and not p.is_symlink() else "")
        for p in entries
    )
    names_present = set(present)
    present = [p for p in present if p not in (folder.MANIFEST, SIGNATURE)]
    unlisted = [p for p in present if p not in listed]
    out.append(
        _check(
            "files", "nothing unlisted", FAIL if unlisted else OK,
            (f"{len(unlisted)} file(s) in the folder the manifest does not list: "
             f"{shown(', '.join(unlisted))}") if unlisted
            else f"the folder holds {len(present)} file(s) besides the manifest"
                 f"{' and its signature' if SIGNATURE in names_present else ''}, all listed",
            {"unlisted": [shown(p) for p in unlisted]},
        )
    )  # fmt: skip
    for file_name, (name, entry) in sorted(listed.items()):
        path = release.path / file_name
        entry_name = name
        name, file_name = shown(name, 40), shown(file_name, 80)
        if not regular_file(path):
            why = "missing" if not os.path.lexists(path) else "not a regular file"
            out.append(
                _check("files", "{file} sha256", FAIL, f"{file_name}: listed but {why}", file=name)
            )
            continue
        size, largest = path.stat().st_size, release.largest(name)
        if size > largest:
            out.append(
                _check("files", "{file} sha256", FAIL,
                       f"{file_name}: {size} bytes, more than the manifest's rows can need "
                       f"({largest}); not read", file=name)
            )  # fmt: skip
            continue
        actual = sha256_file(path)
        release.hashes[entry_name] = actual
        same = actual == entry["sha256"]
        detail = (
            f"{file_name}: sha256 {actual[:16]}... as listed"
            if same
            else f"{file_name}: sha256 {actual[:16]}..., listed {entry['sha256'][:16]}..."
        )
        out.append(
            _check("files", "{file} sha256", OK if same else FAIL, detail,
                   {"path": file_name, "sha256": actual, "listed": entry["sha256"]}, file=name)
        )  # fmt: skip
    return out, True


def _signature_checks(release: _Release):
    """The steward's signature (:mod:`dpcounts.release.signature`): without a key, whether
    the folder is signed (a well-formed signature file, not checked) or not; with ``--key``, the
    signature is the key's, of the manifest's bytes as they are now, and every file the
    signed manifest lists has the SHA-256 it lists (found by :func:`_file_checks`)."""
    from dpcounts.release.signature import SignatureError, message, read_signature

    key, path = release.key, release.path / SIGNATURE
    given = f"the given key {key.id}" if key is not None else ""
    if not os.path.lexists(path):
        if key is None:
            return [
                _check("files", "signature", OK,
                       f"unsigned: no {SIGNATURE}, so nothing shows the folder is as its "
                       "steward published it (dpcounts synthesize --sign-key)",
                       {"state": "unsigned"})
            ], True  # fmt: skip
        return [
            _check("files", "signature", FAIL,
                   f"no {SIGNATURE}: the folder is unsigned, so nothing shows it is what the "
                   f"steward of {given} published", {"state": "unsigned"})
        ], True  # fmt: skip
    if not regular_file(path):
        return [
            _check("files", "signature", FAIL, f"{SIGNATURE} is not a regular file",
                   {"state": "failed"})
        ], True  # fmt: skip
    try:
        found = read_signature(path)
    except SignatureError as err:
        return [_check("files", "signature", FAIL, shown(err, 200), {"state": "failed"})], True
    signer = found["key"].id
    if key is None:
        return [
            _check("files", "signature", OK,
                   f"{SIGNATURE} names the key {signer}; not checked: verify with --key PUBLIC, "
                   "the steward's public key obtained apart from the folder",
                   {"state": "not checked", "key_id": signer})
        ], True  # fmt: skip
    if key.path is not None and Path(key.path).resolve().is_relative_to(release.path.resolve()):
        return [
            _check("files", "signature", FAIL,
                   f"--key {shown(key.path, 120)} lies inside the release folder: a key the "
                   "folder brings proves nothing; give the steward's public key from elsewhere",
                   {"state": "failed", "key_id": signer})
        ], True  # fmt: skip
    if found["key"].raw != key.raw:
        return [
            _check("files", "signature", FAIL,
                   f"signed by the key {signer}, not by {given}",
                   {"state": "failed", "key_id": signer})
        ], True  # fmt: skip
    manifest_path = release.path / folder.MANIFEST
    if not regular_file(manifest_path) or manifest_path.stat().st_size > MAX_MANIFEST_BYTES:
        raise ValueError(
            f"{folder.MANIFEST} is not a regular file of at most {MAX_MANIFEST_BYTES} bytes"
        )
    manifest = manifest_path.read_bytes()
    if not key.verifies(found["signature"], message(manifest)):
        return [
            _check("files", "signature", FAIL,
                   f"the signature by {given} does not match {folder.MANIFEST}: the manifest "
                   "changed since the steward signed it (or the signature did)",
                   {"state": "failed", "key_id": signer})
        ], True  # fmt: skip
    listed = json.loads(manifest.decode("utf-8"))["files"]  # the signed listing
    changed = [
        shown(entry["path"], 80)
        for name, entry in sorted(listed.items())
        if release.hashes.get(name) != entry["sha256"]
    ]
    if changed:
        return [
            _check("files", "signature", FAIL,
                   f"the manifest is as signed by {given}, but {', '.join(changed[:5])} "
                   "do(es) not have the SHA-256 it lists (or could not be read): changed "
                   "since the steward signed",
                   {"state": "failed", "key_id": signer, "changed": changed})
        ], True  # fmt: skip
    return [
        _check("files", "signature", OK,
               f"signed by {given}: {folder.MANIFEST} and the {len(listed)} file(s) it lists "
               "are as the steward signed them, nothing changed since",
               {"state": "verified", "key_id": signer})
    ], True  # fmt: skip


# --- 2. synthetic sets ---------------------------------------------------------------------


def _is_sorted(frame: pd.DataFrame, columns: list[str], in_key_order: bool) -> bool:
    """Whether the rows are in lexicographic order of ``columns``: the releases' key order
    (``in_key_order``, :func:`dpcounts.data.validation.key_order`: a column whose every value
    is a number numerically, ties broken by the text, any other as text), or each column
    compared as written or, when every value is a number, as numbers (releases made before
    key_order; a Parquet input's integer keys written to CSV read back as text)."""
    if in_key_order:
        return True
    for numeric in (False, True):
        view = frame[columns].copy()
        if numeric:
            for column in columns:
                converted = pd.to_numeric(view[column], errors="coerce")
                if not converted.isna().any():
                    view[column] = converted
        order = view.sort_values(columns, kind="stable").index
        if np.array_equal(order.to_numpy(), np.arange(len(view))):
            return True
    return False


class _Key:
    """One key column of the hyperparameters, to compare the synthetic sets' with: its
    distinct values and each stratum's position among them, so that a dictionary-encoded
    column compares by its dictionary (looked up once) and integer codes. ``reference``
    is an Arrow array, dictionary-encoded or not (then encoded here); its distinct values
    are looked up once, a null as one more value."""

    def __init__(self, reference):
        import pyarrow as pa
        import pyarrow.compute as pc

        if not pa.types.is_dictionary(reference.type):
            reference = pc.dictionary_encode(reference)
        values, indices = reference.dictionary, reference.indices
        if indices.null_count:
            values = pa.concat_arrays([values, pa.nulls(1, values.type)])
            indices = indices.fill_null(len(values) - 1)
        self.type = values.type
        self.distinct = pc.unique(values)
        self.codes = self._lookup(values)[indices.to_numpy(zero_copy_only=False)]
        self._dictionary = (None, None)

    def _lookup(self, values) -> np.ndarray:
        import pyarrow.compute as pc

        found = pc.index_in(values, value_set=self.distinct)
        return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)

    def same(self, column, stratum: np.ndarray) -> np.ndarray:
        """Whether each value of ``column`` is the key of its stratum; values of another
        type that do not convert to the hyperparameters' are not equal."""
        import pyarrow as pa
        import pyarrow.compute as pc

        values = column.dictionary if pa.types.is_dictionary(column.type) else column
        if values.type != self.type:
            try:
                values = pc.cast(values, self.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return np.zeros(len(column), dtype=bool)
        if pa.types.is_dictionary(column.type):
            key, mapping = self._dictionary
            if key is None or len(key) != len(values) or not key.equals(values):
                mapping = self._lookup(values)
                self._dictionary = (values, mapping)
            if column.null_count or not len(mapping):
                indices = column.indices.fill_null(-1).to_numpy(zero_copy_only=False)
                ok = (indices >= 0) & bool(len(mapping))
                codes = np.where(ok, mapping[np.where(ok, indices, 0)] if len(mapping) else -1, -1)
            else:
                codes = mapping[column.indices.to_numpy()]
        else:
            codes = self._lookup(values)
        return codes == self.codes[stratum]


def _batch_floats(column, name: str) -> np.ndarray:
    """An Arrow column as doubles; text is parsed (correctly rounded) by Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_integer(column.type) or pa.types.is_floating(column.type):
        return column.to_numpy(zero_copy_only=False).astype(float, copy=False)
    try:
        return pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise ValueError(f"column {shown(name, 60)} is not numeric") from None


def _synthetic_checks(release: _Release):
    """The synthetic sets, streamed batch by batch against the hyperparameters (held once):
    memory is that of the hyperparameters and a batch, whatever the number of sets; the
    first batch with a wrong row ends the reading (the checks then say where)."""
    m = release.manifest
    keys, sets, strata, total = m["keys"], m["sets"], m["strata"], m["total"]
    population = m["population_column"]
    name = shown(release.file("synthetic").name)
    out = []
    columns = ["set", *keys, SYNTHETIC_COUNT, population]
    hyper = release.table("hyperparameters").reset_index(drop=True)
    comparable = len(hyper) == strata and set(keys) <= set(hyper.columns)
    if comparable:
        release.key_runs()  # before the sets' batches are held: the peak is one or the other
        references = [_Key(release.key_column("hyperparameters", k)) for k in keys]
        hyper_pop = _floats(hyper, "population")
        if registry.family(m["mechanism"]).bounded:
            lower, upper = _floats(hyper, "lower"), _floats(hyper, "upper")
    rows = counted = whole_count = 0
    first_bad_whole = first_bad_set = None
    bad_sets: list[int] = []
    wrong: dict[int, float] = {}
    wrong_sums = 0
    carry: tuple[int, float] | None = None
    inside_count, low_set, high_set = 0, math.inf, -math.inf
    keys_in_order = comparable
    stopped = None
    for batch in release.batches("synthetic"):
        if rows == 0:
            found = batch.schema.names
            if found != columns:
                out.append(
                    _check("synthetic", "columns", FAIL,
                          f"{name} has columns {shown(found)}, expected {shown(columns)}")
                )  # fmt: skip
                return out, True
            kind = (m.get("denominator") or {}).get("kind", "population")
            held = f"; {population!r} holds expected counts (SMRs)" if kind == "expected" else ""
            out.append(
                _check("synthetic", "columns", OK, f"{name}: columns {shown(columns)}{shown(held)}")
            )
        n = batch.num_rows
        expected_set, stratum = np.divmod(np.arange(rows, rows + n), strata)  # by position
        numbers = _batch_floats(batch.column("set"), "set")
        counts = _batch_floats(batch.column(SYNTHETIC_COUNT), SYNTHETIC_COUNT)
        bad = False
        if numbers.size:
            low_set, high_set = min(low_set, numbers.min()), max(high_set, numbers.max())
        off = np.flatnonzero(numbers != expected_set)
        if off.size and first_bad_set is None:
            first_bad_set, bad = rows + int(off[0]), True
        whole = np.isfinite(counts) & (counts == np.round(counts)) & (counts >= 0)
        whole_count += int(whole.sum())
        if not whole.all() and first_bad_whole is None:
            first_bad_whole, bad = rows + int(np.flatnonzero(~whole)[0]), True
        # sums of the sets by position; the last set of a batch may go on in the next
        first = int(expected_set[0]) if n else 0
        finite = counts if whole.all() else np.where(np.isfinite(counts), counts, 0)
        sums = np.bincount(expected_set - first, weights=finite)
        if carry is not None and carry[0] == first:
            sums[0] += carry[1]
        done = len(sums) if (rows + n) % strata == 0 else len(sums) - 1
        off_sums = np.flatnonzero(sums[:done] != total)
        if off_sums.size:
            wrong_sums += int(off_sums.size)
            bad = True
            for k in off_sums[: 3 - len(wrong)]:
                wrong[first + int(k)] = float(sums[k])
        carry = (first + done, float(sums[done])) if done < len(sums) else None
        if comparable:
            same = np.ones(n, dtype=bool)
            for key, ref in zip(keys, references, strict=True):
                same &= ref.same(batch.column(key), stratum)
            pop = _batch_floats(batch.column(population), population)
            expected_pop = hyper_pop[stratum]
            close = pop == expected_pop
            if not close.all():
                close |= np.isclose(pop, expected_pop, rtol=VALUE_RTOL, atol=0)
            good = same & close
            if not good.all():
                keys_in_order = keys_in_order and bool(same.all())
                bad = True
                for k in np.unique(expected_set[~good])[:5]:
                    if len(bad_sets) < 5 and int(k) not in bad_sets:
                        bad_sets.append(int(k))
            if registry.family(m["mechanism"]).bounded:
                inside = (counts >= lower[stratum]) & (counts <= upper[stratum])
                inside_count += int(inside.sum())
                bad = bad or not inside.all()
        rows += n
        counted += n
        if bad and rows < sets * strata:
            stopped = rows
            break
    if rows == 0:
        raise ValueError(f"{name} holds no rows")
    read = (f"; reading stopped after row {stopped} of {sets * strata}, the first batch "
            "with a wrong row") if stopped else ""  # fmt: skip
    shape_ok = first_bad_set is None and stopped is None
    out.append(
        _check(
            "synthetic", "sets", OK if first_bad_set is None else FAIL,
            f"set numbers {_g(low_set)}..{_g(high_set)} over {counted} rows"
            + ("" if first_bad_set is None else f", first out of place at row {first_bad_set}")
            + f"; the manifest says {sets} set(s) x {strata} strata = {sets * strata} rows, "
            "set by set" + read,
            {"rows": counted, "expected_rows": sets * strata},
        )
    )  # fmt: skip
    out.append(
        _check(
            "synthetic", "whole counts", OK if first_bad_whole is None else FAIL,
            f"{whole_count} of {counted} counts whole and >= 0"
            + ("" if first_bad_whole is None else f" (first bad row {first_bad_whole})"),
        )
    )  # fmt: skip
    if wrong_sums:
        listed = ", ".join(f"set {k} sums to {_g(v)}" for k, v in wrong.items())
        more = f" ({wrong_sums} set(s) in all)" if wrong_sums > len(wrong) else ""
        detail = f"{listed}{more}; total {total}"
    else:
        complete = counted // strata
        detail = f"each of the {complete} set(s) sums to {total} (total {total})"
    out.append(
        _check("synthetic", "set sums", FAIL if wrong_sums else OK, detail,
              {"total": total, "wrong": wrong})
    )  # fmt: skip
    sorted_ok = (
        comparable
        and first_bad_set is None
        and keys_in_order
        and _is_sorted(hyper, list(keys), release.key_runs()[0])
    )
    out.append(
        _check(
            "synthetic", "order", OK if sorted_ok else FAIL,
            f"rows {'' if sorted_ok else 'NOT '}sorted by set then by the keys {shown(keys)}"
            + ("" if sorted_ok or not comparable else
               " (each set in the hyperparameters' order, itself sorted by the keys)"),
        )
    )  # fmt: skip
    if comparable:
        out.append(
            _check(
                "synthetic", "strata", FAIL if bad_sets else OK,
                f"set(s) {bad_sets[:5]} differ from the hyperparameters' keys or populations"
                if bad_sets
                else f"every set has the {strata} keys and populations of the hyperparameters",
            )
        )  # fmt: skip
    else:
        out.append(
            _check("synthetic", "strata", FAIL,
                  f"not compared: {len(hyper)} hyperparameter rows, expected {strata}")
        )  # fmt: skip
    if registry.family(m["mechanism"]).bounded and comparable and shape_ok:
        out.append(
            _check(
                "synthetic", "bounds", OK if inside_count == counted else FAIL,
                f"{inside_count} of {counted} counts within [lower, upper] of the "
                "hyperparameters",
            )
        )  # fmt: skip
    return out, True


# --- 3. hyperparameters --------------------------------------------------------------------


def _hyper_checks(release: _Release):
    m = release.manifest
    keys, strata, mechanism = m["keys"], m["strata"], m["mechanism"]
    hyper = release.table("hyperparameters").reset_index(drop=True)
    name = shown(release.file("hyperparameters").name, 80)
    out = []
    prior = m["prior"] if isinstance(m.get("prior"), dict) else {}
    grouped_by = [  # a sanitised prior's attribute columns follow the keys
        c for c in (prior.get("groups") or []) if prior.get("kind") == "sanitised" and c not in keys
    ]
    family = registry.family(mechanism)  # the manifest's schema check passed: known
    expected = [*keys, *grouped_by, *family.hyperparameters]
    if list(hyper.columns) != expected or len(hyper) != strata:
        out.append(
            _check("hyperparameters", "columns", FAIL,
                  f"{name}: {len(hyper)} rows, columns {shown(list(hyper.columns))}; expected "
                  f"{strata} rows, columns {shown(expected)} ({mechanism})")
        )  # fmt: skip
        return out, True
    a = _floats(hyper, "a")
    good_a = bool(np.all(np.isfinite(a) & (a > 0)))
    repeats = release.key_runs()[1]
    out.append(
        _check("hyperparameters", "columns", OK if good_a and not repeats else FAIL,
              f"{name}: {strata} rows, keys and {list(family.hyperparameters)}; "
              + (f"a in [{_g(a.min())}, {_g(a.max())}], all > 0" if good_a
                 else "some a are not finite and > 0")
              + (f"; {repeats} row(s) repeat the keys of another: not one row per stratum"
                 if repeats else ""))
    )  # fmt: skip
    if not family.uses_prior:
        return out, True
    b, rate = _floats(hyper, "b"), _floats(hyper, "prior_rate")
    worst = _worst_relative(b, a / rate)
    out.append(
        _check(
            "hyperparameters", "b = a / prior_rate", OK if worst <= VALUE_RTOL else FAIL,
            f"largest relative difference {worst:.2g} over {strata} strata "
            f"(tolerance {VALUE_RTOL:g})",
            {"worst_relative": worst},
        )
    )  # fmt: skip
    if family.bounded:
        lower, upper = _floats(hyper, "lower"), _floats(hyper, "upper")
        whole = np.all((lower == np.round(lower)) & (upper == np.round(upper)))
        ordered = np.all((0 <= lower) & (lower <= upper))
        feasible = lower.sum() <= m["total"] <= upper.sum()
        good = bool(whole and ordered and feasible)
        out.append(
            _check(
                "hyperparameters", "bounds", OK if good else FAIL,
                f"whole 0 <= lower <= upper: {bool(whole and ordered)}; sum lower "
                f"{_g(lower.sum())} <= total {m['total']} <= sum upper {_g(upper.sum())}",
            )
        )  # fmt: skip
    prior = m["prior"]
    if prior["kind"] == "total":
        rate_all = m["total"] / _floats(hyper, "population").sum()
        worst = _worst_relative(rate, np.full(strata, rate_all))
        out.append(
            _check(
                "hyperparameters", "prior (overall rate)",
                OK if worst <= VALUE_RTOL else FAIL,
                f"prior_rate = total / sum of populations = {_g(rate_all)}; largest relative "
                f"difference {worst:.2g}",
            )
        )  # fmt: skip
    elif prior["kind"] == "sanitised":
        out.extend(_sanitised_checks(release, hyper, rate))
    else:
        out.extend(_public_prior_checks(release, hyper, rate))
    return out, True


def shown(text: object, limit: int = 200) -> str:
    """``text`` as a terminal may print it: control characters escaped, not obeyed, and
    at most ``limit`` characters (a manifest is written by whoever wrote the folder)."""
    text = str(text)
    cut = len(text) > limit
    text = "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
        for ch in text[:limit]
    )
    return text + ("..." if cut else "")


def _public_prior_checks(release: _Release, hyper: pd.DataFrame, rate: np.ndarray):
    """A prior declared public: its shape (constant within ``prior.groups``, two or more
    strata a group, or a declared source), and the count-fit check's fate."""
    from dpcounts.release.prior_source import grouping

    prior = release.manifest["prior"]
    groups, declared = prior["groups"], prior["declared_source"]
    out = []
    if groups is not None:
        absent = [c for c in groups if c not in release.manifest["keys"]]
        found = None if absent else grouping(hyper[list(groups)], rate)
        good = found is not None and set(found) <= set(groups)
        out.append(
            _check(
                "hyperparameters", "prior (groups)", OK if good else FAIL,
                f"prior_rate constant within the groups of {shown(groups)}, two or more strata "
                "each"
                if good else
                f"prior.groups {shown(groups)}: the published prior_rate is not constant within "
                "groups of two or more strata of these key columns",
            )
        )  # fmt: skip
    if declared is None:
        out.append(
            _check("hyperparameters", "prior (source)", FAIL,
                  "a prior the steward brought (a file or a column) and the manifest "
                  "declares no source (prior.declared_source): no release publishes one so")
        )  # fmt: skip
    else:
        out.append(
            _check("hyperparameters", "prior (source)", WARNING,
                  ("the prior is one rate per group of " + shown(groups) if groups else
                   "the prior is one rate for all strata" if groups == [] else
                   "the prior varies stratum by stratum")
                  + "; public only by the steward's declaration of its source, which no "
                  f"check can confirm (taken on trust): \"{shown(declared)}\"")
        )  # fmt: skip
    if prior["count_fit_check"] == "overridden":
        out.append(
            _check("hyperparameters", "prior (count fit)", WARNING,
                  "the check that the prior rates do not fit the counts far better than "
                  "chance was overridden by the steward (--prior-is-public-i-am-sure)")
        )  # fmt: skip
    return out


def _sanitised_checks(release: _Release, hyper: pd.DataFrame, rate: np.ndarray) -> list[Check]:
    m = release.manifest
    groups = m["prior"]["groups"] or []
    if m["prior"]["file"] is None or "prior" not in m["files"]:
        return [_check("hyperparameters", "prior", FAIL, "sanitised prior without a prior file")]
    if release.file("prior").name != m["prior"]["file"]:
        return [
            _check("hyperparameters", "prior", FAIL,
                  f"prior.file {shown(repr(m['prior']['file']), 80)} is not files.prior "
                  f"{shown(repr(release.file('prior').name), 80)}")
        ]  # fmt: skip
    table = release.table("prior").reset_index(drop=True)
    expected = [*groups, "population", "noisy_total", "prior_rate"]
    if not groups or list(table.columns) != expected:
        return [
            _check("hyperparameters", "prior", FAIL,
                  f"{shown(release.file('prior').name, 80)}: columns "
                  f"{shown(list(table.columns))}, expected {shown(expected)}")
        ]  # fmt: skip
    out = []
    floor = m["prior"]["floor"]
    if not isinstance(floor, int | float) or isinstance(floor, bool):
        return [_check("hyperparameters", "prior group rates", FAIL,
                      f"the manifest's prior.floor is {floor!r}, expected a number")]  # fmt: skip
    noisy = _floats(table, "noisy_total")
    group_pop = _floats(table, "population")
    group_rate = _floats(table, "prior_rate")
    expected_rate = np.maximum(noisy, floor) / group_pop
    worst = _worst_relative(group_rate, expected_rate)
    whole = bool(np.all(noisy == np.round(noisy)))
    out.append(
        _check(
            "hyperparameters", "prior group rates",
            OK if worst <= VALUE_RTOL and whole else FAIL,
            f"{len(table)} group(s) by {shown(groups)}: rate = max(noisy_total, {floor:g}) / "
            f"population (the manifest's prior.floor), largest relative difference {worst:.2g}"
            + ("" if whole else "; some noisy totals are not whole"),
            {"floor": floor, "worst_relative": worst},
        )
    )  # fmt: skip
    # each stratum's group, by the group columns of its keys (as text)
    labels = _text(table, groups).apply(tuple, axis=1)
    strata_labels = _text(hyper, groups).apply(tuple, axis=1)
    position = {label: i for i, label in enumerate(labels)}
    index = np.array([position.get(label, -1) for label in strata_labels])
    missing = int((index < 0).sum())
    same_groups = missing == 0 and len(position) == len(labels) == len(set(strata_labels))
    if not same_groups:
        out.append(
            _check("hyperparameters", "strata rates", FAIL,
                  f"the prior's {len(labels)} group(s) are not the strata's "
                  f"{len(set(strata_labels))} groups by {shown(groups)} ({missing} strata "
                  "without one)")
        )  # fmt: skip
        return out
    worst = _worst_relative(rate, group_rate[index])
    summed = np.bincount(index, weights=_floats(hyper, "population"), minlength=len(table))
    worst_pop = _worst_relative(group_pop, summed)
    good = worst <= VALUE_RTOL and worst_pop <= BUDGET_RTOL
    out.append(
        _check(
            "hyperparameters", "strata rates", OK if good else FAIL,
            f"each of the {len(rate)} strata has its group's rate (largest relative difference "
            f"{worst:.2g}); group populations are their strata's sums (largest relative "
            f"difference {worst_pop:.2g})",
        )
    )  # fmt: skip
    return out


# --- 4. the promise ------------------------------------------------------------------------


def recomputed_epsilon(mechanism: str, total: int, hyper: pd.DataFrame) -> tuple[float, str]:
    """The per-set epsilon the published hyperparameters prove (docs/privacy.md), and how:
    the family's privacy map (:attr:`dpcounts.mechanisms.registry.Family.privacy_map`).

    md: the smallest alpha gives ``log(1 + total / min alpha)`` (Quick (2021), eq 5:
    eps-DP iff ``min alpha >= total / (e^eps - 1)``). pg and truncated: the sum of the two
    largest kappa of :func:`dpcounts.privacy.certified.certified_epsilon` (untruncated:
    L = 0, U = total).
    """
    family = registry.family(mechanism)
    columns = {c: _floats(hyper, c) for c in family.hyperparameters}
    return family.privacy_map(total, columns)


def _signs(m: dict) -> list[str]:
    """What is wrong with the promise's numbers taken one by one (finite; epsilons and
    deltas of the right sign; a prior's epsilon exactly when the prior is sanitised)."""
    budget, delta, prior = m["budget"], m["delta"], m["prior"]
    numbers = {f"budget.{k}": budget[k] for k in (
        "epsilon_total", "epsilon_prior", "epsilon_synthesis", "epsilon_per_set",
        "delta_total", "delta_per_set")}  # fmt: skip
    numbers |= {"delta.per_set": delta["per_set"], "delta.sampler_tv_target":
                delta["sampler_tv_target"], "prior.epsilon": prior["epsilon"]}  # fmt: skip
    wrong = [
        f"{name} {shown(repr(value), 40)} is not a finite number"
        for name, value in numbers.items()
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
    ]
    if wrong:
        return wrong
    for name in ("epsilon_total", "epsilon_synthesis", "epsilon_per_set", "delta_total",
                 "delta_per_set"):  # fmt: skip
        if not budget[name] > 0:
            wrong.append(f"budget.{name} {_g(budget[name])} is not > 0")
    for name in ("delta_total", "delta_per_set"):
        if not budget[name] < 1:
            wrong.append(f"budget.{name} {_g(budget[name])} is not < 1")
    if not delta["sampler_tv_target"] > 0:
        wrong.append(f"delta.sampler_tv_target {_g(delta['sampler_tv_target'])} is not > 0")
    sanitised = prior["kind"] == "sanitised"
    eps_prior = budget["epsilon_prior"]
    if eps_prior < 0:
        wrong.append(f"budget.epsilon_prior {_g(eps_prior)} is negative")
    elif sanitised and not eps_prior > 0:
        wrong.append(f"a sanitised prior with budget.epsilon_prior {_g(eps_prior)}, not > 0")
    if not sanitised and eps_prior != 0:
        wrong.append(f"prior kind {shown(repr(prior['kind']), 40)} spends nothing, yet "
                     f"epsilon_prior is {_g(eps_prior)}")  # fmt: skip
    return wrong


def _promise_checks(release: _Release):
    from dpcounts.release.manifest import guarantee

    m = release.manifest
    budget, delta = m["budget"], m["delta"]
    out = []
    wrong = _signs(m)
    out.append(
        _check(
            "promise", "numbers", FAIL if wrong else OK,
            "; ".join(wrong) if wrong
            else "every epsilon and delta finite and > 0 (epsilon_prior >= 0, > 0 exactly "
                 "for a sanitised prior), deltas < 1",
            {"wrong": wrong},
        )
    )  # fmt: skip
    if wrong:
        return out, True
    sets = m["sets"]
    eps_total, eps_prior = budget["epsilon_total"], budget["epsilon_prior"]
    eps_set, eps_synth = budget["epsilon_per_set"], budget["epsilon_synthesis"]
    composed = eps_prior + sets * eps_set
    good = (
        _close(eps_total, composed, BUDGET_RTOL)
        and _close(eps_synth, eps_total - eps_prior, BUDGET_RTOL)
        and budget["sets"] == sets
        and _close(m["prior"]["epsilon"], eps_prior, BUDGET_RTOL)
    )
    out.append(
        _check(
            "promise", "epsilon", OK if good else FAIL,
            f"total {_g(eps_total)} vs prior {_g(eps_prior)} + {sets} x {_g(eps_set)} = "
            f"{_g(composed)}; synthesis {_g(eps_synth)} vs {_g(eps_total - eps_prior)}; "
            f"budget.sets {budget['sets']}, sets {sets}; prior.epsilon "
            f"{_g(m['prior']['epsilon'])}",
            {"epsilon_total": eps_total, "composed": composed},
        )
    )  # fmt: skip
    d_total, d_set = budget["delta_total"], budget["delta_per_set"]
    tv = d_set / (1.0 + math.exp(eps_set)) if eps_set <= 700 else 0.0
    good = (
        _close(d_total, sets * d_set, BUDGET_RTOL)
        and delta["per_set"] == d_set
        and _close(delta["sampler_tv_target"], tv, BUDGET_RTOL)
    )
    out.append(
        _check(
            "promise", "delta", OK if good else FAIL,
            f"total {_g(d_total)} vs {sets} x {_g(d_set)} = {_g(sets * d_set)}; delta.per_set "
            f"{_g(delta['per_set'])}; sampler_tv_target {_g(delta['sampler_tv_target'])} vs "
            f"per_set / (1 + e^eps_per_set) = {_g(tv)}",
        )
    )  # fmt: skip
    regenerated = guarantee(m["mechanism"], m["method"], budget)
    same = regenerated == m["guarantee"]
    differ = [k for k in regenerated if regenerated[k] != m["guarantee"].get(k)]
    out.append(
        _check(
            "promise", "statement", OK if same else FAIL,
            "guarantee (status, statement, proof) as this library words it for these numbers"
            if same
            else f"guarantee.{', guarantee.'.join(differ) or 'keys'} not what this library "
                 "writes for the mechanism, method and budget: the words must say the numbers",
        )
    )  # fmt: skip
    pair = (m["mechanism"], m["method"])
    certified = status(*pair) == "certified"
    claimed = m["guarantee"]["status"]
    right = claimed == ("certified" if certified else "nominal")
    out.append(
        _check(
            "promise", "status", OK if right else FAIL,
            f"guarantee.status {claimed!r}; {pair[0]} / {pair[1]} is "
            f"{'certified' if certified else 'nominal'} in this version",
            {"status": claimed, "certified": certified},
        )
    )  # fmt: skip
    hyper = release.table("hyperparameters")
    bound, how = recomputed_epsilon(m["mechanism"], m["total"], hyper)
    values = {"epsilon": bound, "epsilon_per_set": eps_set, "how": how}
    if certified:
        holds = bound <= eps_set * (1 + BOUND_RTOL)
        out.append(
            _check(
                "promise", "bound", OK if holds else FAIL,
                f"recomputed epsilon per set {bound:.12g} {'<=' if holds else '>'} "
                f"epsilon_per_set {_g(eps_set)} ({how}; docs/privacy.md)",
                values,
            )
        )  # fmt: skip
    elif not certified:
        out.append(
            _check(
                "promise", "bound", NOMINAL,
                f"nominal: no guarantee ({pair[0]} / {pair[1]} is not certified; the "
                f"certified bound of these shapes would be {_g(bound)} against "
                f"{_g(eps_set)} per set)",
                values,
            )
        )  # fmt: skip
    return out, True


# --- 5. metadata ---------------------------------------------------------------------------


def embedded_metadata(path: Path) -> list[str]:
    """What a public Parquet file embeds beyond pandas' description of its columns
    (:func:`.folder.write_public_table` writes nothing else); [] for a CSV file."""
    if path.suffix != ".parquet":
        return []
    import pyarrow.parquet as pq

    _footer(path)  # the schema is in the footer: a small one
    schema = pq.read_schema(path)
    metadata = dict(schema.metadata or {})
    found = [
        f"schema key {shown(repr(k.decode(errors='replace')), 60)}"
        for k in metadata
        if k != b"pandas"
    ]
    if b"pandas" in metadata:
        described = json.loads(metadata[b"pandas"])
        if not isinstance(described, dict) or described.get("attributes"):
            found.append("pandas attributes (attrs)")
    found += [f"metadata of column {shown(repr(f.name), 60)}" for f in schema if f.metadata]
    found += [
        f"categorical column {shown(repr(f.name), 60)}"
        for f in schema
        if str(f.type).startswith("dict")
    ]
    return found[:20]


def _metadata_checks(release: _Release):
    entries = release.entries()
    embedded = {
        shown(path.name, 80): found
        for path in entries
        if path.parent == release.path and regular_file(path)
        and (found := embedded_metadata(path))
    }  # fmt: skip
    paths = [release.path, *entries]
    off_time = [p for p in paths if int(p.lstat().st_mtime) != folder.PUBLIC_MTIME]

    def mode_of(p: Path) -> int:
        return folder.PUBLIC_FOLDER_MODE if p.is_dir() else folder.PUBLIC_FILE_MODE

    off_mode = [p for p in paths if (p.lstat().st_mode & 0o7777) != mode_of(p)]

    def names(found: list[Path]) -> str:
        shown = [p.relative_to(release.path).as_posix() or "." for p in found[:4]]
        return ", ".join(shown) + (", ..." if len(found) > 4 else "")

    out = [
        _check(
            "metadata", "embedded", FAIL if embedded else OK,
            ("metadata beyond the columns' description: "
             + "; ".join(f"{name}: {', '.join(found)}" for name, found in embedded.items())
             + " (the release's writer never embeds it: it may be the input's)")
            if embedded
            else "no file embeds metadata beyond its columns' description",
            {"embedded": embedded},
        ),
        _check(
            "metadata", "times", WARNING if off_time else OK,
            (f"{len(off_time)} of {len(paths)} (the folder '.' and its files) have a "
             f"modification time other than {folder.PUBLIC_MTIME} (1980-01-01): "
             f"{names(off_time)}; copying may change it")
            if off_time
            else f"the folder and its {len(paths) - 1} files have the modification time "
                 f"{folder.PUBLIC_MTIME} (1980-01-01)",
        ),
        _check(
            "metadata", "modes", WARNING if off_mode else OK,
            (f"{len(off_mode)} of {len(paths)} have modes other than 0644 (files) / 0755 "
             f"(folder): {names(off_mode)}; copying may change them")
            if off_mode
            else "files 0644, folder 0755",
        ),
    ]  # fmt: skip
    return out, True


# --- words ---------------------------------------------------------------------------------


def accounting(manifest: dict) -> tuple[list[str], list[str]]:
    """What a passing verification recomputed from the public files, and what the promise
    takes on trust (no check can see it), each as a list of phrases: the sanitised prior's
    epsilon (its noise cannot be read from its noisy totals), a declared prior's source
    and the count-fit check's verdict (the steward's word that the prior is public), and
    always that the sets were drawn by this calibration."""
    b, prior = manifest["budget"], manifest["prior"]
    kind = prior["kind"]
    promise = f"({_g(b['epsilon_total'])}, {_g(b['delta_total'])})-DP"
    sets = (f"epsilon {_g(b['epsilon_synthesis'])} of the {manifest['sets']} synthetic "
            f"set(s) (the privacy bound of the hyperparameters, {_g(b['epsilon_per_set'])} "
            "per set)")  # fmt: skip
    if kind == "none":
        recomputed = [f"the stated {promise}: {sets}"]
    elif kind == "total":
        recomputed = [f"the stated {promise}: {sets}, the prior the overall rate of the "
                      "public total"]  # fmt: skip
    else:
        recomputed = [sets]
    trusted = []
    if kind == "sanitised":
        recomputed.append("the prior's rates from its noisy totals")
        trusted.append(f"the sanitised prior's epsilon_prior {_g(b['epsilon_prior'])} (its "
                       "noise cannot be read from its noisy totals)")  # fmt: skip
    declared = prior.get("declared_source")
    if isinstance(declared, str):
        trusted.append(f'the prior\'s declared source "{shown(declared, 80)}"')
    verdict = prior.get("count_fit_check")
    if verdict in ("passed", "overridden"):
        said = "passed" if verdict == "passed" else "overridden by the steward"
        trusted.append(f"the count-fit check's verdict ({said})")
    trusted.append("that the sets were drawn by this calibration")
    return recomputed, trusted


def signature_state(checks: list[Check]) -> tuple[str, str]:
    """(state, sentence): whether the folder is signed and the signature checked
    (``verified``), signed but not checked (``not checked``: no ``--key``), ``unsigned``,
    or a signature that does not hold (``failed``); ``not looked at`` when the
    verification stopped before (a manifest it does not read)."""
    found = next((c for c in checks if (c.topic, c.name) == ("files", "signature")), None)
    if found is None:  # the verification stopped before the signature
        return "not looked at", "The signature was not looked at."
    state = found.values.get("state", "failed")
    key = shown(found.values.get("key_id", ""), 40)
    if state == "verified":
        sentence = (f"Signed by the given key {key}: no public file or manifest field changed "
                    "since the steward signed.")  # fmt: skip
    elif state == "not checked":
        sentence = (f"Signed (key {key}) but not checked: give --key PUBLIC, the steward's "
                    "public key, to check that nothing changed since.")  # fmt: skip
    elif state == "unsigned":
        sentence = (f"Unsigned: no {SIGNATURE}, so nothing shows the folder is as its "
                    "steward published it.")  # fmt: skip
    else:
        sentence = "The signature does not hold (files/signature)."
    return state, sentence


def _and(phrases: list[str]) -> str:
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]


def summary(checks: list[Check], manifest: dict | None = None) -> str:
    """The closing line: passed or failed; when passed, what was recomputed from the
    public files and what is taken on trust (:func:`accounting`); and whether the folder
    is signed (:func:`signature_state`)."""
    fails = [c for c in checks if c.status == FAIL]
    warnings = [c for c in checks if c.status == WARNING]
    nominal = [c for c in checks if c.status == NOMINAL]
    counted = f"{len(checks) - len(fails)} of {len(checks)} checks passed"
    if warnings:
        counted += f", {len(warnings)} warning(s)"
    signed = signature_state(checks)[1]
    if fails:
        names = ", ".join(f"{c.topic}/{shown(c.name, 60)}" for c in fails[:4])
        more = ", ..." if len(fails) > 4 else ""
        return (
            f"FAILED: {counted}; failed: {names}{more}. The release is not what its manifest "
            f"says, or its public numbers do not give its promise. {signed}"
        )
    if nominal:
        return (
            f"PASSED, NOMINAL: {counted}. The files are what the manifest says, but the "
            f"release is nominal: it promises nothing proven. {signed}"
        )
    # No check can tell sets drawn by the calibration from any other table of whole counts
    # with the total, the confidential table included, nor read a prior's noise from its
    # noisy totals: say what was recomputed and what is taken on trust, not more.
    try:
        recomputed, trusted = accounting(manifest)
    except (KeyError, TypeError):  # no manifest given, or not the one verified
        recomputed = ["the privacy bound of the hyperparameters"]
        trusted = ["that the sets were drawn by this calibration"]
    return (
        f"PASSED: {counted}. Recomputed from the public files: {_and(recomputed)}; taken on "
        f"trust, not checkable from the folder: {_and(trusted)}. {signed}"
    )


def format_checks(checks: list[Check], path: Path, manifest: dict | None = None) -> str:
    """The checks by topic, one line each, then :func:`summary`."""
    head = f"dpcounts verify {shown(path)}"
    if manifest is not None and isinstance(manifest.get("budget"), dict):
        try:
            head += (
                f": {shown(manifest['mechanism'], 20)} / {shown(manifest['method'], 20)}, "
                f"{shown(manifest['sets'], 20)} set(s) of {shown(manifest['strata'], 20)} strata, "
                f"total {shown(manifest['total'], 20)}"
            )
        except KeyError:
            pass
    lines = [head]
    for topic in TOPICS:
        found = [c for c in checks if c.topic == topic]
        if not found:
            continue
        lines.append(topic)
        for c in found:
            lines.append(f"  {shown(c.status, 8):<7} {shown(c.name, 60)}: {shown(c.detail, 400)}")
    lines.append(shown(summary(checks, manifest), 1000))
    return "\n".join(lines)


def report(path: Path, key=None) -> tuple[list[Check], dict | None]:
    """:func:`verify_release` (with the steward's public ``key``, if given) and the
    manifest it read (None if it does not parse)."""
    checks = verify_release(path, key)
    manifest, _ = load_manifest(path)
    return checks, manifest


def as_json(checks: list[Check], path: Path, manifest: dict | None = None) -> str:
    return json.dumps(
        {
            "release": os.fspath(path),
            "passed": not failed(checks),
            "nominal": any(c.status == NOMINAL for c in checks),
            "summary": summary(checks, manifest),
            **_json_accounting(checks, manifest),
            "checks": [c.as_dict() for c in checks],
        },
        indent=2,
        default=float,
    )


def _json_accounting(checks: list[Check], manifest: dict | None) -> dict:
    """``recomputed`` and ``trusted`` (:func:`accounting`; null unless every check passed
    and the release is certified) and ``signature`` (:func:`signature_state`)."""
    recomputed = trusted = None
    if not failed(checks) and not any(c.status == NOMINAL for c in checks):
        try:
            recomputed, trusted = accounting(manifest)
        except (KeyError, TypeError):
            pass
    return {"recomputed": recomputed, "trusted": trusted, "signature": signature_state(checks)[0]}
