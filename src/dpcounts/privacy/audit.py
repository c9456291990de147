"""The exact privacy audit: the realised epsilon of a calibration, by full enumeration.

For a calibration and its public total y., the audit lists

* every data vector y with sum y. (each y_i in [0, y.]; the clamping of a truncated
  calibration is applied inside, as the mechanism does),
* every neighbour x of y (one event moved from a cell i to a cell j), and
* every release z in the support (sum y., within ``cal.bounds()``),

and computes ``log q(z | y) - log q(z | x)`` exactly, each pmf normalised over the whole
support with log-sum-exp (see :mod:`dpcounts.sampling.enumeration`). The realised epsilon is
the largest absolute value. Nothing is bounded or approximated, so the audit is the referee
for every calibration's privacy claim; the price is that it is only feasible for small
instances (I = 2..4 cells, y. up to a few tens). Too-large instances are refused before any
work starts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpcounts.calibration import Calibration
from dpcounts.sampling.enumeration import compositions, count_compositions, log_pmf_table

#: Default ceiling on the audit's work, in (y, z) pairs times operations per pair. Without
#: truncation it admits y. up to 8,163 for I = 2, 105 for I = 3, 27 for I = 4 and 14 for
#: I = 5 (tests/test_audit.py checks these limits).
MAX_WORK = 2e8
#: (y, z) entries per block when comparing neighbours.
_CHUNK_ENTRIES = 4_000_000


@dataclass(frozen=True)
class WorstCase:
    """Where the realised epsilon occurs: ``log q(z|y) - log q(z|x) = epsilon`` (>= 0)."""

    epsilon: float
    y: np.ndarray
    x: np.ndarray
    z: np.ndarray


def audit_work(cal: Calibration, total: int | None = None) -> float:
    """Estimated work of :func:`audit_worst_case` (the quantity compared with ``max_work``)."""
    total = _check_total(cal, total)
    n_cells = cal.n_cells
    n_data = count_compositions(total, np.zeros(n_cells, np.int64), np.full(n_cells, total))
    lower, upper = cal.bounds()
    n_support = count_compositions(total, lower, upper)
    per_pair = n_cells + n_cells * (n_cells - 1) / 2  # pmf table + one pass per cell pair
    return float(n_data) * float(n_support) * per_pair


def audit(cal: Calibration, total: int | None = None, *, max_work: float = MAX_WORK) -> float:
    """The exact realised epsilon of ``cal`` at total ``total`` (defaults to ``cal.total``).

    Raises ValueError if the instance is too large to enumerate (see ``max_work``).
    """
    return audit_worst_case(cal, total, max_work=max_work).epsilon


def audit_worst_case(
    cal: Calibration, total: int | None = None, *, max_work: float = MAX_WORK
) -> WorstCase:
    """The exact realised epsilon and the (y, x, z) at which it is attained."""
    total = _check_total(cal, total)
    _check_parameters(cal)
    work = audit_work(cal, total)
    if work > max_work:
        raise ValueError(
            f"audit of I={cal.n_cells} cells with total {total} needs about {work:.3g} "
            f"operations, above the limit max_work={max_work:.3g}; audit a smaller instance "
            "(fewer cells or a smaller total) or raise max_work"
        )
    n_cells = cal.n_cells
    lower, upper = cal.bounds()
    support = compositions(total, lower, upper)
    if support.shape[0] == 0:
        raise ValueError(f"the bounds [lower, upper] admit no release summing to {total}")
    data = compositions(total, np.zeros(n_cells, np.int64), np.full(n_cells, total))
    log_pmf = log_pmf_table(cal, data, support)  # row r: log q(. | data[r])

    # rows are in lexicographic order, so a mixed-radix key finds any neighbour by bisection
    place = (total + 1) ** np.arange(n_cells - 1, -1, -1, dtype=np.int64)
    keys = data @ place
    best = WorstCase(0.0, data[0], data[0], support[0])
    chunk = max(1, _CHUNK_ENTRIES // support.shape[0])  # bounds the temporaries' memory
    for i in range(n_cells):
        for j in range(i + 1, n_cells):
            # moving i -> j for every y also covers j -> i (the pair seen from x)
            all_y = np.nonzero(data[:, i] >= 1)[0]
            for first in range(0, all_y.size, chunk):
                rows_y = all_y[first : first + chunk]
                rows_x = np.searchsorted(keys, keys[rows_y] - place[i] + place[j])
                diff = log_pmf[rows_y] - log_pmf[rows_x]
                r, c = np.unravel_index(int(np.argmax(np.abs(diff))), diff.shape)
                value = float(diff[r, c])
                if abs(value) > best.epsilon:
                    y, x = data[rows_y[r]], data[rows_x[r]]
                    if value < 0:  # report it oriented so that log q(z|y) - log q(z|x) > 0
                        y, x = x, y
                    best = WorstCase(abs(value), y.copy(), x.copy(), support[c].copy())
    return best


def _check_total(cal: Calibration, total: int | None) -> int:
    if not isinstance(cal, Calibration):
        raise TypeError(f"cal must be a dpcounts.calibration.Calibration, got {type(cal)}")
    if total is None:
        return cal.total
    if int(total) != total or int(total) != cal.total:
        raise ValueError(
            f"total must equal the calibration's total {cal.total} (a calibration is made "
            f"for one public total), got {total}"
        )
    return int(total)


def _check_parameters(cal: Calibration) -> None:
    if cal.n_cells < 2:
        raise ValueError(f"the audit needs at least 2 cells, cal has {cal.n_cells}")
    if not np.all(np.isfinite(cal.a)) or np.any(cal.a <= 0):
        raise ValueError("cal.a must be finite and positive in every cell")
    if not np.all(np.isfinite(cal.log_success())):
        raise ValueError("cal.log_success() must be finite (check population and b)")
