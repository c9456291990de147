"""The no-privacy reference: what synthesis alone does to a table, with no privacy at all.

Every synthesizer of this library draws a synthetic table from a posterior predictive
distribution whose privacy term vanishes as epsilon grows: the MD mechanism's Dirichlet
weight alpha and the PG mechanism's gamma shape a (with rate b = a / prior_rate) both tend
to 0. In that limit

* **MD**: z | y ~ Multinomial(y., theta), theta ~ Dirichlet(y + alpha) -> Dirichlet(y);
* **PG** (conditioned on the total, as releases draw it): lambda_i ~ Gamma(a_i + y_i,
  b_i + n_i) -> Gamma(y_i, n_i), so z_i ~ NegBin(y_i, 1/2) independently, and given their
  sum y. the z_i are Dirichlet-multinomial(y., y) (independent negative binomials of one
  success probability, conditioned on their sum);

so both tend to the **Dirichlet-multinomial with total y. and weights y** (a stratum with
y_i = 0 stays 0). It keeps the total, has mean y_i and variance about 2 y_i (twice a
Poisson's): the synthesis noise that no epsilon removes. The truncated PG mechanism's
bounds are *dropped* here: its reference is the same law, so that a truncated arm that
stays away from it at large epsilon shows the bias of its truncation, not of synthesis.

Nothing here is released: the reference depends on the confidential counts and serves
the steward's own comparisons (the epsilon guide, a release's utility report).
"""

from __future__ import annotations

import numpy as np

#: Counts drawn at once (tables x strata per batch, about 32 MB an array): the steward's
#: utility report draws and scores its reference tables in batches of this size.
BATCH_CELLS = 4_000_000


def no_privacy_draws(y, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` tables drawn from the no-privacy reference of ``y`` (Dirichlet-multinomial with
    total ``y.sum()`` and weights ``y``), shape ``(n, len(y))``, whole numbers.

    ``y`` must be whole, non-negative counts with a positive total.
    """
    y = _checked(y)
    columns = drawn_strata(y)
    out = np.zeros((n, y.size), dtype=np.int64)
    out[:, columns] = _draws_at(y, columns, n, rng)
    return out


def drawn_strata(y) -> np.ndarray:
    """The strata a no-privacy table of ``y`` can be non-zero at, as :func:`no_privacy_draws`
    draws them: every stratum when most have events, else those with events and the last.

    Most strata empty (a national table of single-year ages): numpy draws nothing for a
    gamma of shape 0 nor for a binomial of probability 0, so drawing the others only gives
    the same tables from the same stream. The last stratum is kept (the multinomial gives
    it what is left)."""
    y = np.asarray(y)
    drawn = np.flatnonzero(y)
    if 2 * drawn.size > y.size:  # few empty strata: draw them all
        return np.arange(y.size)
    if not drawn.size or drawn[-1] != y.size - 1:
        drawn = np.append(drawn, y.size - 1)
    return drawn


def _checked(y) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or y.size == 0:
        raise ValueError(f"y must be a non-empty vector of counts, got shape {y.shape}")
    if np.any(y < 0) or np.any(y != np.round(y)):
        raise ValueError("y must hold whole, non-negative counts")
    if y.sum() <= 0:
        raise ValueError("y must have a positive total: with no event there is nothing to draw")
    return y


def _draws_at(y: np.ndarray, columns: np.ndarray, n: int, rng) -> np.ndarray:
    """``n`` no-privacy tables of ``y`` at its strata ``columns`` (:func:`drawn_strata`),
    shape ``(n, columns.size)``: zero elsewhere."""
    total = int(y.sum())
    if columns.size == y.size:
        weights = rng.standard_gamma(y.astype(float), size=(n, y.size))  # shape 0 gives 0
        weights /= weights.sum(axis=1, keepdims=True)
        return rng.multinomial(total, weights).astype(np.int64)
    # each table's weights divided by their sum over every stratum, summed as numpy sums
    # the whole row (zeros elsewhere)
    weights = rng.standard_gamma(y[columns].astype(float), size=(n, columns.size))
    row = np.zeros(y.size)
    for table in range(n):
        row[columns] = weights[table]
        weights[table] /= row.sum()
    return rng.multinomial(total, weights).astype(np.int64)


def reference_batches(
    y, n: int, rng: np.random.Generator, batch_cells: int = BATCH_CELLS, *, at=None
):
    """:func:`no_privacy_draws` of ``n`` tables in batches of at most ``batch_cells``
    counts (tables x strata; at least one table a batch), in order: the same tables, from
    one seed, whoever scores them. With no event every table is ``y`` itself (zeros).

    ``at`` (:func:`drawn_strata` of ``y``) gives each batch at those strata only, shape
    (tables, ``at.size``): the same tables, every other count zero, without writing them
    (a national table's reference is scored where it has events)."""
    y = np.asarray(y)
    rows = max(1, batch_cells // y.size)
    empty = y.sum() == 0
    if not empty:
        y = _checked(y)
        columns = drawn_strata(y)
        if at is not None and not np.array_equal(at, columns):
            raise ValueError("at must be drawn_strata(y)")
    for start in range(0, n, rows):
        size = min(rows, n - start)
        if empty:  # no event: every table is the true one (no_privacy_draws refuses)
            yield np.zeros((size, y.size if at is None else len(at)), dtype=np.int64)
        elif at is not None:
            yield _draws_at(y, columns, size, rng)
        else:
            out = np.zeros((size, y.size), dtype=np.int64)
            out[:, columns] = _draws_at(y, columns, size, rng)
            yield out
