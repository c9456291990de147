"""A test's handle on a running release: hold it at a named step.

A test that interrupts a release (SIGTERM while it works) must know the release is at
that step, not guess from timing: a release that finishes before the signal, or a signal
that arrives before the step, makes such a test pass or fail by chance. With
``DPCOUNTS_TEST_HOLD=STEP:PATH`` in its environment, a release that reaches ``STEP`` creates
the file ``PATH`` and then waits, doing nothing, until a signal ends it. Without the
variable (every real release) :func:`hold` returns at once. The steps are those of
:data:`STEPS`.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

#: The environment variable, ``STEP:PATH``.
VARIABLE = "DPCOUNTS_TEST_HOLD"
#: The steps a release can be held at: ``spent`` (the ledger records the spending; nothing
#: is drawn or written yet).
STEPS = ("spent",)


def hold(step: str) -> None:
    """Wait at ``step`` for a signal when the environment asks for it (module docstring)."""
    assert step in STEPS, step
    wanted, _, path = os.environ.get(VARIABLE, "").partition(":")
    if wanted != step or not path:
        return
    Path(path).touch()
    while True:  # a signal's handler raises (SIGTERM, SIGINT): that is the only way out
        time.sleep(3600)
