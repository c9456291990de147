"""Splitting a simulation study into jobs: the epsilon grid and the chunk labels.

A job is one cell of the design (scenario x mechanism x epsilon chunk x dataset chunk);
chunk labels ``e{i}_d{j}`` name the i-th chunk of the epsilon grid and the j-th chunk of
the datasets, so that the job count stays in the hundreds whatever L is.
"""

from __future__ import annotations

import numpy as np


def epsilon_grid(start: float, stop: float, num: int, extra=()) -> list[float]:
    """Log-spaced epsilons from ``start`` to ``stop`` plus ``extra`` (e.g. the map epsilons).

    Rounded to 6 significant digits so that the values are stable in file names and joins.
    """
    grid = np.geomspace(start, stop, num) if num > 1 else np.array([start])
    values = {float(f"{v:.6g}") for v in np.concatenate([grid, np.asarray(extra, float)])}
    return sorted(values)


def chunk_labels(n_epsilons: int, epsilons_per_job: int, n_datasets: int, per_job: int):
    """Labels ``e{i}_d{j}`` of the jobs that cover the epsilon grid and the datasets."""
    n_e = -(-n_epsilons // epsilons_per_job)
    n_d = -(-n_datasets // per_job)
    return [f"e{i}_d{j}" for i in range(n_e) for j in range(n_d)]


def chunk_members(label: str, epsilons, epsilons_per_job: int, n_datasets: int, per_job: int):
    """The epsilons and dataset ids of the job ``label`` (inverse of :func:`chunk_labels`)."""
    e_part, d_part = label.split("_")
    i, j = int(e_part[1:]), int(d_part[1:])
    eps = list(epsilons)[i * epsilons_per_job : (i + 1) * epsilons_per_job]
    ids = np.arange(j * per_job, min((j + 1) * per_job, n_datasets))
    if not eps or ids.size == 0:
        raise ValueError(f"chunk {label!r} is outside the design")
    return eps, ids


def epsilon_chunks(n_epsilons: int, epsilons_per_job: int) -> list[str]:
    """Labels ``e{i}`` of the jobs that cover the epsilon grid (calibration jobs)."""
    return [f"e{i}" for i in range(-(-n_epsilons // epsilons_per_job))]


def epsilon_chunk(label: str, epsilons, epsilons_per_job: int) -> list[float]:
    """The epsilons of calibration job ``label`` (inverse of :func:`epsilon_chunks`)."""
    i = int(label[1:])
    eps = list(epsilons)[i * epsilons_per_job : (i + 1) * epsilons_per_job]
    if not label.startswith("e") or not eps:
        raise ValueError(f"epsilon chunk {label!r} is outside the design")
    return eps
