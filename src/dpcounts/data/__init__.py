"""Inputs: the 1980 county frame, modelled age groups, Pennsylvania strata, CDC WONDER.

Public names are imported lazily so that ``import dpcounts.data`` stays cheap.
"""

from __future__ import annotations

import importlib

_PUBLIC = {
    "read_wonder": "dpcounts.data.wonder",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'dpcounts.data' has no attribute {name!r}")
