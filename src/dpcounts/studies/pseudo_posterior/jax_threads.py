"""JAX computing on one thread, as a job that holds one core (``threads: 1``) expects.

XLA:CPU runs a compiled program's operations on a pool of threads (named
``tf_XLAEigen``), one per CPU the process may run on when JAX creates its CPU client; the
flags ``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`` do not shrink
it. On a job that holds one core, the other threads only hand NUTS's small operations
back and forth: the job spends CPU seconds on them and gains no wall time
(``benchmarks/pseudo_posterior.py`` times the fit stage with this pool). The pool's size
also changes the compiled program's numbers, so with one thread the draws are the same
on every machine (tests/test_jax_threads.py).

JAX sizes the pool from the process's CPU affinity mask (jax-ml/jax#1539), so
:func:`use_one_thread` narrows the mask to one CPU while the client is created, then gives
every thread of the process its whole mask back: the pool keeps one thread, and no
thread stays pinned to that CPU. Where the mask cannot be set (macOS, Windows) it
changes nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

_TASKS = Path("/proc/self/task")


def use_one_thread() -> None:
    """Create JAX's CPU client with a compute pool of one thread.

    Call it before any JAX computation in the process: once the client exists, its pool
    is sized and this changes nothing. Every thread's CPU affinity is the same after the
    call as before it.
    """
    if not hasattr(os, "sched_setaffinity") or not _TASKS.is_dir():
        return
    import jax

    allowed = os.sched_getaffinity(0)
    if len(allowed) > 1:
        os.sched_setaffinity(0, {min(allowed)})
    try:
        jax.devices("cpu")
    finally:
        for task in _TASKS.iterdir():  # threads started meanwhile inherited the one CPU
            try:
                os.sched_setaffinity(int(task.name), allowed)
            except ProcessLookupError:  # a thread that has ended since
                pass
