"""The ledger's line format: one JSON object a line, a release (:class:`Entry`) or a
stored budget (:class:`StoredBudget`), parsed and written here, with the checks of every
field (a dataset name, :func:`check_name`; a table id; numbers) and the hash chain that
ties each line to the bytes before it (:func:`_parse_lines`).

One line per release (JSON Lines, appended, never rewritten)::

    {"dataset": "us-deaths", "table": "<sha256 hex>", "label": "deaths.csv",
     "epsilon": 1.0, "delta": 0.0, "release": "out/", "time": "2024-05-01T12:00:00Z",
     "version": "0.1.0", "guarantee": "certified"}

A line without ``table`` (recorded before names existed) is a release of the table whose id
is its ``dataset``, as it always was.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from dpcounts import __version__

#: What an entry's guarantee may be (None: recorded before the field existed).
GUARANTEES = ("certified", "nominal", None)

_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,199}")
#: What a dataset name may be (the error of :func:`check_name`).
NAME_RULE = (
    "1 to 200 letters, digits and . _ : @ / + -, starting with a letter or a digit, and not "
    "hex digits only (those are table ids, SHA-256)"
)


class LedgerError(Exception):
    """The ledger refuses a release (budget), or a ledger file cannot be read."""


@dataclass(frozen=True)
class Entry:
    """One release recorded in the ledger."""

    #: the budget key: the dataset's name, or the table id when the release named none
    dataset: str
    epsilon: float
    delta: float
    time: datetime  # UTC, whole seconds
    label: str | None = None  # human name of the input, e.g. its file name
    release: str | None = None  # free form, e.g. the release folder
    version: str | None = None  # dpcounts version that recorded the entry
    #: "certified" (a proven guarantee) or "nominal" (a target the exact audit found
    #: exceeded: its epsilon bounds nothing); None for entries recorded before the field
    guarantee: str | None = None
    #: SHA-256 hex of the released table's public identity; None: the same as ``dataset``
    #: (a release without a name, or a line recorded before the field existed)
    table: str | None = None
    #: other ids of the same table: its ids before identities were canonical (one per
    #: order of its key columns), whose releases it adopts (:mod:`dpcounts.release.inputs`)
    aliases: tuple[str, ...] = ()
    #: the release's private folder, whose provenance.json records this entry
    private: str | None = None
    #: the steward declared that the dataset counts other people than the datasets its
    #: table overlaps (``--new-dataset``, :mod:`dpcounts.ledger.index`)
    new_dataset: bool = False
    #: restored by :meth:`Ledger.rebuild` from the steward's index, or kept by it, while
    #: its private folder is gone: spent, record lost
    lost: bool = False
    #: a random id (32 hex digits) that the private folder's record names; None: recorded
    #: before the field existed
    id: str | None = field(default=None, compare=False)
    #: SHA-256 of the ledger's bytes before this line (the hash chain); None: recorded
    #: before the chain existed
    prev: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.table is None:
            object.__setattr__(self, "table", self.dataset)

    @property
    def named(self) -> bool:
        """Whether the release was recorded under a dataset name (``--dataset``)."""
        return self.dataset != self.table

    @property
    def short(self) -> str:
        """The first 12 hex digits of the table id."""
        return self.table[:12]

    def to_json(self) -> str:
        record = {
            "dataset": self.dataset,
            "table": self.table,
            "label": self.label,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "release": self.release,
            "time": _format_time(self.time),
            "version": self.version,
            "guarantee": self.guarantee,
            "aliases": list(self.aliases),
            "private": self.private,
            **({"new_dataset": True} if self.new_dataset else {}),
            **({"lost": True} if self.lost else {}),
            "id": self.id,
            "prev": self.prev,
        }
        return json.dumps(record, ensure_ascii=False, allow_nan=False)

    def record(self) -> dict:
        """The entry as a JSON object (what a private folder's provenance keeps)."""
        return json.loads(self.to_json())


@dataclass(frozen=True)
class StoredBudget:
    """A dataset's budget stored in the ledger (``dpcounts ledger --set-budget``, or the
    first ``--budget`` given for it): every later release under the name is checked
    against it."""

    dataset: str
    budget: float
    time: datetime
    id: str | None = None
    prev: str | None = field(default=None, compare=False)

    def to_json(self) -> str:
        record = {
            "kind": "budget",
            "dataset": self.dataset,
            "budget": self.budget,
            "time": _format_time(self.time),
            "version": __version__,
            "id": self.id,
            "prev": self.prev,
        }
        return json.dumps(record, ensure_ascii=False, allow_nan=False)


@dataclass
class _Book:
    """A ledger's records: release entries, stored budgets, both in file order."""

    entries: list[Entry]
    stored: list[StoredBudget]
    order: list

    @property
    def budgets(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for record in self.stored:
            out[record.dataset] = record.budget
        return out


def _parse_lines(data: bytes, path: Path, chained: bool) -> _Book:
    """Parse a ledger's bytes; with ``chained``, check its hash chain: every line recorded
    since the chain exists holds the SHA-256 of the bytes before it; lines without one
    (recorded before) may only come first."""
    lines = data.split(b"\n")
    last = len(lines)  # the piece after the final newline: empty if the file is whole
    book = _Book([], [], [])
    running = hashlib.sha256()
    seen_chain = False
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            running.update(raw + b"\n")
            continue
        if number == last:
            raise LedgerError(
                f"{path}, line {number}: incomplete last line (no newline at the "
                f"end; a release was probably killed while recording): {_snippet(raw)}. "
                "Expected one complete JSON object per line. Repair it by hand: complete "
                "it, or delete it only if that release was never published."
            )
        try:
            record = _parse_record(raw)
        except ValueError as err:  # includes UnicodeDecodeError
            raise LedgerError(
                f"{path}, line {number}: {err}; got {_snippet(raw)}. Repair the "
                "line by hand: the ledger refuses to guess what was spent."
            ) from None
        if chained and record.prev is not None and record.prev != running.hexdigest():
            where = "its first line" if number == 1 else f"line {number}"
            raise LedgerError(
                f"{path}, {where}: the hash chain is broken (the line records the SHA-256 "
                "of the ledger before it, and that ledger is not there): lines before it "
                "were removed or edited. Restore the ledger from a backup, or rebuild it "
                f"from the releases' private folders: dpcounts ledger --ledger {path} --rebuild"
            )
        if chained and record.prev is None and seen_chain:
            raise LedgerError(
                f"{path}, line {number}: a line without the hash chain after lines with it "
                "(inserted by hand?); the ledger refuses to guess what was spent. Restore "
                f"it from a backup, or: dpcounts ledger --ledger {path} --rebuild"
            )
        seen_chain = seen_chain or record.prev is not None
        running.update(raw + b"\n")
        book.order.append(record)
        (book.stored if isinstance(record, StoredBudget) else book.entries).append(record)
    return book


# -- fields: what a name, a table id and a number may be ---------------------------------


def check_name(name: object) -> str:
    """``name`` if it is a valid dataset name (:data:`NAME_RULE`), else ``ValueError``."""
    if not isinstance(name, str) or not _NAME.fullmatch(name) or _HEX.fullmatch(name):
        raise ValueError(f"a dataset name is {NAME_RULE}; got {name!r}")
    return name


def _check_table(table: object) -> str:
    if not isinstance(table, str) or not _SHA256.fullmatch(table):
        raise ValueError(f"table must be a SHA-256 hex digest (64 hex digits), got {table!r}")
    return table.lower()


def _check_key(key: object) -> str:
    """A budget key: a table id (lower-cased) or a dataset name."""
    if isinstance(key, str) and _SHA256.fullmatch(key):
        return key.lower()
    if isinstance(key, str) and _NAME.fullmatch(key) and not _HEX.fullmatch(key):
        return key
    raise ValueError(
        f"dataset must be a table id (a SHA-256 hex digest, 64 hex digits) or a dataset "
        f"name ({NAME_RULE}), got {key!r}"
    )


def _new_entry(dataset, epsilon, delta, table, label, release, time, guarantee) -> Entry:
    """A checked entry: ``dataset`` a budget key (a name, with ``table`` the table's id; or
    the table's id), ``time`` timezone-aware (default now, stored in UTC)."""
    dataset = _check_key(dataset)
    if table is None:
        if not _SHA256.fullmatch(dataset):
            raise ValueError(
                f"table (the released table's SHA-256 id) is required with the dataset "
                f"name {dataset!r}"
            )
        table = dataset
    else:
        table = _check_table(table)
        if _SHA256.fullmatch(dataset) and dataset != table:
            raise ValueError(
                f"dataset {dataset[:12]} is a table id other than table {table[:12]}: "
                "give a dataset name, or the table id"
            )
    epsilon = _check_number("epsilon", epsilon)
    if not epsilon > 0:
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    delta = _check_number("delta", delta)
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be a finite number in [0, 1), got {delta!r}")
    if guarantee not in GUARANTEES:
        raise ValueError(f"guarantee must be one of {GUARANTEES}, got {guarantee!r}")
    for name, text in (("label", label), ("release", release)):
        if text is not None and not isinstance(text, str):
            raise ValueError(f"{name} must be a string or None, got {text!r}")
    if time is None:
        time = datetime.now(UTC)
    elif time.tzinfo is None:
        raise ValueError(f"time must be timezone-aware, got {time!r}")
    return Entry(
        dataset=dataset,
        epsilon=epsilon,
        delta=delta,
        time=time.astimezone(UTC).replace(microsecond=0),
        label=label,
        release=release,
        version=__version__,
        guarantee=guarantee,
        table=table,
    )


def _check_number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _load(raw: bytes) -> dict:
    try:
        record = json.loads(raw.decode("utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(
            f"expected one JSON object per line, but the JSON is invalid at column "
            f"{err.colno} ({err.msg})"
        ) from None
    if not isinstance(record, dict):
        raise ValueError("expected a JSON object")
    return record


def _parse_record(raw: bytes) -> Entry | StoredBudget:
    """A ledger line: a release (no ``kind``) or a stored budget (``kind: budget``)."""
    record = _load(raw)
    if record.get("kind") == "budget":
        return _parse_budget(raw)
    if "kind" in record:
        raise ValueError(f"expected kind 'budget' or none, got {record['kind']!r}")
    return _parse_entry(raw)


def _hex_or_none(record: dict, key: str, pattern: re.Pattern) -> str | None:
    value = record.get(key)
    if value is not None and not (isinstance(value, str) and pattern.fullmatch(value)):
        raise ValueError(f"expected {key} to be hex digits or null, got {value!r}")
    return value


def _parse_budget(raw: bytes) -> StoredBudget:
    record = _load(raw)
    name = _check_key(record.get("dataset"))
    budget = _check_number("budget", record.get("budget"))
    if not budget > 0:
        raise ValueError(f"expected budget > 0, got {budget!r}")
    return StoredBudget(
        name,
        budget,
        _parse_time(record.get("time")),
        _hex_or_none(record, "id", _HEX),
        _hex_or_none(record, "prev", _SHA256),
    )


def _parse_time(stamp: object) -> datetime:
    try:
        time = datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        raise ValueError(f"expected an ISO-8601 time, got {stamp!r}") from None
    if time.tzinfo is None:
        raise ValueError(f"expected an ISO-8601 time with a UTC offset, got {stamp!r}")
    return time.astimezone(UTC)


def _parse_entry(raw: bytes) -> Entry:
    record = _load(raw)
    missing = [k for k in ("dataset", "epsilon", "delta", "time") if k not in record]
    if missing:
        raise ValueError(
            "expected a JSON object with dataset, epsilon, delta and time; "
            f"missing {', '.join(missing)}"
        )
    dataset = _check_key(record["dataset"])
    table = record.get("table")
    if table is None:  # recorded before names existed, or a release without one
        if not _SHA256.fullmatch(dataset):
            raise ValueError(
                f"expected a table (the SHA-256 of the table) with the dataset name {dataset!r}"
            )
        table = dataset
    table = _check_table(table)
    if _SHA256.fullmatch(dataset) and dataset != table:
        raise ValueError("expected the table id to equal a dataset that is a table id")
    epsilon = _check_number("epsilon", record["epsilon"])
    delta = _check_number("delta", record["delta"])
    if not epsilon > 0:
        raise ValueError(f"expected epsilon > 0, got {epsilon!r}")
    if not 0 <= delta < 1:
        raise ValueError(f"expected delta in [0, 1), got {delta!r}")
    time = _parse_time(record["time"])
    optional = {}
    for key in ("label", "release", "version", "guarantee", "private"):
        value = record.get(key)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"expected {key} to be a string or null, got {value!r}")
        optional[key] = value
    if optional["guarantee"] not in GUARANTEES:
        raise ValueError(f"expected guarantee in {GUARANTEES}, got {optional['guarantee']!r}")
    aliases = record.get("aliases") or []
    if not isinstance(aliases, list):
        raise ValueError(f"expected aliases to be a list of table ids, got {aliases!r}")
    for key in ("new_dataset", "lost"):
        if not isinstance(record.get(key, False), bool):
            raise ValueError(f"expected {key} to be true or false, got {record[key]!r}")
    return Entry(
        dataset,
        epsilon,
        delta,
        time,
        **optional,
        table=table,
        aliases=tuple(_check_table(a) for a in aliases),
        new_dataset=record.get("new_dataset", False),
        lost=record.get("lost", False),
        id=_hex_or_none(record, "id", _HEX),
        prev=_hex_or_none(record, "prev", _SHA256),
    )


def _dataset_record(name: str, ledger: str, time: datetime) -> dict:
    return {"kind": "dataset", "name": name, "ledger": ledger, "time": _format_time(time)}


def _table_record(
    table: str, dataset: str, ledger: str, file, strata, pairs=None, events=None
) -> dict:
    """The index's record of a released table: its key fingerprint (``file``, ``strata``
    hashes) and, when known, its pair fingerprint (``pairs``, ``events`` hashes)."""
    record = {"kind": "table", "table": table, "dataset": dataset, "ledger": ledger,
              "file": file, "strata": strata}  # fmt: skip
    if pairs is not None:
        record |= {"pairs": pairs, "events": events}
    return record


def _plain(record: StoredBudget) -> dict:
    return json.loads(record.to_json())


def _format_time(time: datetime) -> str:
    return time.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


def _num(x: float) -> str:
    return f"{x:.12g}"


def _snippet(raw: bytes, limit: int = 80) -> str:
    text = raw.decode("utf-8", errors="replace")
    return repr(text if len(text) <= limit else text[:limit] + "...")
