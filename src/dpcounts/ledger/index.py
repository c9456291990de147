"""The steward's index: one budget per dataset per steward, whatever ledger file a release
names (issue #34), and one table whatever its keys are called (issue #50).

A ledger file holds the budgets of the datasets recorded in it; nothing stopped the same
dataset, or the same table under another name, from opening a fresh budget in a second
ledger file (``--ledger other.jsonl``, ``$DPCOUNTS_LEDGER``). The steward's home
(:func:`dpcounts.ledger.steward_home`) therefore keeps one index, ``index/``, that every
ledger consults under its lock before it records a release:

* **datasets**: every dataset name, compared without regard to letter case and spaces, with
  the one ledger file that holds its budget. A release (or ``--set-budget``) of a known
  name in another ledger file is refused, naming the ledger to use; a name spelt otherwise
  than it was first recorded is refused, naming the recorded spelling.
* **tables**: every released table's id with its dataset and ledger, and two fingerprints
  of its strata (below): by their keys, and by their denominators and counts. A table
  known in another ledger, overlapping a table of another dataset by its keys, or
  matching one by its denominators and counts, is refused before anything is spent,
  naming the dataset it overlaps or matches and the share of strata, unless the steward
  declares new people (``new_dataset``, recorded in the ledger entry and in the index as a
  pair of datasets that count different people).
* **spending**: a copy of every ledger entry and stored budget, with its ledger's path. A
  ledger that lacks an entry its index records is refused on every read, and
  :meth:`dpcounts.ledger.Ledger.rebuild` restores it ("spent, record lost" when its private
  folder is gone too): rebuilding only adds.

Another home (another ``$XDG_DATA_HOME``) has another index: it is another steward, whose
budgets the index cannot see (docs/privacy.md, Part 4).

The key fingerprint of a table is the set of its strata, each stratum hashed from its keys
alone, normalised: a value is its text with numbers written canonically (``1001``,
``1001.0``, ``"01001"`` are one value: leading zeros are dropped), letters case-folded and
spaces removed; a stratum is the sorted multiset of its values' hashes, so that the key
columns' names and order do not matter. Counts and populations are left out: a zero-count
row added or dropped, or a population revised, is the same stratum. A table overlaps
another when they share at least :data:`OVERLAP_SHARE` of the smaller one's strata.

The key fingerprint cannot see a re-encoding of the keys (a constant key column added,
``F``/``M`` written ``female``/``male`` or ``2``/``1``, state and county joined into one
FIPS code, a code prefixed): every stratum's keys change, its people do not. The pair
fingerprint is what such a re-encoding cannot change: the multiset of the table's
(denominator, count) pairs, one per stratum with at least one event, the denominator
being the population (or the expected count, ``denominator="expected"``) and each number
taken as its 64-bit float (``1001``, ``1001.0`` and ``"1001"`` are one number; ``-0`` is
``0``). Two tables *match* when the pairs they share, counted with multiplicity (a pair
twice in each table is two shared strata), are at least :data:`PAIR_SHARE` of the smaller
one's pairs: most of its strata with events. Strata without events are left out because
they are where other people look alike: in the Pennsylvania lung-cancer table
(``data/pennlc_strata.parquet``, 1,072 strata, 571 with cases), a second table over the
same populations whose counts are drawn afresh at the table's own rates by race, sex and
age (another year or cause of the same size, the worst case: a cause at other rates
shares fewer) shares on average 47% of its pairs (at most 49% in 50 draws) when zero
counts are kept, against 13% (at most 16%) without them; the table's counts shuffled
among its strata share 6% (``tests/test_ledger_pairs.py`` measures these). For counts
drawn independently at the same Poisson mean the expected share is at most 28% whatever
the mean (largest near a mean of 0.87), so a half leaves a margin of about 20 points for
a table of more than a few dozen strata with events; a table with only a few (where
chance matches weigh more) may be refused wrongly, which ``--new-dataset`` answers and
which never under-counts. The same people recounted with a fifth of their counts moved
by one still share about 80% (with half of them moved, about a half: a table revised that
much is no longer recognised by its pairs).

Its limits: a table aggregated from a released one (a key summed away: deaths by county
after deaths by county x sex) has other pairs and other keys, and is not recognised (the
name is the steward's to give, docs/privacy.md Part 4); nor is a re-encoded table whose
denominators were also revised (each population 1% higher), nor one with no stratum with
events, nor a table recorded before the pair fingerprint existed (it is known by its keys
only).

Each key value is hashed with BLAKE2b keyed by a per-home secret (``index/secret``), and
a stratum's hash mixes its values' hashes; each (denominator, count) pair is hashed whole
with SipHash-2-4, a pseudorandom function made for short messages, under a 128-bit key
that BLAKE2b derives from the same secret (:mod:`dpcounts.ledger.pair_hash`, compiled: a
pair costs a few tens of nanoseconds, where a BLAKE2b call from Python costs about a
microsecond). The index therefore holds no key, count or population in clear, and its
hashes cannot be matched against guessed values without the secret. A fingerprint is
stored as a sorted array of 64-bit hashes (8 bytes a stratum: distinct for the keys, with
repeats for the pairs; ``index/tables/<sha256 of its bytes>.npy``, shared by tables with
the same strata) and compared through a memory map, a chunk of the new table's hashes at a
time, so a comparison holds only the new table's hashes in memory (8 MB per million
strata) and costs a binary search per hash (per distinct hash, for the pairs).

Locks: the index is locked (``fcntl.flock`` on ``index.jsonl``) before the ledger, by
every writer; readers read it without a lock (it is only appended to, whole lines at a
time, and a reader ignores an unfinished last line).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
import secrets
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: The share of strata (of the smaller of the two tables) two tables must share to count
#: as overlapping: a table refused when it shares at least this share with a table of
#: another dataset (0.1: a state's strata in a national table, or the national table
#: after the state's, both count; a few codes shared by chance do not).
OVERLAP_SHARE = 0.1
#: The share of strata with events (of the smaller of the two tables) whose (denominator,
#: count) pairs two tables must share, with multiplicity, to count as the same people
#: whatever their keys: most of them (see the module's docstring for why a half, and why
#: strata without events are left out).
PAIR_SHARE = 0.5

_SPACE = re.compile(r"\s+")
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)")
_PERSON = b"dpcounts-stratum"
#: The personalisation of the pair fingerprint's key (derived from the home's secret).
_PAIR = b"dpcounts-pairs"
#: Hashes compared at once (bounds the memory of a comparison).
_CHUNK = 1 << 20


def normal_name(name: str) -> str:
    """A dataset name as the index compares it: case-folded, without spaces."""
    return _SPACE.sub("", name).casefold()


def normal_value(value: object) -> str:
    """A key value as the fingerprint compares it: numbers written canonically (no leading
    zeros, no trailing ``.0``), letters case-folded, spaces removed."""
    if isinstance(value, bool | np.bool_):
        text = str(bool(value))
    elif isinstance(value, int | np.integer):
        text = str(int(value))
    elif isinstance(value, float | np.floating):
        number = float(value)
        if math.isfinite(number) and number.is_integer():
            text = str(int(number))
        else:
            text = repr(number)
    else:
        text = str(value)
    text = _SPACE.sub("", text).casefold()
    if _DECIMAL.fullmatch(text):
        sign = "-" if text.startswith("-") else ""
        whole, _, fraction = text.lstrip("+-").partition(".")
        whole = whole.lstrip("0") or "0"
        fraction = fraction.rstrip("0")
        if whole == "0" and not fraction:
            sign = ""
        text = sign + whole + (f".{fraction}" if fraction else "")
    return text


def fingerprint(keys, secret: bytes) -> np.ndarray:
    """The sorted distinct 64-bit hashes of the strata of ``keys`` (a data frame of key
    columns, one row a stratum), keyed by ``secret``: see the module's docstring.

    Each column's distinct values are hashed once; one compiled pass
    (:func:`dpcounts.table_kernels.stratum_hashes`) sorts and mixes a row's hashes."""
    from dpcounts.encoding import factorize
    from dpcounts.table_kernels import stratum_hashes

    n = len(keys)
    if not len(keys.columns):
        state = _mix(np.zeros(n, dtype=np.uint64))
    else:
        codes = np.empty((len(keys.columns), n), dtype=np.int64)
        tables, bases, base = [], [], 0
        for j, name in enumerate(keys.columns):
            codes[j], uniques = factorize(keys[name])
            tables.append(
                np.fromiter(
                    (_value_hash(normal_value(v), secret) for v in uniques),
                    dtype=np.uint64,
                    count=len(uniques),
                )
            )
            bases.append(base)
            base += len(uniques)
        hashes = np.concatenate(tables)
        state = stratum_hashes(codes, hashes, np.asarray(bases, dtype=np.int64))
        del codes
    state.sort()
    return state[np.r_[True, state[1:] != state[:-1]]] if n else state


def pair_fingerprint(counts, denominators, secret: bytes) -> np.ndarray:
    """The sorted 64-bit hashes, with repeats, of the (denominator, count) pairs of the
    strata with at least one event (``counts`` > 0), keyed by ``secret``: see the module's
    docstring. ``denominators``: the populations, or the expected counts.

    A pair's hash is SipHash-2-4 (:func:`dpcounts.ledger.pair_hash.siphash_pairs`, compiled)
    of its two 64-bit floats, under a 128-bit key that BLAKE2b derives from ``secret``."""
    from dpcounts.ledger.pair_hash import siphash_pairs

    counts = np.asarray(counts, dtype=float).ravel()
    denominators = np.asarray(denominators, dtype=float).ravel()
    if counts.shape != denominators.shape:
        raise ValueError(
            f"{len(counts)} counts and {len(denominators)} denominators: one each a stratum"
        )
    events = counts > 0
    # + 0.0: -0.0 is 0.0 (the same number, other bits); the words little-endian
    words = [
        np.ascontiguousarray(x[events] + 0.0, dtype="<f8").view("<u8").astype(np.uint64, copy=False)
        for x in (denominators, counts)
    ]
    digest = hashlib.blake2b(b"", digest_size=16, key=secret, person=_PAIR).digest()
    k0, k1 = (np.uint64(int.from_bytes(digest[i : i + 8], "little")) for i in (0, 8))
    state = siphash_pairs(words[0], words[1], k0, k1)
    del words
    state.sort()
    return state


def _value_hash(text: str, secret: bytes) -> int:
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8, key=secret, person=_PERSON)
    return int.from_bytes(digest.digest(), "little")


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, element-wise (uint64 arithmetic wraps)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def shared(new: np.ndarray, stored: np.ndarray) -> int:
    """How many of the sorted distinct hashes ``new`` are in the sorted ``stored`` (a
    memory map, read a chunk of ``new`` at a time)."""
    if len(stored) == 0 or len(new) == 0:
        return 0
    found = 0
    for start in range(0, len(new), _CHUNK):
        part = new[start : start + _CHUNK]
        at = np.searchsorted(stored, part)
        inside = at < len(stored)
        found += int(np.count_nonzero(stored[at[inside]] == part[inside]))
    return found


def shared_pairs(new: np.ndarray, stored: np.ndarray) -> int:
    """How many of the sorted hashes ``new`` (with repeats) are matched one to one in the
    sorted ``stored`` (with repeats; a memory map): the size of the two multisets'
    intersection, a hash shared ``min(times in new, times in stored)`` times. Reads a
    chunk of ``new`` at a time, never splitting a run of equal hashes."""
    if len(stored) == 0 or len(new) == 0:
        return 0
    found, start = 0, 0
    while start < len(new):
        end = min(len(new), start + _CHUNK)
        if end < len(new):
            end = int(np.searchsorted(new, new[end - 1], side="right"))
        part = new[start:end]
        first = np.flatnonzero(np.r_[True, part[1:] != part[:-1]])
        values = part[first]
        runs = np.diff(np.r_[first, len(part)])
        there = np.searchsorted(stored, values, side="right") - np.searchsorted(stored, values)
        found += int(np.minimum(runs, there).sum())
        start = end
    return found


@dataclass
class Overlap:
    """A released table of another dataset that a new table shares strata with: by their
    keys (``pairs`` false), or by their (denominator, count) pairs."""

    dataset: str
    ledger: str
    table: str
    shared: int
    strata: int  # the new table's
    other: int  # the released table's
    pairs: bool = False

    @property
    def share(self) -> float:
        """The shared strata, as a share of the smaller table."""
        return self.shared / max(1, min(self.strata, self.other))

    def describe(self) -> str:
        if self.pairs:
            return (
                f"{self.shared} of its {self.strata} strata with events "
                f"({self.shared / self.strata:.0%}) have the denominator and count of a "
                f"stratum of table {self.table[:12]} ({self.shared / max(1, self.other):.0%} "
                f"of its {self.other}) of dataset {self.dataset}, released in the ledger "
                f"{self.ledger}"
            )
        return (
            f"{self.shared} of its {self.strata} strata ({self.shared / self.strata:.0%}) are "
            f"strata of table {self.table[:12]} ({self.shared / max(1, self.other):.0%} of its "
            f"{self.other}) of dataset {self.dataset}, released in the ledger {self.ledger}"
        )


@dataclass
class State:
    """What the index holds, read from its journal."""

    #: normalised name -> {"name": the recorded spelling, "ledger": path}
    datasets: dict[str, dict] = field(default_factory=dict)
    #: table id -> {"dataset": name or table id, "ledger": path, "file": fingerprint file
    #: name or None, "strata": int or None, "pairs": pair fingerprint file name or None
    #: (absent before issue #50), "events": its number of pairs}
    tables: dict[str, dict] = field(default_factory=dict)
    #: pairs of normalised names declared to count different people
    distinct: set[frozenset] = field(default_factory=set)
    #: ledger path -> the entry records copied from it
    spent: dict[str, list[dict]] = field(default_factory=dict)
    #: ledger path -> the stored-budget records copied from it
    budgets: dict[str, list[dict]] = field(default_factory=dict)
    #: whether the ledgers written before the index existed were read into it
    migrated: bool = False

    def apply(self, record: dict) -> None:
        kind = record.get("kind")
        if kind == "dataset":
            self.datasets.setdefault(
                normal_name(record["name"]), {"name": record["name"], "ledger": record["ledger"]}
            )
        elif kind == "table":
            known = self.tables.get(record["table"])
            if known is None or (known.get("file") is None and record.get("file")):
                if known is not None and known.get("pairs") and not record.get("pairs"):
                    record = {**record, "pairs": known["pairs"], "events": known.get("events")}
                self.tables[record["table"]] = record
            elif known.get("pairs") is None and record.get("pairs"):
                self.tables[record["table"]] = {
                    **known,
                    "pairs": record["pairs"],
                    "events": record.get("events"),
                }
        elif kind == "distinct":
            self.distinct.add(frozenset((normal_name(record["a"]), normal_name(record["b"]))))
        elif kind == "spend":
            self.spent.setdefault(record["ledger"], []).append(record["entry"])
        elif kind == "budget":
            self.budgets.setdefault(record["ledger"], []).append(record["record"])
        elif kind == "migrated":
            self.migrated = True


class Index:
    """The steward's index in ``folder`` (``steward_home() / "index"``)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.path = self.folder / "index.jsonl"

    def __repr__(self) -> str:
        return f"Index({str(self.folder)!r})"

    # -- reading ---------------------------------------------------------------------

    def read(self, data: bytes | None = None) -> State:
        """The index's state (without a lock: whole lines only)."""
        if data is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
        state = State()
        for number, raw in enumerate(data.split(b"\n")[:-1], start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
                state.apply(record)
            except (ValueError, KeyError, TypeError, AttributeError):
                from dpcounts.ledger.records import LedgerError

                raise LedgerError(
                    f"{self.path}, line {number}: the steward's index cannot be read (a hand "
                    "edit?); expected the JSON lines dpcounts writes. Repair it by hand: the "
                    "index refuses to guess which budgets exist."
                ) from None
        return state

    def secret(self, create: bool) -> bytes | None:
        """The per-home key of the fingerprints (created if ``create``), or None."""
        path = self.folder / "secret"
        try:
            return bytes.fromhex(path.read_text().strip())
        except FileNotFoundError:
            if not create:
                return None
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return bytes.fromhex(path.read_text().strip())
        with open(fd, "w") as f:
            f.write(secrets.token_hex(32) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return bytes.fromhex(path.read_text().strip())

    def fingerprint_of(self, keys, create: bool) -> np.ndarray | None:
        """The fingerprint of the strata ``keys`` under this home's secret; None without
        keys, or without a secret when ``create`` is false (then no table is stored)."""
        if keys is None:
            return None
        secret = self.secret(create)
        return None if secret is None else fingerprint(keys, secret)

    def pairs_of(self, counts, denominators, create: bool) -> np.ndarray | None:
        """The pair fingerprint of the strata's ``counts`` and ``denominators`` under this
        home's secret; None without them, or without a secret when ``create`` is false."""
        if counts is None or denominators is None:
            return None
        secret = self.secret(create)
        return None if secret is None else pair_fingerprint(counts, denominators, secret)

    # -- the checks ------------------------------------------------------------------

    def refusal(
        self,
        state: State,
        ledger: str,
        dataset: str,
        named: bool,
        table: str,
        prints: np.ndarray | None,
        new_dataset: bool,
        stage: str,
        pairs: np.ndarray | None = None,
    ) -> str | None:
        """Why the release of ``table`` under ``dataset`` in ``ledger`` must be refused by
        the index, or None. ``stage`` "name": the name's spelling and ledger; "table": the
        table's ledger, overlaps (its key fingerprint ``prints``) and matches (its pair
        fingerprint ``pairs``), after the ledger's own binding check."""
        if stage == "name":
            if not named:
                return None
            known = state.datasets.get(normal_name(dataset))
            if known is None:
                return None
            if known["name"] != dataset:
                return (
                    f"dataset {dataset} is the dataset {known['name']} already recorded in the "
                    f"ledger {known['ledger']}: the steward's index ({self.folder}) compares "
                    f"dataset names without regard to letter case and spaces. Release it as "
                    f"--dataset {known['name']}. Nothing was recorded."
                )
            if known["ledger"] != ledger:
                return _elsewhere(f"dataset {dataset}", known["ledger"], ledger, self.folder)
            return None
        mine = normal_name(dataset)
        known = state.tables.get(table)
        apart = known is not None and (
            normal_name(known["dataset"]) == mine
            or frozenset((mine, normal_name(known["dataset"]))) in state.distinct
        )
        if known is not None and known["ledger"] != ledger and not (new_dataset or apart):
            return (
                f"this table ({table[:12]}) was released under dataset {known['dataset']} in "
                f"the ledger {known['ledger']}, and this release names the ledger {ledger}: "
                f"{_ONE_BUDGET.format(folder=self.folder)} Release it under --dataset "
                f"{known['dataset']} with --ledger {known['ledger']}; if it counts other "
                "people (births beside deaths), declare them with --new-dataset (recorded). "
                "Nothing was recorded."
            )
        if new_dataset:
            return None
        overlaps = [
            o for o in self.overlaps(state, mine, table, prints) if o.share >= OVERLAP_SHARE
        ]
        if not overlaps:
            return self._match_refusal(state, ledger, mine, table, pairs)
        worst = max(overlaps, key=lambda o: (o.share, o.shared))
        more = len({normal_name(o.dataset) for o in overlaps}) - 1
        return (
            f"this table overlaps a table released under another dataset: {worst.describe()}"
            + (f" (and it overlaps {more} other dataset(s))" if more else "")
            + ". Keys are compared as numbers without leading zeros, without regard to "
            "letter case, spaces or the key columns' names, whatever the counts and "
            "populations: tables over the same strata count the same people unless the "
            f"steward knows otherwise. Release it under --dataset {worst.dataset}"
            + (f" (--ledger {worst.ledger})" if worst.ledger != ledger else "")
            + ", or, if it counts other people (births beside deaths), declare it with "
            "--new-dataset (recorded in the ledger). Nothing was recorded."
        )

    def _match_refusal(
        self, state: State, ledger: str, mine: str, table: str, pairs: np.ndarray | None
    ) -> str | None:
        """The refusal of a table whose (denominator, count) pairs match a released table
        of another dataset (:data:`PAIR_SHARE`), or None."""
        matches = [m for m in self.matches(state, mine, table, pairs) if m.share >= PAIR_SHARE]
        if not matches:
            return None
        worst = max(matches, key=lambda o: (o.share, o.shared))
        more = len({normal_name(o.dataset) for o in matches}) - 1
        return (
            "this table has the denominators and counts of a table released under another "
            f"dataset: {worst.describe()}"
            + (f" (and it matches {more} other dataset(s))" if more else "")
            + ". Its strata with events are compared by their (population or expected "
            "count, count) pairs, whatever their keys: a table whose key columns were "
            "renamed, added, joined or re-spelt (female for F, 2 for M, a code prefixed) "
            "counts the same people unless the steward knows otherwise. Release it under "
            f"--dataset {worst.dataset}"
            + (f" (--ledger {worst.ledger})" if worst.ledger != ledger else "")
            + ", or, if it counts other people, declare it with --new-dataset (recorded in "
            "the ledger). Nothing was recorded."
        )

    def overlaps(
        self, state: State, mine: str, table: str, prints: np.ndarray | None
    ) -> list[Overlap]:
        """The released tables of other datasets (not declared distinct from ``mine``, the
        normalised name) that share strata with ``prints``, the key fingerprint."""
        return self._compared(state, mine, prints, "file", shared, pairs=False)

    def matches(
        self, state: State, mine: str, table: str, pairs: np.ndarray | None
    ) -> list[Overlap]:
        """The released tables of other datasets (not declared distinct from ``mine``) that
        share (denominator, count) pairs with ``pairs``, the pair fingerprint."""
        return self._compared(state, mine, pairs, "pairs", shared_pairs, pairs=True)

    def _compared(
        self, state: State, mine: str, prints: np.ndarray | None, kind: str, count_of, pairs
    ) -> list[Overlap]:
        """The released tables of other datasets whose fingerprint ``kind`` ("file" or
        "pairs") shares hashes (``count_of``) with ``prints``: one memory map per file."""
        if prints is None or len(prints) == 0:
            return []
        by_file: dict[str, list[dict]] = {}
        for record in state.tables.values():
            other = normal_name(record["dataset"])
            if record.get(kind) is None or other == mine:
                continue
            if frozenset((mine, other)) in state.distinct:
                continue
            by_file.setdefault(record[kind], []).append(record)
        found = []
        for name, records in by_file.items():
            try:
                stored = np.load(self.folder / "tables" / name, mmap_mode="r")
            except (OSError, ValueError):
                from dpcounts.ledger.records import LedgerError

                raise LedgerError(
                    f"the steward's index lists the fingerprint {self.folder / 'tables' / name}"
                    ", which cannot be read: restore it from a backup (without it the index "
                    "cannot tell which released tables a new one overlaps)"
                ) from None
            count = count_of(prints, stored)
            if count:
                for record in records:
                    found.append(
                        Overlap(
                            record["dataset"],
                            record["ledger"],
                            record["table"],
                            count,
                            len(prints),
                            len(stored),
                            pairs,
                        )
                    )
            del stored
        return found

    # -- writing ---------------------------------------------------------------------

    @contextmanager
    def locked(self):
        """The index journal opened for append, exclusively locked; yields its bytes."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        with open(fd, "a+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            yield f

    def store_fingerprint(self, prints: np.ndarray) -> str:
        """Write ``prints`` (once per distinct set of strata); return its file name."""
        data = np.ascontiguousarray(prints, dtype=np.uint64)
        name = hashlib.sha256(data.tobytes()).hexdigest()[:32] + ".npy"
        folder = self.folder / "tables"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / name
        if not path.exists():
            tmp = folder / f".{name}.{secrets.token_hex(4)}"
            with open(tmp, "wb") as f:
                np.save(f, data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        return name

    @staticmethod
    def append(f, records: list[dict]) -> None:
        if not records:
            return
        lines = b"".join(
            (json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
            for r in records
        )
        f.write(lines)
        f.flush()
        os.fsync(f.fileno())


_ONE_BUDGET = (
    "the steward's index ({folder}) keeps one budget per dataset, in one ledger file, "
    "whatever file a release names."
)


def _elsewhere(what: str, kept: str, asked: str, folder: Path) -> str:
    return (
        f"{what} has its budget in the ledger {kept}, and this release names the ledger "
        f"{asked}: {_ONE_BUDGET.format(folder=folder)} Record it there: --ledger {kept} (or "
        "$DPCOUNTS_LEDGER, or neither if it is the default). Nothing was recorded."
    )
