"""Timing of calibrations, posterior rate draws and exact releases at county scale.

Run from the repository root::

    .venv/bin/python benchmarks/mechanisms.py            # I = 3,085 and I = 47,034
    .venv/bin/python benchmarks/mechanisms.py --quick    # I = 3,085 only, fewer repeats

Inputs are synthetic but shaped like the studies' (fixed seed): lognormal populations,
prior rates scattered around the national rate, counts drawn from them with the total
fixed. Every release time is set beside the *floor* measured in the same run: drawing I
gamma variates plus one multinomial of y. with NumPy, the cost of the (inexact for pg and
truncated) lambda-route. Times are the best of a few repeats, per vector or per epsilon.
Prints markdown tables.
"""

from __future__ import annotations

import argparse
import multiprocessing
import platform
import time

import numpy as np

from dpcounts.calibration import Calibration
from dpcounts.sampling.study_mode import StudySampler
from dpcounts.sampling.synthesize import posterior_rates, synthesize

INSTANCES = [(3_085, 11_364), (47_034, 26_116)]
METHODS = {
    "md": ["paper"],
    "pg": ["paper", "certified", "exact"],
    "truncated": ["paper", "certified", "exact"],
}
SAMPLING_EPSILON = 1.0
#: Calibrations run in a child process that is stopped after this many seconds.
CALIBRATION_TIMEOUT = 120.0


def make_inputs(n_cells: int, total: int, seed: int = 20240611):
    """Populations, prior rates and counts y (sum = total) for one synthetic country."""
    rng = np.random.default_rng([seed, n_cells, total])
    population = np.round(np.exp(rng.normal(9.3, 1.3, n_cells))) + 50.0
    national = total / population.sum()
    prior_rate = national * np.exp(rng.normal(0.0, 0.3, n_cells))
    true_rate = prior_rate * np.exp(rng.normal(0.0, 0.2, n_cells))
    expected = population * true_rate
    y = rng.multinomial(total, expected / expected.sum())
    return population, prior_rate, y


def best_time(func, repeats: int) -> float:
    """Smallest wall time of ``repeats`` calls (least disturbed by other load)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def floor_per_vector(y, total, n_vectors, repeats, rng) -> float:
    shape = y + 1.0

    def run():
        for _ in range(n_vectors):
            rates = rng.gamma(shape)
            rng.multinomial(total, rates / rates.sum())

    return best_time(run, repeats) / n_vectors


def _timed_calibrations(queue, mechanism, method, epsilons, total, population, prior_rate, repeats):
    """Child process: seconds per epsilon for one mechanism/method, or the error."""
    try:
        from dpcounts import calibrate

        per_eps = [
            best_time(
                lambda eps=eps: calibrate(
                    mechanism, eps, total, population, prior_rate, method=method
                ),
                repeats,
            )
            for eps in epsilons
        ]
        queue.put(("ok", float(np.mean(per_eps))))
    except Exception as err:  # reported as a skipped row, never hidden
        queue.put(("error", f"{type(err).__name__}: {str(err).splitlines()[0][:80]}"))


def calibration_rows(n_cells, total, population, prior_rate, epsilons, repeats, timeout):
    """One row per mechanism/method: seconds per epsilon, or why it was skipped."""
    from dpcounts import calibrate

    rows, calibrations = [], {}
    context = multiprocessing.get_context("fork")
    for mechanism, methods in METHODS.items():
        for method in methods:
            queue = context.Queue()
            child = context.Process(
                target=_timed_calibrations,
                args=(queue, mechanism, method, epsilons, total, population, prior_rate, repeats),
            )
            child.start()
            child.join(timeout)
            if child.is_alive():
                child.terminate()
                child.join()
                result = ("error", f"did not finish within {timeout:g} s")
            else:
                result = queue.get() if not queue.empty() else ("error", "child failed")
            if result[0] == "ok":
                shown = f"{1e3 * result[1]:.3g}"
                if method != "exact":  # the samplers below use paper/certified calibrations
                    calibrations.setdefault(mechanism, {})[method] = calibrate(
                        mechanism, SAMPLING_EPSILON, total, population, prior_rate, method=method
                    )
            else:
                shown = f"skipped: {result[1]}"
            rows.append(
                f"| {n_cells:,} | {total:,} | {mechanism} | {method} | {shown} | {len(epsilons)} |"
            )
    return rows, calibrations


def pick_calibration(calibrations, mechanism, total, population, prior_rate):
    """A calibration timed above (certified first); else the library's certified one."""
    for method in ("certified", "paper", "exact"):
        if method in calibrations.get(mechanism, {}):
            return calibrations[mechanism][method], method
    from dpcounts import calibrate

    cal = calibrate(mechanism, SAMPLING_EPSILON, total, population, prior_rate, method="certified")
    return cal, "certified"


def sampling_rows(n_cells, total, population, prior_rate, y, calibrations, n_vectors, repeats):
    rng = np.random.default_rng([7, n_cells])
    floor = floor_per_vector(y, total, n_vectors, repeats, rng)
    rows = [
        f"| {n_cells:,} | {total:,} | floor | gamma x I + one multinomial | "
        f"{1e3 * floor:.2f} | {1 / floor:,.0f} | 1.0 |"
    ]

    def row(mechanism, what, seconds, ratio=True):
        shown = f"{seconds / floor:.2f}" if ratio else ""
        rate = f"{1 / seconds:,.1f}" if seconds > 0 else ""
        return (
            f"| {n_cells:,} | {total:,} | {mechanism} | {what} | {1e3 * seconds:.2f} | "
            f"{rate} | {shown} |"
        )

    for mechanism in ("md", "pg", "truncated"):
        cal, method = pick_calibration(calibrations, mechanism, total, population, prior_rate)
        label = f"{mechanism} ({method}, eps={SAMPLING_EPSILON:g})"
        if cal.population is None:  # md calibrations need populations for rates only
            cal = Calibration(
                cal.mechanism, cal.method, cal.epsilon, cal.total, cal.a, population=population
            )
        seconds = best_time(lambda c=cal: posterior_rates(y, c, n_vectors, rng), repeats)
        rows.append(row(label, "posterior_rates, per draw", seconds / n_vectors))
        if mechanism == "md":
            seconds = best_time(lambda c=cal: synthesize(y, c, n_vectors, rng), repeats)
            rows.append(
                row(label, "synthesize (Dirichlet-multinomial), per vector", seconds / n_vectors)
            )
        samplers = []
        build = best_time(lambda c=cal, out=samplers: out.append(StudySampler(y, c)), repeats)
        sampler = samplers[-1]
        rows.append(row(label, "tree build (once per dataset)", build, ratio=False))
        seconds = best_time(lambda s=sampler: s.draw(n_vectors, rng), repeats)
        rows.append(row(label, "tree draw, per vector", seconds / n_vectors))
        rows.append(
            f"| {n_cells:,} | {total:,} | {label} | tree TV-error bound "
            f"(1e-16 tails) | {sampler.tv_bound:.1e} | | |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="I = 3,085 only, fewer repeats")
    parser.add_argument(
        "--calibration-timeout",
        type=float,
        default=CALIBRATION_TIMEOUT,
        help="seconds allowed per mechanism/method calibration (all eps)",
    )
    args = parser.parse_args()
    instances = INSTANCES[:1] if args.quick else INSTANCES
    epsilons = [1.0] if args.quick else [0.5, 1.0, 2.0, 4.0]
    repeats = 2 if args.quick else 3
    n_vectors = 20 if args.quick else 50

    print(f"# dpcounts mechanisms benchmark{' (--quick)' if args.quick else ''}\n")
    print(
        f"Python {platform.python_version()}, NumPy {np.__version__}, "
        f"{platform.machine()}; best of {repeats} repeats.\n"
    )
    calibration_table = [
        "| I | y. | mechanism | method | ms per eps | eps values |",
        "|---:|---:|---|---|---:|---:|",
    ]
    sampling_table = [
        "| I | y. | mechanism | what | ms | per second | x floor |",
        "|---:|---:|---|---|---:|---:|---:|",
    ]
    for n_cells, total in instances:
        population, prior_rate, y = make_inputs(n_cells, total)
        rows, calibrations = calibration_rows(
            n_cells, total, population, prior_rate, epsilons, repeats, args.calibration_timeout
        )
        calibration_table += rows
        sampling_table += sampling_rows(
            n_cells, total, population, prior_rate, y, calibrations, n_vectors, repeats
        )
    print("## Calibration\n")
    print("\n".join(calibration_table))
    print("\n## Posterior rates and releases\n")
    print("\n".join(sampling_table))


if __name__ == "__main__":
    main()
