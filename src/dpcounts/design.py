"""Splitting a simulation study into jobs: the epsilon grid, its labels and the chunks.

A job is one cell of the design (scenario or study x arm x epsilon chunk x draw chunk);
chunk labels ``e{i}_d{j}`` name the i-th chunk of the epsilon grid and the j-th chunk of
the L draws (Study 1's datasets, a study's synthetic sets), so that the job count stays in
the hundreds whatever L is.

Every epsilon of a grid has 6 significant digits (:func:`epsilon_grid`), so each has an
exact, invertible text label (:func:`epsilon_label`, :func:`epsilon_value`). Tables keep
epsilon as a float column; every lookup of an epsilon in a table (a calibration, a map
epsilon, a plot's selection) compares labels (:func:`at_epsilon`), never floats.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np


class GridError(ValueError):
    """An epsilon grid's config is wrong: ``key`` (``epsilons.num``, ``map_epsilons[1]``)
    and what is expected (``problem``)."""

    def __init__(self, key: str, problem: str):
        super().__init__(f"{key}: {problem}")
        self.key, self.problem = key, problem


def _positive(key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GridError(key, f"got {value!r}; expected a number")
    if not (math.isfinite(value) and value > 0):
        raise GridError(key, f"got {value!r}; expected a finite number > 0")
    return float(value)


def grid_from_config(epsilons, map_epsilons=()) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A study's epsilon grid and map epsilons from its config: ``epsilons`` is ``{start,
    stop, num}`` (log-spaced) or a list, ``map_epsilons`` a list joined to the grid; both
    as the grid holds them (6 significant digits, :func:`grid_value`), the grid sorted.
    The one place a config's epsilons become values (Study 1's and the study stage's);
    raises :class:`GridError` naming the key."""
    maps = tuple(
        grid_value(_positive(f"map_epsilons[{k}]", v)) for k, v in enumerate(map_epsilons or [])
    )
    if isinstance(epsilons, Mapping):
        start = _positive("epsilons.start", epsilons.get("start"))
        stop = _positive("epsilons.stop", epsilons.get("stop"))
        num = epsilons.get("num")
        if isinstance(num, bool) or not isinstance(num, int) or num < 1:
            raise GridError("epsilons.num", f"got {num!r}; expected an integer >= 1")
        if stop < start:
            raise GridError("epsilons.stop", f"got {stop!r} < start = {start!r}")
        return tuple(epsilon_grid(start, stop, num, maps)), maps
    if isinstance(epsilons, list) and epsilons:
        values = [_positive(f"epsilons[{k}]", v) for k, v in enumerate(epsilons)]
        return tuple(epsilon_grid(values[0], values[0], 1, [*values, *maps])), maps
    raise GridError("epsilons", f"got {epsilons!r}; expected {{start, stop, num}} or a list")


def epsilon_grid(start: float, stop: float, num: int, extra=()) -> list[float]:
    """Log-spaced epsilons from ``start`` to ``stop`` plus ``extra`` (e.g. the map epsilons).

    Rounded to 6 significant digits so that the values are stable in file names and joins.
    """
    grid = np.geomspace(start, stop, num) if num > 1 else np.array([start])
    values = {grid_value(v) for v in np.concatenate([grid, np.asarray(extra, float)])}
    return sorted(values)


def grid_value(epsilon: float) -> float:
    """``epsilon`` rounded to the grid's 6 significant digits (what a grid holds)."""
    return float(f"{float(epsilon):.6g}")


def epsilon_label(epsilon: float) -> str:
    """The exact text label of a grid epsilon: its 6 significant digits (``0.01``,
    ``1``, ``14.678``). Inverse of :func:`epsilon_value`; an epsilon that is not a grid
    value (more than 6 significant digits, not finite or not positive) is refused, so two
    epsilons share a label only when they are the same float."""
    value = float(epsilon)
    label = f"{value:.6g}"
    if not (np.isfinite(value) and value > 0) or float(label) != value:
        raise ValueError(
            f"epsilon {epsilon!r} is not a grid value; expected a positive number with at "
            "most 6 significant digits (dpcounts.design.epsilon_grid rounds to these)"
        )
    return label


def epsilon_value(label: str) -> float:
    """The epsilon of a label (inverse of :func:`epsilon_label`)."""
    value = float(label)
    if epsilon_label(value) != label:
        raise ValueError(f"{label!r} is not an epsilon label; expected {epsilon_label(value)!r}")
    return value


def epsilon_labels(values) -> np.ndarray:
    """The label of each value of a column of epsilons (object array); a missing epsilon
    (NaN, e.g. a truth row) has the label ``None`` and matches nothing."""
    return np.array(
        [None if value != value else epsilon_label(value) for value in np.asarray(values, float)],
        dtype=object,
    )


def at_epsilon(values, epsilon) -> np.ndarray:
    """Mask of the entries of ``values`` (a table's epsilon column) whose label is that of
    ``epsilon``, or of any of the epsilons when ``epsilon`` is a list: the one way a
    table is looked up by epsilon."""
    wanted = {epsilon_label(e) for e in np.atleast_1d(np.asarray(epsilon, float))}
    unique, inverse = np.unique(np.asarray(values, float), return_inverse=True)
    hits = np.array([label in wanted for label in epsilon_labels(unique)], dtype=bool)
    return hits[inverse.reshape(-1)] if unique.size else np.zeros(0, dtype=bool)


def chunk_labels(n_epsilons: int, epsilons_per_job: int, n_draws: int, per_job: int):
    """Labels ``e{i}_d{j}`` of the jobs that cover the epsilon grid and the ``n_draws``
    draws (Study 1's datasets, a study's sets)."""
    n_e = -(-n_epsilons // epsilons_per_job)
    n_d = -(-n_draws // per_job)
    return [f"e{i}_d{j}" for i in range(n_e) for j in range(n_d)]


def chunk_members(label: str, epsilons, epsilons_per_job: int, n_draws: int, per_job: int):
    """The epsilons and draw ids (Study 1's datasets, a study's sets) of the job ``label``
    (inverse of :func:`chunk_labels`)."""
    e_part, d_part = label.split("_")
    i, j = int(e_part[1:]), int(d_part[1:])
    eps = list(epsilons)[i * epsilons_per_job : (i + 1) * epsilons_per_job]
    ids = np.arange(j * per_job, min((j + 1) * per_job, n_draws))
    if not eps or ids.size == 0:
        raise ValueError(f"chunk {label!r} is outside the design")
    return eps, ids


def epsilon_chunks(n_epsilons: int, epsilons_per_job: int) -> list[str]:
    """Labels ``e{i}`` of the jobs that cover the epsilon grid (calibration jobs)."""
    return [f"e{i}" for i in range(-(-n_epsilons // epsilons_per_job))]


def calibration_chunk(label: str) -> str:
    """The calibration job ``e{i}`` whose epsilons a draw job ``e{i}_d{j}`` uses."""
    e_part, _, d_part = label.partition("_")
    if not (e_part[:1] == "e" and e_part[1:].isdigit() and d_part[:1] == "d"):
        raise ValueError(f"chunk {label!r} is not a draw chunk; expected e<i>_d<j>")
    return e_part


def epsilon_chunk(label: str, epsilons, epsilons_per_job: int) -> list[float]:
    """The epsilons of calibration job ``label`` (inverse of :func:`epsilon_chunks`)."""
    i = int(label[1:])
    eps = list(epsilons)[i * epsilons_per_job : (i + 1) * epsilons_per_job]
    if not label.startswith("e") or not eps:
        raise ValueError(f"epsilon chunk {label!r} is outside the design")
    return eps
