"""JAX on one compute thread in a job that holds one core (issue #36): the pool XLA:CPU
computes on has one thread, and no thread of the process stays pinned to one CPU."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("jax")

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs CPU affinity masks and two or more CPUs to tell one thread from several",
)

CHILD = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path

    if sys.argv[1] == "one":
        from dpsynth.studies.pseudo_posterior.jax_threads import use_one_thread

        use_one_thread()
    import jax
    import jax.numpy as jnp

    jax.jit(lambda x: jnp.sin(x).sum())(jnp.ones(4096)).block_until_ready()
    tasks = list(Path("/proc/self/task").iterdir())
    print(json.dumps({
        "pool": sum((t / "comm").read_text().strip() == "tf_XLAEigen" for t in tasks),
        "masks": sorted({tuple(sorted(os.sched_getaffinity(int(t.name)))) for t in tasks}),
        "allowed": sorted(os.sched_getaffinity(0)),
    }))
    """
)


def run(mode):
    import json

    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_jax_computes_on_one_thread_and_every_thread_keeps_the_whole_mask():
    default, one = run("default"), run("one")
    # the default pool has a thread per CPU (the count this test tells one thread from)
    assert default["pool"] == len(default["allowed"]) >= 2
    assert one["pool"] == 1
    assert one["masks"] == [one["allowed"]] and one["allowed"] == default["allowed"]
