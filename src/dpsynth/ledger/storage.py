"""The data steward's privacy-budget ledger: what the releases of a dataset have spent.

Sequential releases of the same confidential data compose: with basic composition, k
releases at (epsilon_i, delta_i) are together (sum epsilon_i, sum delta_i)-DP. The ledger
records every release as one JSON line and can refuse a release that would take a dataset
over its epsilon budget::

    ledger = Ledger(default_ledger_path())
    ledger.spend(table_id, 1.0, 0.0, budget=5.0, label="deaths.csv", release="out/")
    ledger.spend("us-deaths", 1.0, 0.0, table=table_id, budget=5.0)  # a named dataset
    print(format_summary(ledger))

Budget keys. Every entry has a ``table`` (the SHA-256 id of the released table of strata)
and a ``dataset``, the key its budget is counted under: the steward's name for the
confidential data (``--dataset NAME``: the people, the events) or, without a name, the
table id itself. Releases of different tables of the same events compose (moving one event
moves at most one event in each table), so a name adds up every table released under it:

* a name's spending is its own entries plus those recorded under the table id of every
  table ever released under the name (a table released without a name, then with one,
  brings its earlier spending along);
* a table is bound to the name it was released under: releasing it again without a name or
  under another one is refused (two names would split the people's budget).

Only the steward can say that two tables count the same people: giving them one name is
the steward's responsibility (docs/privacy.md, Part 4).

One budget per dataset per steward: the steward's index (:mod:`dpsynth.ledger_index`, in
:func:`steward_home`) binds every dataset name (compared without regard to case and spaces)
and every released table to one ledger file, refuses a table whose strata overlap another
dataset's unless the steward declares new people (``new_dataset``), and keeps a copy of
every entry, so that :meth:`Ledger.rebuild` only adds.

The ledger lives outside any release folder (``default_ledger_path``, in the steward's
folder :func:`steward_home`) and must never be published: it holds hashes of the
confidential inputs, which confirm a guessed dataset.

One line per release (JSON Lines, appended, never rewritten)::

    {"dataset": "us-deaths", "table": "<sha256 hex>", "label": "deaths.csv",
     "epsilon": 1.0, "delta": 0.0, "release": "out/", "time": "2024-05-01T12:00:00Z",
     "version": "0.1.0", "guarantee": "certified"}

A line without ``table`` (recorded before names existed) is a release of the table whose id
is its ``dataset``, as it always was.

Concurrent releases are safe: ``spend`` reads, checks and appends under an exclusive
``fcntl.flock`` on the ledger file (local file systems; flock over NFS is not reliable),
so no entry is lost and concurrent releases never jointly exceed a budget, whatever their
tables. A line that does not parse, including a last line cut short by a killed writer,
stops every read and spend with a ``LedgerError`` naming the line: dropping it silently
would under-count the budget. Repair such a line by hand (complete it, or delete it only
if that release was never published).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
import secrets
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from dpsynth import __version__
from dpsynth.ledger_index import OVERLAP_SHARE, Index, normal_name
from dpsynth.ledger_index import State as IndexState

#: What an entry's guarantee may be (None: recorded before the field existed).
GUARANTEES = ("certified", "nominal", None)
#: Relative tolerance of the budget check (floating-point sums only, not a privacy margin).
BUDGET_RTOL = 1e-12

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

    #: the budget key: the dataset's name, or the table id when the release named none
    dataset: str
    epsilon: float
    delta: float
    time: datetime  # UTC, whole seconds
    label: str | None = None  # human name of the input, e.g. its file name
    release: str | None = None  # free form, e.g. the release folder
    version: str | None = None  # dpsynth version that recorded the entry
    #: "certified" (a proven guarantee) or "nominal" (a target the exact audit found
    #: exceeded: its epsilon bounds nothing); None for entries recorded before the field
    guarantee: str | None = None
    #: SHA-256 hex of the released table's public identity; None: the same as ``dataset``
    #: (a release without a name, or a line recorded before the field existed)
    table: str | None = None
    #: other ids of the same table: its ids before identities were canonical (one per
    #: order of its key columns), whose releases it adopts (:mod:`dpsynth.release.inputs`)
    aliases: tuple[str, ...] = ()
    #: the release's private folder, whose provenance.json records this entry
    private: str | None = None
    #: the steward declared that the dataset counts other people than the datasets its
    #: table overlaps (``--new-dataset``, :mod:`dpsynth.ledger_index`)
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
    """A dataset's budget stored in the ledger (``dpsynth ledger --set-budget``, or the
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


class Ledger:
    """A JSON Lines ledger at ``path`` (created, with its parents, on the first spend).

    ``private_area``: the folder of the releases' private folders by default (the
    steward's ``private/``), whose records the ledger is checked against; ``heads``: the
    folder of the head records (the steward's ``ledger-heads/``); ``index``: the folder of
    the steward's index (``index/``, :mod:`dpsynth.ledger_index`), which binds every
    dataset and table to one ledger file and keeps a copy of every entry."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        private_area: str | os.PathLike[str] | None = None,
        heads: str | os.PathLike[str] | None = None,
        index: str | os.PathLike[str] | None = None,
    ) -> None:
        self.path = Path(path)
        self.private_area = Path(private_area or steward_home() / "private")
        self.heads = Path(heads or steward_home() / "ledger-heads")
        self.index = Index(index or steward_home() / "index")

    def __repr__(self) -> str:
        return f"Ledger({str(self.path)!r})"

    def entries(self, dataset: str | None = None) -> list[Entry]:
        """All entries in file order, or those counted against one budget key: a dataset
        name, or a table id (full SHA-256 hex). A name's entries are its own and those
        recorded under its tables' ids before it was given; a table bound to a name has
        the name's entries (those its next release is checked against)."""
        found = self._book().entries
        if dataset is None:
            return found
        key = _check_key(dataset)
        owners = _owners(found, self.path)
        key = owners.get(key, key)
        return [e for e in found if _account(e, owners) == key]

    def budgets(self) -> dict[str, float]:
        """The stored budget of every dataset that has one (the last one stored)."""
        return self._book().budgets

    def stored_budget(self, dataset: str) -> StoredBudget | None:
        """The budget stored for ``dataset`` (the last one), or None."""
        found = [r for r in self._read_book().stored if r.dataset == dataset]
        return found[-1] if found else None

    def spent(self, dataset: str) -> tuple[float, float, int]:
        """(total epsilon, total delta, number of releases) of a budget key (a dataset name
        or a table id, as :meth:`entries`): basic composition."""
        return _totals(self.entries(dataset))

    def spend(
        self,
        dataset: str,
        epsilon: float,
        delta: float,
        *,
        table: str | None = None,
        aliases: tuple[str, ...] = (),
        budget: float | None = None,
        label: str | None = None,
        release: str | None = None,
        private: str | None = None,
        time: datetime | None = None,
        guarantee: str | None = None,
        keys=None,
        new_dataset: bool = False,
    ) -> Entry:
        """Record a release at (epsilon, delta) and return its entry.

        ``dataset`` is the budget key: a dataset name (:func:`check_name`), with ``table``
        the id of the table released (and ``aliases``, its other ids, whose releases it
        adopts), or the table id itself (``table`` None or the same). A table already
        released under a name is bound to it: a release of it without the name, or under
        another, is refused (``LedgerError``, nothing recorded).

        The budget checked is the dataset's stored budget (:meth:`set_budget`); ``budget``
        stores one when none is (the first ``--budget`` of a dataset is its budget), is a
        cap of this release when smaller than the stored one, and is refused when larger.
        Refused (``LedgerError``, nothing recorded) if the epsilon already spent on the
        budget key (for a name: on every table released under it, including ``table``'s
        releases before it had the name) plus ``epsilon`` would exceed it. Check and
        append happen under one exclusive lock, so concurrent calls can neither lose
        entries nor jointly overspend. ``time`` (timezone-aware) defaults to now; it is
        stored in UTC. ``guarantee`` is ``"certified"`` or ``"nominal"``: a nominal
        release's epsilon bounds nothing, so no budget can be checked once one is recorded
        under the budget key (or when this release is nominal): a budget then refuses.
        ``private``: the release's private folder, which records the entry.

        The steward's index (:mod:`dpsynth.ledger_index`) is checked too, under its lock
        taken before the ledger's: a dataset name known in another ledger file, or spelt
        otherwise (letter case, spaces), is refused; so is a table known in another ledger
        file, or one whose strata (``keys``, a data frame of the key columns, one row a
        stratum) overlap those of a table released under another dataset, unless
        ``new_dataset`` declares that it counts other people (recorded in the entry). The
        index records the name, the table's fingerprint and a copy of the entry before the
        ledger line is written.

        The ledger is checked first (:meth:`check`): a ledger deleted, cut or edited is
        refused, never reset.
        """
        entry = _new_entry(dataset, epsilon, delta, table, label, release, time, guarantee)
        entry = replace(
            entry,
            aliases=tuple(_check_table(a) for a in aliases if a != entry.table),
            private=private,
            new_dataset=bool(new_dataset),
            id=secrets.token_hex(16),
        )
        budget = _check_budget_value(budget)
        prints = self.index.fingerprint_of(keys, create=True)
        with self.index.locked() as ix:
            state = self.index.read(ix.read())
            self._index_check(state, entry, prints, "name")  # before the ledger is created
            with self._locked_for_append() as f:
                return self._spend_locked(ix, f, state, entry, budget, prints, private)

    def _spend_locked(self, ix, f, state, entry, budget, prints, private) -> Entry:
        """:meth:`spend` under the index's lock and the ledger's."""
        data = f.read()
        book = self._checked_book(data, state)
        records = self._sync(state, book)
        self._index_check(state, entry, prints, "name")
        owners = _owners(book.entries, self.path)
        key = entry.dataset if entry.named else owners.get(entry.table, entry.dataset)
        store, limit = _budget_to_check(book.budgets.get(key), budget, key)
        _checked_account(book.entries, entry, limit, self.path)
        self._index_check(state, entry, prints, "table")
        records += self._new_records(state, entry, prints)
        chain = hashlib.sha256(data)
        lines = []
        mine = self._key()
        if store is not None:
            record = StoredBudget(key, store, entry.time, secrets.token_hex(16))
            record = replace(record, prev=chain.hexdigest())
            lines.append((record.to_json() + "\n").encode("utf-8"))
            chain.update(lines[-1])
            records.append({"kind": "budget", "ledger": mine, "record": _plain(record)})
        entry = replace(entry, prev=chain.hexdigest())
        lines.append((entry.to_json() + "\n").encode("utf-8"))
        records.append({"kind": "spend", "ledger": mine, "entry": entry.record()})
        # the index first: a copy without its line is restored by --rebuild (spent)
        self.index.append(ix, records)
        f.write(b"".join(lines))
        f.flush()
        os.fsync(f.fileno())
        self._write_head(data + b"".join(lines), private)
        return entry

    def set_budget(self, dataset: str, budget: float, *, time: datetime | None = None) -> str:
        """Store ``budget`` as the epsilon budget of the dataset name ``dataset``: every
        later release under the name is checked against it. A stored budget can be
        lowered, never raised (``LedgerError``); returns what was done, in one line."""
        name = check_name(dataset)
        budget = _check_budget_value(budget)
        if budget is None:
            raise ValueError("budget must be a finite number > 0, got None")
        when = (time or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
        with self.index.locked() as ix, self._locked_for_append() as f:
            state = self.index.read(ix.read())
            data = f.read()
            book = self._checked_book(data, state)
            records = self._sync(state, book)
            refusal = self.index.refusal(state, self._key(), name, True, "", None, False, "name")
            if refusal is not None:
                raise LedgerError(refusal)
            if normal_name(name) not in state.datasets:
                records.append(_dataset_record(name, self._key(), when))
            stored = book.budgets.get(name)
            if stored is not None and budget > stored * (1 + BUDGET_RTOL):
                raise LedgerError(
                    f"dataset {name} has the stored budget epsilon = {_num(stored)} in "
                    f"{self.path}; a stored budget can be lowered, never raised (that would "
                    "undo the steward's limit). Nothing was recorded."
                )
            record = StoredBudget(name, budget, when, secrets.token_hex(16))
            record = replace(record, prev=hashlib.sha256(data).hexdigest())
            line = (record.to_json() + "\n").encode("utf-8")
            records.append({"kind": "budget", "ledger": self._key(), "record": _plain(record)})
            self.index.append(ix, records)
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
            self._write_head(data + line, None)
        owners = _owners(book.entries, self.path)
        spent = _totals([e for e in book.entries if _account(e, owners) == name])
        return (
            f"dataset {name}: budget epsilon = {_num(budget)} stored in {self.path} "
            f"(spent so far: epsilon = {_num(spent[0])} in {spent[2]} release(s))"
        )

    def preview(
        self,
        dataset: str,
        epsilon: float,
        delta: float,
        *,
        table: str | None = None,
        aliases: tuple[str, ...] = (),
        budget: float | None = None,
        guarantee: str | None = None,
        keys=None,
        new_dataset: bool = False,
    ) -> dict:
        """What :meth:`spend` with these arguments would find, recording nothing: the
        budget key's spending so far (``spent``: epsilon, delta, releases), the totals
        after this release (``after``), the budget checked (``budget``: the stored one,
        or this call's), and ``refusal``, the message :meth:`spend` would refuse with
        (the steward's index, binding or budget), or None. A ledger that :meth:`check`
        refuses raises. Nothing is written, not even the index's secret."""
        entry = _new_entry(dataset, epsilon, delta, table, None, None, None, guarantee)
        entry = replace(
            entry, aliases=tuple(_check_table(a) for a in aliases), new_dataset=new_dataset
        )
        budget = _check_budget_value(budget)
        state = self.index.read()
        book = self._read_book(state)
        self._sync(state, book)
        prints = self.index.fingerprint_of(keys, create=False)
        found = book.entries
        owners = _owners(found, self.path)
        previous = _previous(found, owners, entry)
        key = entry.dataset if entry.named else owners.get(entry.table, entry.dataset)
        refusal = limit = None
        try:
            self._index_check(state, entry, prints, "name")
            _check_binding(owners, entry, found)
            _, limit = _budget_to_check(book.budgets.get(key), budget, key)
            if limit is not None:
                _check_budget(previous, entry, limit)
            self._index_check(state, entry, prints, "table")
        except LedgerError as err:
            refusal = str(err)
        spent_eps, spent_delta, n = _totals(previous)
        return {
            "dataset": entry.dataset,
            "table": entry.table,
            "spent": {"epsilon": spent_eps, "delta": spent_delta, "releases": n},
            "after": {
                "epsilon": math.fsum([spent_eps, entry.epsilon]),
                "delta": math.fsum([spent_delta, entry.delta]),
            },
            "budget": limit if limit is not None else budget,
            "stored_budget": book.budgets.get(key),
            "nominal": any(e.guarantee == "nominal" for e in [*previous, entry]),
            "refusal": refusal,
        }

    def check(self) -> None:
        """Refuse (``LedgerError``, one line) a ledger that lost or changed what it
        recorded: a line that breaks the hash chain (lines removed or edited before it),
        a ledger shorter than, or different from, its head record (deleted, cut), or a
        release recorded in a private folder and missing from the ledger."""
        self._read_book()

    def rebuild(self) -> str:
        """Restore the ledger from what survives: its own lines (read without the chain
        and head checks) and the entries recorded in the releases' private folders (the
        private area, and every folder the head record lists), written again in time
        order with a new hash chain; the previous file, if any, is kept beside it
        (``<name>.before-rebuild-<time>``). Returns what was done, in one line. Spending
        recorded nowhere else (a release refused after spending leaves no private folder)
        cannot be restored: the message says to check it by hand."""
        with self.index.locked() as ix, self._locked_for_append(check=False) as f:
            state = self.index.read(ix.read())
            data = f.read()
            book = _parse_lines(data, self.path, chained=False)
            have = {r.id for r in [*book.entries, *book.stored] if r.id is not None}
            restored: list = []
            for record in self._private_records():
                for item in record:
                    if item.id is not None and item.id not in have:
                        have.add(item.id)
                        restored.append(item)
            from_index = 0
            mine = self._key()
            copies = [
                *((_parse_entry, c) for c in state.spent.get(mine, [])),
                *((_parse_budget, c) for c in state.budgets.get(mine, [])),
            ]
            for parse, copy in copies:
                item = parse(json.dumps(copy).encode("utf-8"))
                if item.id is not None and item.id not in have:
                    have.add(item.id)
                    if isinstance(item, Entry) and not _folder_kept(item):
                        item = replace(item, lost=True)
                    restored.append(item)
                    from_index += 1
            # a line whose private folder is gone stays: spent, record lost
            lost = 0
            for i, e in enumerate(book.order):
                if isinstance(e, Entry) and e.private and not e.lost and not _folder_kept(e):
                    book.order[i] = replace(e, lost=True)
                    lost += 1
            book.entries = [e for e in book.order if isinstance(e, Entry)]
            kept = [*book.stored, *book.entries]
            order = {id(r): i for i, r in enumerate(book.order)}
            everything = sorted(
                [*kept, *restored], key=lambda r: (r.time, order.get(id(r), len(order)))
            )
            chain = hashlib.sha256()
            lines = []
            for record in everything:
                record = replace(record, prev=chain.hexdigest())
                line = (record.to_json() + "\n").encode("utf-8")
                chain.update(line)
                lines.append(line)
            new = b"".join(lines)
            if data:
                stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
                backup = self.path.with_name(f"{self.path.name}.before-rebuild-{stamp}")
                backup.write_bytes(data)
                os.chmod(backup, 0o600)
            tmp = self.path.with_name(f".{self.path.name}.rebuild")
            tmp.write_bytes(new)
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
            _fsync_dir(self.path.parent)
            self._write_head(new, None)
        n_entries = sum(isinstance(r, Entry) for r in restored)
        return (
            f"rebuilt {self.path}: {len(book.entries)} release(s) kept from the ledger "
            f"({lost} whose private folder is gone: spent, record lost), "
            f"{n_entries} restored from private folders and the steward's index "
            f"({from_index} from the index alone), {len(restored) - n_entries} stored "
            "budget(s) restored; nothing spent was removed"
            + (f"; the previous file is {backup}" if data else "")
            + ". A release refused after spending left no private folder: check the "
            "backup for any such line."
        )

    # -- internals -------------------------------------------------------------------

    def _book(self) -> _Book:
        return self._read_book()

    def _read_book(self, state: IndexState | None = None) -> _Book:
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return self._checked_book(None, state)
        with f:
            fcntl.flock(f, fcntl.LOCK_SH)  # never see a line half-written by a spend
            return self._checked_book(f.read(), state)

    def _checked_book(self, data: bytes | None, state: IndexState | None = None) -> _Book:
        """The ledger's records, after the chain, head, private-folder and index checks
        (``state``: the steward's index as read under its lock; None: read it now)."""
        book = _parse_lines(data or b"", self.path, chained=True)
        restore = (
            f"Restore the ledger from a backup, or rebuild it from the releases' private "
            f"folders: dpsynth ledger --ledger {self.path} --rebuild"
        )
        head = self._head()
        if head is not None:
            size, digest = head.get("bytes", 0), head.get("sha256")
            if not data and size > 0:
                raise LedgerError(
                    f"the ledger {self.path} is missing, but its head record "
                    f"{self._head_path()} says it held {head.get('lines')} line(s): it was "
                    f"deleted or moved, and its spending would be reset. {restore}"
                )
            if len(data) < size or hashlib.sha256(data[:size]).hexdigest() != digest:
                raise LedgerError(
                    f"the ledger {self.path} is not the one its head record "
                    f"{self._head_path()} describes ({head.get('lines')} line(s), "
                    f"{size} bytes): lines were removed or edited. {restore}"
                )
        ids = {e.id for e in book.entries if e.id is not None}
        missing = [
            (folder, item)
            for folder, items in self._private_records(with_folders=True)
            for item in items
            if isinstance(item, Entry) and item.id not in ids
        ]
        if missing:
            folder, item = missing[0]
            state = "is missing" if data is None else "lacks them"
            raise LedgerError(
                f"{len(missing)} release(s) recorded in private folders (e.g. {folder}, "
                f"dataset {item.dataset}, epsilon {_num(item.epsilon)}) are not in the "
                f"ledger {self.path}, which {state}: it was deleted, cut or replaced. "
                f"{restore}"
            )
        state = self.index.read() if state is None else state
        copies = [c for c in state.spent.get(self._key(), []) if c.get("id") and c["id"] not in ids]
        if copies:
            first = copies[0]
            raise LedgerError(
                f"{len(copies)} release(s) recorded in the steward's index "
                f"{self.index.path} (e.g. dataset {first.get('dataset')}, epsilon "
                f"{first.get('epsilon')}, {first.get('time')}) are not in the ledger "
                f"{self.path}: its lines were deleted or the ledger replaced. {restore}"
            )
        return book

    # -- the steward's index -----------------------------------------------------------

    def _key(self) -> str:
        """This ledger as the index names it: its resolved path."""
        return str(self.path.resolve())

    def _sync(self, state: IndexState, book: _Book) -> list[dict]:
        """Records that bring the index up to this ledger's own (lines recorded before the
        index existed, or by a writer killed between the two): the names and tables it
        holds that the index does not bind yet, and copies of its entries and budgets.
        Applied to ``state``; returned for a writer to append. The first time, the names
        and tables of every other ledger this home has written (its head records) too:
        ledgers recorded before the index existed."""
        return [*self._migrate(state), *_sync_records(state, book, self._key(), copies=True)]

    def _migrate(self, state: IndexState) -> list[dict]:
        if state.migrated:
            return []
        records = []
        for head in sorted(self.heads.glob("*.json")) if self.heads.is_dir() else []:
            try:
                path = Path(json.loads(head.read_text())["ledger"])
                if str(path) == self._key():
                    continue
                book = _parse_lines(path.read_bytes(), path, chained=False)
            except (OSError, ValueError, KeyError, TypeError, LedgerError):
                continue  # gone or unreadable: its own reads refuse it
            records += _sync_records(state, book, str(path), copies=False)
        records.append({"kind": "migrated", "time": _format_time(datetime.now(UTC))})
        state.apply(records[-1])
        return records

    def _index_check(self, state: IndexState, entry: Entry, prints, stage: str) -> None:
        refusal = self.index.refusal(
            state, self._key(), entry.dataset, entry.named, entry.table, prints,
            entry.new_dataset, stage,
        )  # fmt: skip
        if refusal is not None:
            raise LedgerError(refusal)

    def _new_records(self, state: IndexState, entry: Entry, prints) -> list[dict]:
        """What the index records of a release about to be written: its name (if new), its
        table and fingerprint, and the datasets ``--new-dataset`` declared it apart from."""
        mine = self._key()
        records = []
        if entry.named and normal_name(entry.dataset) not in state.datasets:
            records.append(_dataset_record(entry.dataset, mine, entry.time))
        known = state.tables.get(entry.table)
        if known is None or (known.get("file") is None and prints is not None):
            file = None if prints is None else self.index.store_fingerprint(prints)
            n = None if prints is None else len(prints)
            records.append(_table_record(entry.table, entry.dataset, mine, file, n))
        if entry.new_dataset:
            others = {o.dataset for o in self.index.overlaps(
                state, normal_name(entry.dataset), entry.table, prints
            ) if o.share >= OVERLAP_SHARE}  # fmt: skip
            if known is not None and normal_name(known["dataset"]) != normal_name(entry.dataset):
                others.add(known["dataset"])
            for other in sorted(others):
                records.append({"kind": "distinct", "a": entry.dataset, "b": other,
                                "time": _format_time(entry.time)})  # fmt: skip
        return records

    def _private_folders(self) -> list[Path]:
        folders = []
        if self.private_area.is_dir():
            folders += sorted(p for p in self.private_area.iterdir() if p.is_dir())
        head = self._head() or {}
        folders += [Path(p) for p in head.get("private", [])]
        return list(dict.fromkeys(folders))

    def _private_records(self, with_folders: bool = False):
        """Per private folder recorded for this ledger, its entry and stored budget."""
        mine = str(self.path.resolve())
        out = []
        for folder in self._private_folders():
            try:
                provenance = json.loads((folder / "provenance.json").read_text())
                ledger = provenance["ledger"]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # not a private folder, or one recorded before the field existed
            if not isinstance(ledger, dict) or ledger.get("path") != mine:
                continue
            items = []
            try:
                raw = json.dumps(ledger["entry"]).encode("utf-8")
                items.append(_parse_entry(raw))
                if ledger.get("budget") is not None:
                    items.append(_parse_budget(json.dumps(ledger["budget"]).encode("utf-8")))
            except (KeyError, TypeError, ValueError):
                continue
            out.append((folder, items) if with_folders else items)
        return out

    def _head_path(self) -> Path:
        key = hashlib.sha256(str(self.path.resolve()).encode("utf-8")).hexdigest()[:32]
        return self.heads / f"{key}.json"

    def _head(self) -> dict | None:
        try:
            head = json.loads(self._head_path().read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            raise LedgerError(
                f"the ledger's head record {self._head_path()} cannot be read ({err}); "
                "expected the JSON object dpsynth writes: repair or restore it"
            ) from None
        if not isinstance(head, dict) or head.get("ledger") != str(self.path.resolve()):
            return None
        return head

    def _write_head(self, data: bytes, private: str | None) -> None:
        """Record the ledger's length and hash (and the private folder) beside the
        private area, atomically: a ledger deleted or cut is then found."""
        head = self._head() or {}
        folders = list(head.get("private", []))
        if private is not None and str(private) not in folders:
            folders.append(str(private))
        record = {
            "note": "PRIVATE: dpsynth's record of the ledger's length and hash; keep it",
            "ledger": str(self.path.resolve()),
            "lines": data.count(b"\n"),
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "private": folders,
        }
        path = self._head_path()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        tmp.write_text(json.dumps(record, indent=1))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)

    def _locked_for_append(self, check: bool = True):
        """The ledger opened for read + append, exclusively locked, positioned at 0. A
        missing ledger is checked (:meth:`check`) before it is created: a deleted one is
        refused, not recreated empty."""
        if check and not self.path.exists():
            self._checked_book(None)
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


def _sync_records(state: IndexState, book: _Book, mine: str, copies: bool) -> list[dict]:
    """The index records that bind the names and tables of the ledger ``mine`` (``book``)
    the index does not know yet, and (``copies``) copy its entries and budgets."""
    records: list[dict] = []

    def add(record: dict) -> None:
        state.apply(record)
        records.append(record)

    copied = {c.get("id") for c in state.spent.get(mine, [])}
    for e in book.entries:
        if e.named and normal_name(e.dataset) not in state.datasets:
            add(_dataset_record(e.dataset, mine, e.time))
        if e.table not in state.tables:
            add(_table_record(e.table, e.dataset, mine, None, None))
        if copies and e.id is not None and e.id not in copied:
            add({"kind": "spend", "ledger": mine, "entry": e.record()})
    stored = {c.get("id") for c in state.budgets.get(mine, [])}
    for b in book.stored:
        if normal_name(b.dataset) not in state.datasets and not _SHA256.fullmatch(b.dataset):
            add(_dataset_record(b.dataset, mine, b.time))
        if copies and b.id is not None and b.id not in stored:
            add({"kind": "budget", "ledger": mine, "record": _plain(b)})
    return records


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
                f"from the releases' private folders: dpsynth ledger --ledger {path} --rebuild"
            )
        if chained and record.prev is None and seen_chain:
            raise LedgerError(
                f"{path}, line {number}: a line without the hash chain after lines with it "
                "(inserted by hand?); the ledger refuses to guess what was spent. Restore "
                f"it from a backup, or: dpsynth ledger --ledger {path} --rebuild"
            )
        seen_chain = seen_chain or record.prev is not None
        running.update(raw + b"\n")
        book.order.append(record)
        (book.stored if isinstance(record, StoredBudget) else book.entries).append(record)
    return book


def _budget_to_check(
    stored: float | None, asked: float | None, key: str
) -> tuple[float | None, float | None]:
    """(the budget to store with this release, or None; the budget to check it against)."""
    if stored is None:
        return asked, asked
    if asked is not None and asked > stored * (1 + BUDGET_RTOL):
        raise LedgerError(
            f"--budget {_num(asked)} exceeds the budget epsilon = {_num(stored)} stored for "
            f"dataset {key}; a stored budget is the dataset's (dpsynth ledger shows it), and "
            "a --budget may only cap one release below it. Nothing was recorded."
        )
    return None, stored if asked is None else min(stored, asked)


def format_summary(ledger: Ledger, dataset: str | None = None) -> str:
    """A plain-text table of what each budget key has spent (basic composition): every
    dataset name with its total, then its tables (indented, their short ids and labels),
    and every table released without a name.

    With ``dataset`` (a dataset name, or a table id or a prefix of one such as the 12
    digits shown in the table), only that budget key (a table bound to a name shows the
    name's), followed by its releases one per line.
    """
    found = ledger.entries()
    owners = _owners(found, ledger.path)
    if dataset is not None:
        key = _find_key(found, owners, dataset, ledger.path)
        if key is None:
            shown = dataset.strip()
            shown = shown.lower()[:12] if _HEX.fullmatch(shown) else shown
            return f"No releases of dataset {shown} recorded in {ledger.path}."
        found = [e for e in found if _account(e, owners) == key]
    if not found:
        return f"No releases recorded in {ledger.path}."

    accounts: dict[str, list[Entry]] = {}
    for entry in found:
        accounts.setdefault(_account(entry, owners), []).append(entry)
    rows = []
    for key, group in accounts.items():
        if key in owners.values():  # a name: its total, then each of its tables
            tables: dict[str, list[Entry]] = {}
            for entry in group:
                tables.setdefault(entry.table, []).append(entry)
            n = len(tables)
            rows.append(_summary_row(f"({n} table{'' if n == 1 else 's'})", key, group))
            for table_entries in tables.values():
                rows.append(
                    _summary_row(
                        "  " + _label(table_entries), "  " + table_entries[0].short, table_entries
                    )
                )
        else:
            rows.append(_summary_row(_label(group), group[0].short, group))
    header = ["label", "dataset", "releases", "epsilon", "delta", "first", "last"]
    lines = [f"Privacy budget spent (basic composition), ledger {ledger.path}", ""]
    lines += _table(header, rows, right={2, 3, 4})
    if any(key in owners.values() for key in accounts):
        lines += ["", "dataset: a name given with --dataset (its total adds up its tables, "
                  "indented below it),", "or the id of a table released without one"]  # fmt: skip
    budgets = ledger.budgets()
    shown = [k for k in accounts if k in budgets]
    if shown:
        lines += ["", "Stored budgets (every release under the name is checked against it):"]
        for key in shown:
            eps = _totals(accounts[key])[0]
            lines.append(f"  {key}: epsilon {_num(budgets[key])} (spent {_num(eps)})")
    if any(e.guarantee == "nominal" for e in found):
        note = ("nominal: a release whose epsilon is a target the exact audit found exceeded "
                "(--allow-nominal); a total that includes one bounds nothing")  # fmt: skip
        lines += ["", note]
    declared = sorted({_account(e, owners) for e in found if e.new_dataset})
    if declared:
        lines += ["", "Declared new people (--new-dataset: their tables overlap another "
                  "dataset's strata): " + ", ".join(declared)]  # fmt: skip
    lost = sum(e.lost for e in found)
    if lost:
        note = (f"{lost} release(s) spent, record lost: restored by --rebuild from the "
                "steward's index, or kept without their private folders; they count")  # fmt: skip
        lines += ["", note]
    if dataset is not None:
        named = key in owners.values()
        lines += ["", "Releases:"]
        release_rows = [
            [
                _format_time(e.time),
                _num(e.epsilon),
                _num(e.delta),
                e.guarantee or "-",
                *([e.short] if named else []),
                e.label or "-",
                ("spent, record lost: " if e.lost else "") + (e.release or "-"),
                e.version or "-",
            ]
            for e in found
        ]
        header = ["time", "epsilon", "delta", "guarantee", *(["table"] if named else []),
                  "label", "release", "dpsynth"]  # fmt: skip
        lines += _table(header, release_rows, right={1, 2})
    return "\n".join(lines)


def _find_key(found: list[Entry], owners: dict[str, str], text: str, path: Path) -> str | None:
    """The budget key ``dpsynth ledger --dataset TEXT`` means: a recorded name, or the
    account of the one table whose id starts with TEXT (hex digits); None if none."""
    if not isinstance(text, str):
        raise ValueError(f"dataset must be a name or hex digits of a table id, got {text!r}")
    text = text.strip()
    if _HEX.fullmatch(text) and len(text) <= 64:  # names are never hex digits only
        prefix = text.lower()
        ids = sorted({e.table for e in found if e.table.startswith(prefix)})
        if len(ids) > 1:
            raise LedgerError(
                f"table id prefix {text!r} is ambiguous in {path}: "
                + ", ".join(i[:12] for i in ids)
            )
        return owners.get(ids[0], ids[0]) if ids else None
    try:
        check_name(text)
    except ValueError:
        raise ValueError(
            f"dataset must be a dataset name ({NAME_RULE}) or hex digits of a table id "
            f"(SHA-256), got {text!r}"
        ) from None
    return text if text in owners.values() else None


def _summary_row(label: str, key: str, group: list[Entry]) -> list[str]:
    eps, dlt, n = _totals(group)
    nominal = sum(e.guarantee == "nominal" for e in group)
    return [
        label,
        key,
        f"{n} ({nominal} nominal)" if nominal else str(n),
        _num(eps),
        _num(dlt),
        _format_time(min(e.time for e in group)),
        _format_time(max(e.time for e in group)),
    ]


# -- helpers -----------------------------------------------------------------------------


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


def _owners(entries: list[Entry], path: Path) -> dict[str, str]:
    """The name each table is bound to (tables ever released under a name)."""
    owners: dict[str, str] = {}
    for e in entries:
        if e.named:
            for alias in e.aliases:  # the table's earlier ids: their releases are its own
                owners.setdefault(alias, e.dataset)
        if e.named and owners.setdefault(e.table, e.dataset) != e.dataset:
            raise LedgerError(
                f"{path}: table {e.short} is recorded under two dataset names, "
                f"{owners[e.table]!r} and {e.dataset!r} (a hand edit?); the ledger cannot "
                "tell whose budget it spends. Repair it by hand: one name per table."
            )
    return owners


def _account(entry: Entry, owners: dict[str, str]) -> str:
    """The budget key an entry counts against: its table's name, else its table id."""
    return owners.get(entry.table, entry.dataset)


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


def _checked_account(
    found: list[Entry], entry: Entry, budget: float | None, path: Path
) -> list[Entry]:
    """The entries ``entry`` is checked against (its name's account, and its table's
    releases before the table had the name), after the binding and budget checks
    (``LedgerError``)."""
    owners = _owners(found, path)
    _check_binding(owners, entry, found)
    previous = _previous(found, owners, entry)
    if budget is not None:
        _check_budget(previous, entry, budget)
    return previous


def _previous(found: list[Entry], owners: dict[str, str], entry: Entry) -> list[Entry]:
    """The recorded entries a release ``entry`` adds up with: its account (its table's
    name, else its own key) and its table's releases from before the table had a name."""
    keys = {_account(entry, owners), entry.table, *entry.aliases}
    return [e for e in found if _account(e, owners) in keys]


def _check_budget_value(budget: object) -> float | None:
    if budget is None:
        return None
    budget = _check_number("budget", budget)
    if not budget > 0:
        raise ValueError(f"budget must be a finite number > 0, got {budget!r}")
    return budget


def _check_binding(owners: dict[str, str], entry: Entry, found: list[Entry]) -> None:
    bound = [owners[t] for t in (entry.table, *entry.aliases) if t in owners]
    owner = next((o for o in bound if o != entry.dataset), None)
    if owner is None:
        return
    label = entry.label or _label([e for e in found if e.table == entry.table])
    asked = (
        f"this release names dataset {entry.dataset}"
        if entry.named
        else "this release names no dataset"
    )
    raise LedgerError(
        f"table {label} ({entry.short}) was released under --dataset {owner}, but {asked}.\n"
        f"Its releases count against the budget of {owner}: release it with --dataset {owner}.\n"
        "A table belongs to one dataset: without the name, or under a second one, its\n"
        "releases would not be added up with the other releases about the same people.\n"
        "Other events over the same strata and populations (births beside deaths) need a\n"
        "ledger of their own (--ledger FILE) and --new-dataset: a table is known by its keys.\n"
        "Nothing was recorded."
    )


def _check_number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _check_budget(previous: list[Entry], entry: Entry, budget: float) -> None:
    nominal = [e for e in [*previous, entry] if e.guarantee == "nominal"]
    who = _who(previous, entry)
    if nominal:
        which = (
            "this release is"
            if entry in nominal
            else (
                f"{len(nominal)} earlier release{'' if len(nominal) == 1 else 's'} of it "
                f"{'is' if len(nominal) == 1 else 'are'}"
            )
        )
        raise LedgerError(
            f"no privacy budget can be checked for dataset {who}: {which} "
            "nominal (--allow-nominal), whose epsilon is a target the exact audit found "
            "exceeded, not a bound. Release with a certified method, or without --budget. "
            "Nothing was recorded."
        )
    spent_eps, spent_delta, n = _totals(previous)
    total = math.fsum([*(e.epsilon for e in previous), entry.epsilon])
    if total <= budget * (1 + BUDGET_RTOL):
        return
    remaining = max(0.0, budget - spent_eps)
    raise LedgerError(
        f"privacy budget exceeded for dataset {who}: {n} release"
        f"{'' if n == 1 else 's'} already spent epsilon = {_num(spent_eps)} "
        f"(delta = {_num(spent_delta)}) of the budget epsilon = {_num(budget)}; this release "
        f"asks for epsilon = {_num(entry.epsilon)}, which would make {_num(total)} "
        f"(remaining: {_num(remaining)}). Nothing was recorded."
    )


def _who(previous: list[Entry], entry: Entry) -> str:
    """A budget key as the refusals name it: a name with its tables, or a table's label."""
    if not entry.named:
        return f"{entry.label or _label(previous)} ({entry.short})"
    tables = list(dict.fromkeys([*(e.table for e in previous), entry.table]))
    return f"{entry.dataset} (table{'s' if len(tables) > 1 else ''} " + (
        ", ".join(t[:12] for t in tables) + ")"
    )


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


def _table_record(table: str, dataset: str, ledger: str, file, strata) -> dict:
    return {"kind": "table", "table": table, "dataset": dataset, "ledger": ledger,
            "file": file, "strata": strata}  # fmt: skip


def _plain(record: StoredBudget) -> dict:
    return json.loads(record.to_json())


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


def _folder_kept(entry: Entry) -> bool:
    """Whether the private folder that records ``entry`` is still there."""
    return entry.private is not None and Path(entry.private).is_dir()


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
