"""The ledger's budget rules: which entries a release adds up with, and when it is refused.

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from dpcounts.ledger.records import (
    Entry,
    LedgerError,
    _check_number,
    _num,
)

#: Relative tolerance of the budget check (floating-point sums only, not a privacy margin).
BUDGET_RTOL = 1e-12


@dataclass(frozen=True)
class Charge:
    """What one release asks of the ledger: (``epsilon``, ``delta``) under a budget key.

    ``dataset`` is the budget key: a dataset name (:func:`.records.check_name`), with
    ``table`` the id of the table released (and ``aliases``, its other ids, whose releases
    it adopts), or the table id itself (``table`` None or the same). A table already
    released under a name is bound to it: a release of it without the name, or under
    another, is refused.

    ``budget`` stores the dataset's budget when none is stored (the first ``--budget`` of a
    dataset is its budget), caps this release when smaller than the stored one, and is
    refused when larger. ``guarantee`` is ``"certified"`` or ``"nominal"``: a nominal
    release's epsilon bounds nothing, so no budget can be checked once one is recorded
    under the budget key (or when this release is nominal).

    The steward's index (:mod:`dpcounts.ledger.index`) refuses a dataset name known in
    another ledger file or spelt otherwise (letter case, spaces); a table known in another
    ledger file; one whose strata (``keys``, a data frame of the key columns, one row a
    stratum) overlap those of a table released under another dataset; or one whose strata's
    ``populations`` (populations or expected counts) and ``counts``, one each a stratum,
    match those of such a table whatever their keys; unless ``new_dataset`` declares that it
    counts other people (recorded in the entry).
    """

    dataset: str
    epsilon: float
    delta: float
    table: str | None = None
    aliases: tuple[str, ...] = ()
    budget: float | None = None
    guarantee: str | None = None
    keys: object = field(default=None, repr=False, compare=False)
    counts: object = field(default=None, repr=False, compare=False)
    populations: object = field(default=None, repr=False, compare=False)
    new_dataset: bool = False


@dataclass(frozen=True)
class Assessment:
    """What the ledger finds of a :class:`Charge` (``Ledger.assess``; ``Ledger.spend`` makes
    the same under its lock and refuses with ``refusal``)."""

    dataset: str
    table: str
    #: the budget key the release counts against (a name, or a table id)
    dataset_key: str
    #: (epsilon, delta, releases) spent so far under the key
    spent: tuple[float, float, int]
    epsilon: float
    delta: float
    #: the budget checked (the stored one, capped by the charge's), or the charge's
    budget: float | None
    stored_budget: float | None
    #: the budget a spend stores with this release (the first --budget of a dataset), or None
    store: float | None
    #: whether a nominal release is among those added up (then the total bounds nothing)
    nominal: bool
    #: the message a spend refuses with, or None
    refusal: str | None

    @property
    def after(self) -> tuple[float, float]:
        """(epsilon, delta) spent under the key with this release."""
        return math.fsum([self.spent[0], self.epsilon]), math.fsum([self.spent[1], self.delta])

    def as_dict(self) -> dict:
        """The assessment as ``dpcounts calibrate`` prints and writes it."""
        spent_eps, spent_delta, n = self.spent
        after_eps, after_delta = self.after
        return {
            "dataset": self.dataset,
            "table": self.table,
            "spent": {"epsilon": spent_eps, "delta": spent_delta, "releases": n},
            "after": {"epsilon": after_eps, "delta": after_delta},
            "budget": self.budget,
            "stored_budget": self.stored_budget,
            "nominal": self.nominal,
            "refusal": self.refusal,
        }


def _budget_to_check(
    stored: float | None, asked: float | None, key: str
) -> tuple[float | None, float | None]:
    """(the budget to store with this release, or None; the budget to check it against)."""
    if stored is None:
        return asked, asked
    if asked is not None and asked > stored * (1 + BUDGET_RTOL):
        raise LedgerError(
            f"--budget {_num(asked)} exceeds the budget epsilon = {_num(stored)} stored for "
            f"dataset {key}; a stored budget is the dataset's (dpcounts ledger shows it), and "
            "a --budget may only cap one release below it. Nothing was recorded."
        )
    return None, stored if asked is None else min(stored, asked)


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
