"""The ledger file: :class:`Ledger` reads, checks and appends its lines, under a lock.

One budget per dataset per steward: the steward's index (:mod:`dpcounts.ledger.index`, in
:func:`steward_home`) binds every dataset name (compared without regard to case and spaces)
and every released table to one ledger file, refuses a table whose strata overlap another
dataset's unless the steward declares new people (``new_dataset``), and keeps a copy of
every entry, so that :meth:`Ledger.rebuild` only adds.

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
import os
import secrets
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from dpcounts.ledger.budget import (
    BUDGET_RTOL,
    Assessment,
    Charge,
    _account,
    _budget_to_check,
    _check_binding,
    _check_budget,
    _check_budget_value,
    _owners,
    _previous,
    _totals,
)
from dpcounts.ledger.index import OVERLAP_SHARE, PAIR_SHARE, Index, normal_name
from dpcounts.ledger.index import State as IndexState
from dpcounts.ledger.records import (
    _SHA256,
    Entry,
    LedgerError,
    StoredBudget,
    _Book,
    _check_key,
    _check_table,
    _dataset_record,
    _format_time,
    _new_entry,
    _num,
    _parse_budget,
    _parse_entry,
    _parse_lines,
    _plain,
    _table_record,
    check_name,
)


def steward_home() -> Path:
    """The steward's own dpcounts folder, ``$XDG_DATA_HOME/dpcounts``: where the ledger and
    the releases' private folders go by default. Never publish it.

    ``XDG_DATA_HOME`` defaults to ``~/.local/share`` when unset or empty.
    """
    data_home = os.environ.get("XDG_DATA_HOME") or "~/.local/share"
    return Path(data_home).expanduser() / "dpcounts"


def default_ledger_path() -> Path:
    """``$DPCOUNTS_LEDGER`` if set, else ``ledger.jsonl`` in :func:`steward_home`."""
    explicit = os.environ.get("DPCOUNTS_LEDGER")
    if explicit:
        return Path(explicit).expanduser()
    return steward_home() / "ledger.jsonl"


class Ledger:
    """A JSON Lines ledger at ``path`` (created, with its parents, on the first spend).

    ``private_area``: the folder of the releases' private folders by default (the
    steward's ``private/``), whose records the ledger is checked against; ``heads``: the
    folder of the head records (the steward's ``ledger-heads/``); ``index``: the folder of
    the steward's index (``index/``, :mod:`dpcounts.ledger.index`), which binds every
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
        charge: Charge,
        *,
        label: str | None = None,
        release: str | None = None,
        private: str | None = None,
        time: datetime | None = None,
    ) -> Entry:
        """Record the release that asks for ``charge`` and return its entry: :meth:`assess`
        under the locks, then the append; refused (``LedgerError``, nothing recorded) with the
        assessment's refusal.

        The check and the append happen under one exclusive lock, so concurrent calls can
        neither lose entries nor jointly overspend; the steward's index is locked first.
        ``time`` (timezone-aware) defaults to now; it is stored in UTC. ``label``: the input's
        name; ``release`` and ``private``: the release's folders (the private one records the
        entry). The index records the name, the table's fingerprints and a copy of the entry
        before the ledger line is written. The ledger is checked first (:meth:`check`): a
        ledger deleted, cut or edited is refused, never reset.
        """
        entry = _new_entry(
            charge.dataset, charge.epsilon, charge.delta, charge.table, label, release, time,
            charge.guarantee,
        )  # fmt: skip
        entry = replace(
            entry,
            aliases=tuple(_check_table(a) for a in charge.aliases if a != entry.table),
            private=private,
            new_dataset=bool(charge.new_dataset),
            id=secrets.token_hex(16),
        )
        budget = _check_budget_value(charge.budget)
        prints = (
            self.index.fingerprint_of(charge.keys, create=True),
            self.index.pairs_of(charge.counts, charge.populations, create=True),
        )
        with self.index.locked() as ix:
            state = self.index.read(ix.read())
            self._index_check(state, entry, None, "name")  # before the ledger is created
            with self._locked_for_append() as f:
                return self._spend_locked(ix, f, state, entry, budget, prints, private)

    def _spend_locked(self, ix, f, state, entry, budget, prints, private) -> Entry:
        """:meth:`spend` under the index's lock and the ledger's; ``prints``: the table's
        (key fingerprint, pair fingerprint)."""
        data = f.read()
        book = self._checked_book(data, state)
        records = self._sync(state, book)
        verdict = self._assess(state, book, entry, budget, prints)
        if verdict.refusal is not None:
            raise LedgerError(verdict.refusal)
        key, store = verdict.dataset_key, verdict.store
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

    def assess(self, charge: Charge) -> Assessment:
        """What :meth:`spend` of ``charge`` would find, recording nothing (``dpcounts
        calibrate``): the budget key's spending so far, the totals after this release, the
        budget checked and the refusal :meth:`spend` would make, or None
        (:class:`~dpcounts.ledger.budget.Assessment`). A ledger that :meth:`check` refuses
        raises. Nothing is written, not even the index's secret."""
        entry = _new_entry(
            charge.dataset, charge.epsilon, charge.delta, charge.table, None, None, None,
            charge.guarantee,
        )  # fmt: skip
        entry = replace(
            entry,
            aliases=tuple(_check_table(a) for a in charge.aliases),
            new_dataset=charge.new_dataset,
        )
        budget = _check_budget_value(charge.budget)
        state = self.index.read()
        book = self._read_book(state)
        self._sync(state, book)
        prints = (
            self.index.fingerprint_of(charge.keys, create=False),
            self.index.pairs_of(charge.counts, charge.populations, create=False),
        )
        return self._assess(state, book, entry, budget, prints)

    def _assess(self, state: IndexState, book: _Book, entry: Entry, budget, prints) -> Assessment:
        """The one assessment of a release ``entry`` against the book and the index as read
        (``prints``: the table's key and pair fingerprints): :meth:`assess` returns it,
        :meth:`spend` makes it under the locks and refuses with its refusal. Reads only."""
        found = book.entries
        owners = _owners(found, self.path)
        previous = _previous(found, owners, entry)
        key = entry.dataset if entry.named else owners.get(entry.table, entry.dataset)
        refusal = store = limit = None
        try:
            self._index_check(state, entry, None, "name")
            _check_binding(owners, entry, found)
            store, limit = _budget_to_check(book.budgets.get(key), budget, key)
            if limit is not None:
                _check_budget(previous, entry, limit)
            self._index_check(state, entry, prints, "table")
        except LedgerError as err:
            refusal = str(err)
        return Assessment(
            dataset=entry.dataset,
            table=entry.table,
            dataset_key=key,
            spent=_totals(previous),
            epsilon=entry.epsilon,
            delta=entry.delta,
            budget=limit if limit is not None else budget,
            stored_budget=book.budgets.get(key),
            store=store,
            nominal=any(e.guarantee == "nominal" for e in [*previous, entry]),
            refusal=refusal,
        )

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
            f"folders: dpcounts ledger --ledger {self.path} --rebuild"
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
        """Refuse what the index refuses; ``prints``: (key fingerprint, pair fingerprint),
        or None at the stage "name"."""
        keys, pairs = prints or (None, None)
        refusal = self.index.refusal(
            state, self._key(), entry.dataset, entry.named, entry.table, keys,
            entry.new_dataset, stage, pairs,
        )  # fmt: skip
        if refusal is not None:
            raise LedgerError(refusal)

    def _new_records(self, state: IndexState, entry: Entry, prints) -> list[dict]:
        """What the index records of a release about to be written: its name (if new), its
        table and fingerprints (``prints``: keys, pairs), and the datasets
        ``--new-dataset`` declared it apart from."""
        prints, pairs = prints
        mine = self._key()
        records = []
        if entry.named and normal_name(entry.dataset) not in state.datasets:
            records.append(_dataset_record(entry.dataset, mine, entry.time))
        known = state.tables.get(entry.table)
        adds_keys = prints is not None and (known is None or known.get("file") is None)
        adds_pairs = pairs is not None and (known is None or known.get("pairs") is None)
        if known is None or adds_keys or adds_pairs:
            file, n = (known or {}).get("file"), (known or {}).get("strata")
            if adds_keys:
                file, n = self.index.store_fingerprint(prints), len(prints)
            pair_file, events = (known or {}).get("pairs"), (known or {}).get("events")
            if adds_pairs:
                pair_file, events = self.index.store_fingerprint(pairs), len(pairs)
            records.append(
                _table_record(entry.table, entry.dataset, mine, file, n, pair_file, events)
            )
        if entry.new_dataset:
            mine_name = normal_name(entry.dataset)
            others = {o.dataset for o in self.index.overlaps(
                state, mine_name, entry.table, prints
            ) if o.share >= OVERLAP_SHARE}  # fmt: skip
            others |= {o.dataset for o in self.index.matches(
                state, mine_name, entry.table, pairs
            ) if o.share >= PAIR_SHARE}  # fmt: skip
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
                "expected the JSON object dpcounts writes: repair or restore it"
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
            "note": "PRIVATE: dpcounts's record of the ledger's length and hash; keep it",
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
