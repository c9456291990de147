"""The ledger in words: ``dpcounts ledger``'s table of what each budget key has spent
(:func:`format_summary`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dpcounts.ledger.budget import (
    _account,
    _label,
    _owners,
    _totals,
)
from dpcounts.ledger.records import (
    _HEX,
    NAME_RULE,
    Entry,
    LedgerError,
    _format_time,
    _num,
    check_name,
)

if TYPE_CHECKING:
    from dpcounts.ledger.storage import Ledger


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
                  "label", "release", "dpcounts"]  # fmt: skip
        lines += _table(header, release_rows, right={1, 2})
    return "\n".join(lines)


def _find_key(found: list[Entry], owners: dict[str, str], text: str, path: Path) -> str | None:
    """The budget key ``dpcounts ledger --dataset TEXT`` means: a recorded name, or the
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


def _table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def fmt(row: list[str]) -> str:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        return "  ".join(cells).rstrip()

    return [fmt(header), fmt(["-" * w for w in widths]), *(fmt(r) for r in rows)]
