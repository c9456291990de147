"""The data steward's privacy-budget ledger: what the releases of a dataset have spent.

Sequential releases of the same confidential data compose: with basic composition, k
releases at (epsilon_i, delta_i) are together (sum epsilon_i, sum delta_i)-DP. The ledger
records every release as one JSON line and can refuse a release that would take a dataset
over its epsilon budget::

    ledger = Ledger(default_ledger_path())
    ledger.spend(Charge(table_id, 1.0, 0.0, budget=5.0), label="deaths.csv", release="out/")
    ledger.spend(Charge("us-deaths", 1.0, 0.0, table=table_id, budget=5.0))  # a named dataset
    ledger.assess(Charge("us-deaths", 2.0, 0.0, table=table_id))  # what a spend would find
    print(format_summary(ledger))

The ledger lives outside any release folder (``default_ledger_path``, in the steward's
folder :func:`steward_home`) and must never be published: it holds hashes of the
confidential inputs, which confirm a guessed dataset.

One module per idea, each importing only those above it:

* :mod:`.records`: the line format: a release (:class:`Entry`) or a stored budget
  (``StoredBudget``) a line, parsed and written, every field checked, the hash chain;
* :mod:`.budget`: the budget rules: what a release asks (:class:`Charge`), the key it
  counts against (a dataset name and its tables), the binding of a table to its name, the
  budget check, and what the ledger finds (:class:`Assessment`);
* :mod:`.summary`: ``dpcounts ledger``'s table (:func:`format_summary`);
* :mod:`.storage`: the file itself (:class:`Ledger`): locking, reading, appending and
  syncing, the steward's index, ``--rebuild``.

This module re-exports what the rest of dpcounts and its tests use.
"""

from dpcounts.ledger.budget import Assessment, Charge
from dpcounts.ledger.records import Entry, LedgerError, check_name
from dpcounts.ledger.storage import Ledger, default_ledger_path, steward_home
from dpcounts.ledger.summary import format_summary

__all__ = [
    "Assessment",
    "Charge",
    "Entry",
    "Ledger",
    "LedgerError",
    "check_name",
    "default_ledger_path",
    "format_summary",
    "steward_home",
]
