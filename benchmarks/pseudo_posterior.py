"""Wall seconds of the pseudo-posterior fit stage, exact draws against NUTS.

For each data set of ``config/config.yaml`` (simulated as the workflow simulates it), fits
the six synthesizers in order as the fit job does (``run_synthesizer``, same seeds), once
with the default method (exact conjugate draws for Poisson, NUTS for the negative
binomial) and, for a conjugate model, once more with NUTS on the same model. Every variant
runs in a fresh process with the job's one-thread XLA flags and JAX pool, so it pays what
a job pays: imports, and for NUTS one compilation of the sampler (no persistent compilation cache
unless ``--jax-cache DIR`` is given; run twice with the same DIR to see a warm cache).

    .venv/bin/python benchmarks/pseudo_posterior.py [--datasets poisson ...] [--jax-cache DIR]

Prints, per data set and method, the fit stage's wall seconds (first fit to last), the
process's wall seconds and the number of fits, then the ratio NUTS / exact.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def fit_stage(dataset: str, method: str) -> dict:
    """Fit one data set's six synthesizers (in this process); seconds and number of fits."""
    import yaml

    from dpcounts.seeding import job_rng
    from dpcounts.studies.pseudo_posterior.fitting import fit_method
    from dpcounts.studies.pseudo_posterior.simulate import simulate_counts
    from dpcounts.studies.pseudo_posterior.study import SYNTHESIZERS, StudySettings, run_synthesizer

    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    section = config["pseudo_posterior"]
    spec = section["datasets"][dataset]
    rng = job_rng(config["seed"], "pseudo_posterior", dataset)
    y = simulate_counts(spec["size"], spec["components"], rng)
    settings = replace(StudySettings.from_config(section, dataset), method=method)
    if fit_method(settings.family, method) == "nuts":
        from dpcounts.studies.pseudo_posterior.jax_threads import use_one_thread

        use_one_thread()  # as the fit job does
    rng = job_rng(config["seed"], "pseudo_posterior", dataset, "fit")
    fits, count = {}, 0
    start = time.perf_counter()
    for name in SYNTHESIZERS:
        fits[name] = result = run_synthesizer(name, y, settings, fits, rng)
        count += max(1, len(result.history))
    seconds = time.perf_counter() - start
    return {
        "seconds": seconds,
        "fits": count,
        "sampler": fits["unweighted"].fit.sampler,
        "lw_delta": fits["LW"].bounds.delta,
    }


def run_child(dataset: str, method: str, jax_cache: str | None) -> dict:
    env = dict(os.environ, XLA_FLAGS=XLA_FLAGS)
    if jax_cache:
        env["JAX_COMPILATION_CACHE_DIR"] = str(Path(jax_cache).resolve())
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "--child", dataset, method],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = time.perf_counter() - start
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", help="default: every data set of the config")
    parser.add_argument("--jax-cache", help="persistent JAX compilation cache directory")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(fit_stage(*args.child)))
        return

    import yaml

    datasets = yaml.safe_load((REPO / "config/config.yaml").read_text())["pseudo_posterior"][
        "datasets"
    ]
    for dataset in args.datasets or sorted(datasets):
        model = datasets[dataset]["model"]
        methods = ["auto", "nuts"] if model == "poisson" else ["auto"]
        results = {}
        for method in methods:
            results[method] = r = run_child(dataset, method, args.jax_cache)
            print(
                f"{dataset} ({model}) {r['sampler']:>5}: fit stage {r['seconds']:7.1f} s, "
                f"process {r['process_seconds']:7.1f} s, {r['fits']} fits, "
                f"LW Delta {r['lw_delta']:.4f}",
                flush=True,
            )
        if len(results) == 2:
            ratio = results["nuts"]["seconds"] / results["auto"]["seconds"]
            process = results["nuts"]["process_seconds"] / results["auto"]["process_seconds"]
            print(f"{dataset}: NUTS / exact = {ratio:.0f}x (fit stage), {process:.1f}x (process)")


if __name__ == "__main__":
    main()
