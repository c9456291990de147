"""Build a release: synthetic counts, their public hyperparameters and a manifest.

This is the library side of ``dpcounts synthesize`` (``dpcounts.cli`` only parses options).
The guarantee is about the whole release, under the neighbouring relation of
:data:`~dpcounts.release.request.NEIGHBOURS`, proved in ``docs/privacy.md``.

Layout. ``--out release/`` gives two folders, apart::

    release/                 PUBLIC: publish it whole
        manifest.json        what the release is and promises (docs/manifest.md)
        synthetic.parquet    the sets, long: set, keys..., count, population (sorted by key)
        hyperparameters.parquet  keys..., a, b, population, prior_rate, lower, upper
        prior.parquet        with --sanitised-prior-by: the groups' noisy totals and rates
    ~/.local/share/dpcounts/private/release-<16 hex digits>/
                             PRIVATE: never publish. By default in the steward's folder
                             ($XDG_DATA_HOME/dpcounts, beside the ledger), named after --out
                             and the start of the manifest's seed_commitment; or wherever
                             --private-dir says, never inside the release nor around it
        provenance.json      the root key, the commitment's salt, the input's path and SHA-256
        summary.md, map_*.png  synthetic vs original totals (and a county map)
        utility.md, .csv, .png  what the sets kept, against synthesis with no privacy

The public folder never names the private one (``tests/test_release.py`` checks), and its
files and itself carry one fixed time (1980-01-01) and fixed modes, never the time of the
run (:func:`.folder.fix_public_metadata`). Its list of strata comes from where the steward
said (``--strata``, no default; :mod:`.strata_list`).

A release is planned, then released: :mod:`.plan` (``plan_release(request) -> Plan``,
every refusal the public inputs decide, the calibration and the plan's privacy map, before
anything is spent; ``calibrate`` prints it, :mod:`.preview`) and :mod:`.sequence`
(``release(plan)``: the ledger charged once, then draw -> write -> report). Each module has
one idea: :mod:`.request` (options, budget split), :mod:`.study_source` (a study's entry as
the options), :mod:`.inputs` (reading, checking, sorting), :mod:`.prior_source` and
:mod:`.prior_check` (a public prior's shape and fit), :mod:`.design` (calibration,
sampler, certified or nominal), :mod:`.limits` (the forecast cost), :mod:`.randomness`
(ChaCha20 from the operating system), :mod:`.publication` (the files), :mod:`.folder`
(atomic, locked installation), :mod:`.manifest` (the public manifest and its schema),
:mod:`.report` (the steward's private report: the summary, what the sets kept, the
study's promise). The steward's
ledger is :mod:`dpcounts.ledger`. This package module holds no working code: it names
the public entry points and imports each on first use.
"""

from __future__ import annotations

import importlib

#: Each public name and the module that holds it, imported on first use (PEP 562), so
#: that ``dpcounts verify`` (``dpcounts.verify``) does not pay for the sampler and SciPy.
_WHERE = {
    "NEIGHBOURS": "request",
    "Budget": "request",
    "Design": "design",
    "ReleaseError": "request",
    "ReleaseRequest": "request",
    "Strata": "inputs",
    "Plan": "plan",
    "build_release": "sequence",
    "plan_release": "plan",
    "release": "sequence",
    "load_strata": "inputs",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
