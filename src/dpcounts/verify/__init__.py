"""Check a published release against its manifest, from the public folder alone.

``dpcounts verify RELEASE_DIR`` is the reviewer's side of ``dpcounts synthesize``: given
only the public folder (never the data, the root key or the private folder) it checks
that the folder is what its manifest lists and recomputes what the published numbers
give of the epsilon the manifest states. It reads files and recomputes; it never draws.
Its checks go by topic (:data:`TOPICS`), a module each: :mod:`.files` (the manifest, the
listed files, the signature), :mod:`.synthetic`, :mod:`.hyperparameters`, :mod:`.promise`
and :mod:`.metadata`, run in that order by :func:`verify_release` (:mod:`.release`); each
check is an entry of :data:`CHECKS`, the one list (:mod:`.checks`). It reads within bounds
decided before a table is read (:mod:`.readers`) and puts the checks into words, every
field it prints from the folder escaped and cut to length (:mod:`.words`).

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

:func:`verify_release` returns the :class:`Check` records; :func:`format_checks` and
:func:`summary` put them into words; :func:`failed` says whether any failed. A folder
that is not a dpcounts release at all, or whose manifest is not a JSON object it can read
(not a regular file, too large, invalid or too deeply nested JSON), raises
:class:`NotARelease`, one line.
"""

from __future__ import annotations

from dpcounts.verify.checks import (
    CHECKS,
    FAIL,
    NOMINAL,
    OK,
    TOPICS,
    WARNING,
    Check,
    CheckSpec,
    UnregisteredCheck,
    describe_checks,
    failed,
    registered,
)
from dpcounts.verify.promise import recomputed_epsilon
from dpcounts.verify.readers import return_freed_memory
from dpcounts.verify.release import NotARelease, load_manifest, report, verify_release
from dpcounts.verify.words import accounting, as_json, format_checks, signature_state, summary

__all__ = [
    "CHECKS",
    "FAIL",
    "NOMINAL",
    "OK",
    "TOPICS",
    "WARNING",
    "Check",
    "CheckSpec",
    "NotARelease",
    "UnregisteredCheck",
    "accounting",
    "as_json",
    "describe_checks",
    "failed",
    "format_checks",
    "load_manifest",
    "recomputed_epsilon",
    "registered",
    "report",
    "return_freed_memory",
    "signature_state",
    "summary",
    "verify_release",
]
