"""dpcounts: differentially private synthetic count data.

Public API::

    from dpcounts import calibrate, audit, synthesize, posterior_rates

The names are imported lazily so that ``import dpcounts`` stays cheap for workflow jobs
that need only one corner of the library.
"""

from __future__ import annotations

import importlib

# the papers' mechanisms and the baselines, in the one registry before any use
from dpcounts.privacy import families as _families  # noqa: F401

__version__ = "0.2.0"

_PUBLIC = {
    "Calibration": "dpcounts.calibration",
    "calibrate": "dpcounts.privacy.calibrate",
    "audit": "dpcounts.privacy.audit",
    "synthesize": "dpcounts.sampling.synthesize",
    "posterior_rates": "dpcounts.sampling.synthesize",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'dpcounts' has no attribute {name!r}")
