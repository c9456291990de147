"""The data steward's privacy-budget ledger: what each release of a dataset has spent.

Sequential releases of the same confidential data compose: with basic composition, k
releases at (epsilon_i, delta_i) are together (sum epsilon_i, sum delta_i)-DP. The ledger
records every release as one JSON line and can refuse a release that would take a dataset
over its epsilon budget::

    ledger = Ledger(default_ledger_path())
    ledger.spend(dataset_hash, 1.0, 0.0, budget=5.0, label="deaths.csv", release="out/")
    print(format_summary(ledger))

The ledger lives outside any release folder (``default_ledger_path``, in the steward's
folder :func:`steward_home`) and must never be published: it holds hashes of the
confidential inputs, which confirm a guessed dataset.

One line per release (JSON Lines, appended, never rewritten)::

    {"dataset": "<sha256 hex>", "label": "deaths.csv", "epsilon": 1.0, "delta": 0.0,
     "release": "out/", "time": "2024-05-01T12:00:00Z", "version": "0.1.0"}

Concurrent releases are safe: ``spend`` reads, checks and appends under an exclusive
``fcntl.flock`` on the ledger file (local file systems; flock over NFS is not reliable),
so no entry is lost and concurrent releases never jointly exceed a budget. A line that does
not parse, including a last line cut short by a killed writer, stops every read and spend
with a ``LedgerError`` naming the line: dropping it silently would under-count the budget.
Repair such a line by hand (complete it, or delete it only if that release was never
published).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dpsynth import __version__

#: What an entry's guarantee may be (None: recorded before the field existed).
GUARANTEES = ("certified", "nominal", None)
#: Relative tolerance of the budget check (floating-point sums only, not a privacy margin).
BUDGET_RTOL = 1e-12

_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


class LedgerError(Exception):
    """The ledger refuses a release (budget), or a ledger file cannot be read."""


def steward_home() -> Path:
    """The steward's own dpsynth folder, ``$XDG_DATA_HOME/dpsynth``: where the ledger and
    the releases' private folders go by default. Never publish it.

    ``XDG_DATA_HOME`` defaults to ``~/.local/share`` when unset or empty.
    """
    data_home = os.environ.get("XDG_DATA_HOME") or "~/.local/share"
    return Path(data_home).expanduser() / "dpsynth"


def default_ledger_path() -> Path:
    """``$DPSYNTH_LEDGER`` if set, else ``ledger.jsonl`` in :func:`steward_home`."""
    explicit = os.environ.get("DPSYNTH_LEDGER")
    if explicit:
        return Path(explicit).expanduser()
    return steward_home() / "ledger.jsonl"


@dataclass(frozen=True)
class Entry:
    """One release recorded in the ledger."""

    dataset: str  # SHA-256 hex of the input's canonical content
    epsilon: float
    delta: float
    time: datetime  # UTC, whole seconds
    label: str | None = None  # human name of the input, e.g. its file name
    release: str | None = None  # free form, e.g. the release folder
    version: str | None = None  # dpsynth version that recorded the entry
    #: "certified" (a proven guarantee) or "nominal" (a target the exact audit found
    #: exceeded: its epsilon bounds nothing); None for entries recorded before the field
    guarantee: str | None = None

    @property
    def short(self) -> str:
        """The first 12 hex digits of the dataset id."""
        return self.dataset[:12]

    def to_json(self) -> str:
        record = {
            "dataset": self.dataset,
            "label": self.label,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "release": self.release,
            "time": _format_time(self.time),
            "version": self.version,
            "guarantee": self.guarantee,
        }
        return json.dumps(record, ensure_ascii=False, allow_nan=False)


class Ledger:
    """A JSON Lines ledger at ``path`` (created, with its parents, on the first spend)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    def entries(self, dataset: str | None = None) -> list[Entry]:
        """All entries in file order, or those of one dataset (full SHA-256 hex)."""
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return []
        with f:
            fcntl.flock(f, fcntl.LOCK_SH)  # never see a line half-written by a spend
            found = self._parse(f.read())
        if dataset is None:
            return found
        dataset = _check_dataset(dataset)
        return [e for e in found if e.dataset == dataset]

    def spent(self, dataset: str) -> tuple[float, float, int]:
        """(total epsilon, total delta, number of releases) of a dataset: basic composition."""
        return _totals(self.entries(dataset))

    def spend(
        self,
        dataset: str,
        epsilon: float,
        delta: float,
        *,
        budget: float | None = None,
        label: str | None = None,
        release: str | None = None,
        time: datetime | None = None,
        guarantee: str | None = None,
    ) -> Entry:
        """Record a release of ``dataset`` at (epsilon, delta) and return its entry.

        With ``budget``, refuse (``LedgerError``, nothing recorded) if the epsilon already
        spent on the dataset plus ``epsilon`` would exceed it. Check and append happen under
        one exclusive lock, so concurrent calls can neither lose entries nor jointly
        overspend. ``time`` (timezone-aware) defaults to now; it is stored in UTC.
        ``guarantee`` is ``"certified"`` or ``"nominal"``: a nominal release's epsilon bounds
        nothing, so no budget can be checked once one is recorded for the dataset (or when
        this release is nominal): ``budget`` then refuses.
        """
        dataset = _check_dataset(dataset)
        epsilon = _check_number("epsilon", epsilon)
        if not epsilon > 0:
            raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
        delta = _check_number("delta", delta)
        if not 0 <= delta < 1:
            raise ValueError(f"delta must be a finite number in [0, 1), got {delta!r}")
        if budget is not None:
            budget = _check_number("budget", budget)
            if not budget > 0:
                raise ValueError(f"budget must be a finite number > 0, got {budget!r}")
        if guarantee not in GUARANTEES:
            raise ValueError(f"guarantee must be one of {GUARANTEES}, got {guarantee!r}")
        for name, text in (("label", label), ("release", release)):
            if text is not None and not isinstance(text, str):
                raise ValueError(f"{name} must be a string or None, got {text!r}")
        if time is None:
            time = datetime.now(UTC)
        elif time.tzinfo is None:
            raise ValueError(f"time must be timezone-aware, got {time!r}")
        entry = Entry(
            dataset=dataset,
            epsilon=epsilon,
            delta=delta,
            time=time.astimezone(UTC).replace(microsecond=0),
            label=label,
            release=release,
            version=__version__,
            guarantee=guarantee,
        )
        line = (entry.to_json() + "\n").encode("utf-8")
        with self._locked_for_append() as f:
            previous = [e for e in self._parse(f.read()) if e.dataset == dataset]
            if budget is not None:
                _check_budget(previous, entry, budget)
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        return entry

    # -- internals -------------------------------------------------------------------

    def _locked_for_append(self):
        """The ledger opened for read + append, exclusively locked, positioned at 0."""
        while True:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_RDWR | os.O_APPEND | os.O_CREAT
            try:
                fd = os.open(self.path, flags | os.O_EXCL, 0o600)
            except FileExistsError:
                fd = os.open(self.path, flags)
            else:
                os.fchmod(fd, 0o600)  # whatever the umask
                _fsync_dir(self.path.parent)
            f = open(fd, "a+b")
            try:
                fcntl.flock(f, fcntl.LOCK_EX)
                # A hand edit may have replaced the file while we waited for the lock.
                if os.path.samestat(os.fstat(f.fileno()), os.stat(self.path)):
                    f.seek(0)
                    return f
            except FileNotFoundError:
                pass
            except BaseException:
                f.close()
                raise
            f.close()

    def _parse(self, data: bytes) -> list[Entry]:
        lines = data.split(b"\n")
        last = len(lines)  # the piece after the final newline: empty if the file is whole
        found = []
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            if number == last:
                raise LedgerError(
                    f"{self.path}, line {number}: incomplete last line (no newline at the "
                    f"end; a release was probably killed while recording): {_snippet(raw)}. "
                    "Expected one complete JSON object per line. Repair it by hand: complete "
                    "it, or delete it only if that release was never published."
                )
            try:
                found.append(_parse_entry(raw))
            except ValueError as err:  # includes UnicodeDecodeError
                raise LedgerError(
                    f"{self.path}, line {number}: {err}; got {_snippet(raw)}. Repair the "
                    "line by hand: the ledger refuses to guess what was spent."
                ) from None
        return found


def format_summary(ledger: Ledger, dataset: str | None = None) -> str:
    """A plain-text table of what each dataset has spent (basic composition).

    With ``dataset`` (the full id or a prefix such as the 12 digits shown in the table),
    only that dataset, followed by its releases one per line.
    """
    found = ledger.entries()
    if dataset is not None:
        prefix = dataset.strip().lower()
        if not prefix or not re.fullmatch(r"[0-9a-f]{1,64}", prefix):
            raise ValueError(f"dataset must be hex digits of a SHA-256, got {dataset!r}")
        ids = sorted({e.dataset for e in found if e.dataset.startswith(prefix)})
        if len(ids) > 1:
            raise LedgerError(
                f"dataset prefix {dataset!r} is ambiguous in {ledger.path}: "
                + ", ".join(i[:12] for i in ids)
            )
        if not ids:
            return f"No releases of dataset {prefix[:12]} recorded in {ledger.path}."
        found = [e for e in found if e.dataset == ids[0]]
    if not found:
        return f"No releases recorded in {ledger.path}."

    groups: dict[str, list[Entry]] = {}
    for entry in found:
        groups.setdefault(entry.dataset, []).append(entry)
    rows = []
    for group in groups.values():
        eps, dlt, n = _totals(group)
        nominal = sum(e.guarantee == "nominal" for e in group)
        rows.append(
            [
                _label(group),
                group[0].short,
                f"{n} ({nominal} nominal)" if nominal else str(n),
                _num(eps),
                _num(dlt),
                _format_time(min(e.time for e in group)),
                _format_time(max(e.time for e in group)),
            ]
        )
    header = ["label", "dataset", "releases", "epsilon", "delta", "first", "last"]
    lines = [f"Privacy budget spent (basic composition), ledger {ledger.path}", ""]
    lines += _table(header, rows, right={2, 3, 4})
    if any(e.guarantee == "nominal" for e in found):
        note = ("nominal: a release whose epsilon is a target the exact audit found exceeded "
                "(--allow-nominal); a total that includes one bounds nothing")  # fmt: skip
        lines += ["", note]
    if dataset is not None:
        lines += ["", "Releases:"]
        release_rows = [
            [
                _format_time(e.time),
                _num(e.epsilon),
                _num(e.delta),
                e.guarantee or "-",
                e.label or "-",
                e.release or "-",
                e.version or "-",
            ]
            for e in found
        ]
        header = ["time", "epsilon", "delta", "guarantee", "label", "release", "dpsynth"]
        lines += _table(header, release_rows, right={1, 2})
    return "\n".join(lines)


# -- helpers -----------------------------------------------------------------------------


def _check_dataset(dataset: str) -> str:
    if not isinstance(dataset, str) or not _SHA256.fullmatch(dataset):
        raise ValueError(f"dataset must be a SHA-256 hex digest (64 hex digits), got {dataset!r}")
    return dataset.lower()


def _check_number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _check_budget(previous: list[Entry], entry: Entry, budget: float) -> None:
    nominal = [e for e in [*previous, entry] if e.guarantee == "nominal"]
    if nominal:
        who = entry.label or _label(previous)
        which = (
            "this release is"
            if entry in nominal
            else (
                f"{len(nominal)} earlier release{'' if len(nominal) == 1 else 's'} of it "
                f"{'is' if len(nominal) == 1 else 'are'}"
            )
        )
        raise LedgerError(
            f"no privacy budget can be checked for dataset {who} ({entry.short}): {which} "
            "nominal (--allow-nominal), whose epsilon is a target the exact audit found "
            "exceeded, not a bound. Release with a certified method, or without --budget. "
            "Nothing was recorded."
        )
    spent_eps, spent_delta, n = _totals(previous)
    total = math.fsum([*(e.epsilon for e in previous), entry.epsilon])
    if total <= budget * (1 + BUDGET_RTOL):
        return
    who = entry.label or _label(previous)
    remaining = max(0.0, budget - spent_eps)
    raise LedgerError(
        f"privacy budget exceeded for dataset {who} ({entry.short}): {n} release"
        f"{'' if n == 1 else 's'} already spent epsilon = {_num(spent_eps)} "
        f"(delta = {_num(spent_delta)}) of the budget epsilon = {_num(budget)}; this release "
        f"asks for epsilon = {_num(entry.epsilon)}, which would make {_num(total)} "
        f"(remaining: {_num(remaining)}). Nothing was recorded."
    )


def _parse_entry(raw: bytes) -> Entry:
    try:
        record = json.loads(raw.decode("utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(
            f"expected one JSON object per line, but the JSON is invalid at column "
            f"{err.colno} ({err.msg})"
        ) from None
    if not isinstance(record, dict):
        raise ValueError("expected a JSON object")
    missing = [k for k in ("dataset", "epsilon", "delta", "time") if k not in record]
    if missing:
        raise ValueError(
            "expected a JSON object with dataset, epsilon, delta and time; "
            f"missing {', '.join(missing)}"
        )
    dataset = _check_dataset(record["dataset"])
    epsilon = _check_number("epsilon", record["epsilon"])
    delta = _check_number("delta", record["delta"])
    if not epsilon > 0:
        raise ValueError(f"expected epsilon > 0, got {epsilon!r}")
    if not 0 <= delta < 1:
        raise ValueError(f"expected delta in [0, 1), got {delta!r}")
    stamp = record["time"]
    try:
        time = datetime.fromisoformat(stamp)
    except (TypeError, ValueError):
        raise ValueError(f"expected an ISO-8601 time, got {stamp!r}") from None
    if time.tzinfo is None:
        raise ValueError(f"expected an ISO-8601 time with a UTC offset, got {stamp!r}")
    optional = {}
    for key in ("label", "release", "version", "guarantee"):
        value = record.get(key)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"expected {key} to be a string or null, got {value!r}")
        optional[key] = value
    if optional["guarantee"] not in GUARANTEES:
        raise ValueError(f"expected guarantee in {GUARANTEES}, got {optional['guarantee']!r}")
    return Entry(dataset, epsilon, delta, time.astimezone(UTC), **optional)


def _totals(entries: list[Entry]) -> tuple[float, float, int]:
    return (
        math.fsum(e.epsilon for e in entries),
        math.fsum(e.delta for e in entries),
        len(entries),
    )


def _label(entries: list[Entry]) -> str:
    """The most recent label recorded for a dataset."""
    labels = [e.label for e in entries if e.label]
    return labels[-1] if labels else "unlabelled"


def _format_time(time: datetime) -> str:
    return time.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="seconds") + "Z"


def _num(x: float) -> str:
    return f"{x:.12g}"


def _snippet(raw: bytes, limit: int = 80) -> str:
    text = raw.decode("utf-8", errors="replace")
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def fmt(row: list[str]) -> str:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return [fmt(header), fmt(["-" * w for w in widths]), *(fmt(r) for r in rows)]


def _fsync_dir(path: Path) -> None:
    """Make a new file's directory entry durable (best effort)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
