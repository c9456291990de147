"""JAX on one compute thread in a job that holds one core (issue #36): the pool XLA:CPU
computes on has one thread, and no thread of the process stays pinned to one CPU."""

import os
import subprocess
import sys
import textwrap

import pytest
from workflow_helpers import REPO

pytest.importorskip("jax")

pytestmark = [
    pytest.mark.process,
    pytest.mark.skipif(
        not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
        reason="needs CPU affinity masks and two or more CPUs to tell one thread from several",
    ),
]

CHILD = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path

    if sys.argv[1] == "one":
        from dpcounts.studies.pseudo_posterior.jax_threads import use_one_thread

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


FIT = textwrap.dedent(
    """
    import hashlib, json, os, sys

    import yaml

    if sys.argv[1] == "one_cpu":
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    from dpcounts.studies.pseudo_posterior.jax_threads import use_one_thread

    use_one_thread()
    from dpcounts.seeding import job_rng
    from dpcounts.studies.pseudo_posterior.simulate import simulate_counts
    from dpcounts.studies.pseudo_posterior.study import StudySettings, fit_synthesizers
    from dpcounts.studies.pseudo_posterior.tables import fit_metadata

    config = yaml.safe_load(open(sys.argv[2]))
    section, seed = config["pseudo_posterior"], config["seed"]
    name = "negbin_mixture"
    spec = section["datasets"][name]
    y = simulate_counts(spec["size"], spec["components"], job_rng(seed, "pseudo_posterior", name))
    settings = StudySettings.from_config(section, name)
    fits = fit_synthesizers(y, settings, job_rng(seed, "pseudo_posterior", name, "fit"))
    print(hashlib.sha256(json.dumps(fit_metadata(fits), sort_keys=True).encode()).hexdigest())
    """
)


def test_nuts_draws_are_the_same_whatever_the_cpus(tmp_path):
    """The study's negative-binomial fits (the default config's data set, its six
    synthesizers as the fit job runs them): with a compute pool of a thread per CPU, the
    weighted fits on 2 CPUs drew other numbers than on 1 (fits.json differed). With one
    compute thread, a process that may use every CPU fits what one on a single CPU fits,
    each compiling afresh (an empty cache of its own)."""
    digests = {}
    for where in ("one_cpu", "every_cpu"):
        env = dict(os.environ, JAX_COMPILATION_CACHE_DIR=str(tmp_path / where))
        done = subprocess.run(
            [sys.executable, "-c", FIT, where, str(REPO / "config" / "config.yaml")],
            capture_output=True,
            text=True,
            env=env,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        digests[where] = done.stdout.split()[-1]
    assert digests["one_cpu"] == digests["every_cpu"]
