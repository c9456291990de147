"""The data steward's privacy-budget ledger (:mod:`dpsynth.ledger.storage`)."""

from dpsynth.ledger.storage import (
    Entry,
    Ledger,
    LedgerError,
    check_name,
    default_ledger_path,
    format_summary,
    steward_home,
)

__all__ = [
    "Entry",
    "Ledger",
    "LedgerError",
    "check_name",
    "default_ledger_path",
    "format_summary",
    "steward_home",
]
