"""The calibration: the public, data-independent hyperparameters of one release.

A :class:`Calibration` is made from epsilon, the public total y., populations and prior
rates (never from the confidential counts), so it can be cached, published beside the
synthetic data and shared by every dataset that has the same public inputs.

Its table form (:meth:`Calibration.to_frame`, one row per cell, :data:`FRAME_COLUMNS`)
is the one way a calibration goes to a table and back (:meth:`Calibration.from_frame`).
A table of many calibrations (a study's, one per arm and epsilon) is looked up by the
caller, by its epsilon's label (:func:`dpcounts.design.at_epsilon`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpcounts.mechanisms.registry import family

#: A release's delta unless the steward gives --delta; a study's guide judges what a
#: release at it can use.
DEFAULT_DELTA = 1e-12
_ARRAY_FIELDS = ("a", "b", "population", "prior_rate", "lower", "upper")
#: Columns of a calibration's table form (:meth:`Calibration.to_frame`): the values the
#: calibration chose, one row per cell; the public inputs (populations, prior rates) are
#: the caller's and come back as arguments of :meth:`Calibration.from_frame`.
FRAME_COLUMNS = ("epsilon", "cell", "a", "b", "lower", "upper", "total", "tail", "inflation")
#: The columns of the table form that repeat one value of the calibration on every row.
_REPEATED_COLUMNS = ("epsilon", "total", "tail", "inflation")


def _frozen_array(values, name: str, dtype=float) -> np.ndarray | None:
    if values is None:
        return None
    arr = np.array(values, dtype=dtype, copy=True)
    if arr.ndim != 1:
        raise ValueError(f"Calibration.{name} must be one-dimensional, got shape {arr.shape}")
    arr.flags.writeable = False
    return arr


@dataclass(frozen=True, eq=False)
class Calibration:
    """Public hyperparameters of a mechanism for one epsilon.

    Attributes
    ----------
    mechanism : "md" | "pg" | "truncated"
    method : "paper" | "certified" | "exact" (how ``a`` was chosen)
    epsilon : the privacy budget the calibration targets
    total : the public total y. (the synthetic vector sums to it)
    a : Dirichlet alphas (md) or gamma shapes (pg, truncated), one per cell
    b : gamma rates ``a / prior_rate`` (pg, truncated); None for md
    population, prior_rate : the public inputs (None where the mechanism ignores them)
    lower, upper : integer truncation bounds L_i, U_i (truncated only)
    tail, inflation : the settings the bounds were made with (truncated only)
    """

    mechanism: str
    method: str
    epsilon: float
    total: int
    a: np.ndarray
    b: np.ndarray | None = None
    population: np.ndarray | None = None
    prior_rate: np.ndarray | None = None
    lower: np.ndarray | None = None
    upper: np.ndarray | None = None
    tail: float | None = None
    inflation: float = 1.0

    def __post_init__(self) -> None:
        kind = family(self.mechanism)  # the registry's record (an unknown name: refused)
        if self.method not in kind.methods:
            raise ValueError(f"method must be one of {list(kind.methods)} for "
                             f"{self.mechanism}, got {self.method!r}")  # fmt: skip
        for name in _ARRAY_FIELDS:
            dtype = np.int64 if name in ("lower", "upper") else float
            object.__setattr__(self, name, _frozen_array(getattr(self, name), name, dtype))
        object.__setattr__(self, "epsilon", float(self.epsilon))
        object.__setattr__(self, "total", int(self.total))
        size = self.a.size
        for name in _ARRAY_FIELDS:
            arr = getattr(self, name)
            if arr is not None and arr.size != size:
                raise ValueError(f"Calibration.{name} has {arr.size} cells, a has {size}")
        if (self.lower is None) != (self.upper is None):
            raise ValueError("Calibration needs both lower and upper bounds, or neither")
        if kind.bounded and self.lower is None:
            raise ValueError(f"a {self.mechanism} calibration needs lower and upper bounds")
        if kind.uses_prior and self.b is None:
            raise ValueError(f"a {self.mechanism} calibration needs gamma rates b")

    @property
    def n_cells(self) -> int:
        return int(self.a.size)

    @property
    def truncated(self) -> bool:
        return self.lower is not None

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Support of each synthetic count: [L_i, U_i] if truncated, else [0, y.]."""
        if self.truncated:
            return self.lower.copy(), self.upper.copy()
        return np.zeros(self.n_cells, np.int64), np.full(self.n_cells, self.total, np.int64)

    def clamp(self, y) -> np.ndarray:
        """The counts as they enter the posterior: clamped to the bounds when truncated."""
        y = np.asarray(y)
        if not self.truncated:
            return y
        return np.clip(y, self.lower, self.upper)

    def log_success(self) -> np.ndarray:
        """log p_i of each cell's posterior predictive NB, p_i = n_i / (b_i + 2 n_i).

        For md every cell has the same p, so it cancels once the total is fixed; zeros.
        """
        if not family(self.mechanism).uses_prior:
            return np.zeros(self.n_cells)
        return np.log(self.population) - np.log(self.b + 2.0 * self.population)

    # --- comparison and serialisation -------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Calibration):
            return NotImplemented
        for field in dataclasses.fields(self):
            mine, theirs = getattr(self, field.name), getattr(other, field.name)
            if isinstance(mine, np.ndarray) or isinstance(theirs, np.ndarray):
                if mine is None or theirs is None or not np.array_equal(mine, theirs):
                    return False
            elif mine != theirs:
                return False
        return True

    __hash__ = None  # mutable-looking arrays: not hashable

    def to_frame(self) -> pd.DataFrame:
        """The table form, one row per cell (:data:`FRAME_COLUMNS`): epsilon, the cell's
        index, a, b (NaN for md), its bounds (0 and y. when not truncated), the total, the
        tail (NaN when not truncated) and the inflation. Inverse of :meth:`from_frame`."""
        lower, upper = self.bounds()
        return pd.DataFrame(
            {
                "epsilon": self.epsilon,
                "cell": np.arange(self.n_cells),
                "a": self.a,
                "b": np.full(self.n_cells, np.nan) if self.b is None else self.b,
                "lower": lower,
                "upper": upper,
                "total": self.total,
                "tail": np.nan if self.tail is None else self.tail,
                "inflation": self.inflation,
            }
        )[list(FRAME_COLUMNS)]

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        mechanism: str,
        method: str,
        population=None,
        prior_rate=None,
    ) -> Calibration:
        """The calibration of ``mechanism`` / ``method`` held by ``frame``: the rows of one
        :meth:`to_frame` (possibly with extra columns such as a study's ``arm``), each cell
        once. ``population`` and ``prior_rate`` are the public inputs it was made from (the
        prior is dropped for md). A table of several calibrations is refused: select one
        epsilon's rows first (:func:`dpcounts.design.at_epsilon`)."""
        cells = frame["cell"].to_numpy()
        repeated = frame[list(_REPEATED_COLUMNS)].nunique(dropna=False)
        if not np.array_equal(np.sort(cells), np.arange(len(frame))) or (repeated > 1).any():
            raise ValueError(
                f"a table of {len(frame)} rows that are not one calibration's (cells 0..n-1 "
                "once each, one value of each of "
                f"{', '.join(_REPEATED_COLUMNS)}); expected the rows of one calibration "
                "(select one epsilon's rows first)"
            )
        rows = frame.sort_values("cell")
        truncated, prior = family(mechanism).bounded, family(mechanism).uses_prior
        return cls(
            mechanism,
            method,
            float(rows["epsilon"].iloc[0]),
            int(rows["total"].iloc[0]),
            rows["a"].to_numpy(),
            rows["b"].to_numpy() if prior else None,
            population,
            prior_rate if prior else None,
            rows["lower"].to_numpy() if truncated else None,
            rows["upper"].to_numpy() if truncated else None,
            tail=float(rows["tail"].iloc[0]) if truncated else None,
            inflation=float(rows["inflation"].iloc[0]),
        )

    def hyperparameter_frame(self) -> pd.DataFrame:
        """The hyperparameters a release publishes beside its synthetic data, one row per
        cell: a, b, population, prior_rate, lower and upper, those the calibration has (no
        epsilon or total: the manifest states them). A view of :meth:`to_frame`'s values
        with the public inputs, not a second table form: it does not come back."""
        cols = {
            name: getattr(self, name) for name in _ARRAY_FIELDS if getattr(self, name) is not None
        }
        return pd.DataFrame(cols)
