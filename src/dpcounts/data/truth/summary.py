"""Plain-number summaries of a truth frame (for logs and docs): size, totals, spread and
spatial autocorrelation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse

from dpcounts.units import PER_100K


def morans_i(values, adjacency: scipy.sparse.spmatrix) -> float:
    """Moran's I of ``values`` under the binary weights ``adjacency`` (0 when all equal).

    I = (n / S0) * sum_ij w_ij z_i z_j / sum_i z_i^2, z the centred values, S0 = sum w_ij.
    About -1/(n-1) for independent values; positive when neighbours are alike.
    """
    weights = scipy.sparse.csr_matrix(adjacency, dtype=float)
    centred = np.asarray(values, dtype=float) - np.mean(values)
    spread = centred @ centred
    if spread == 0 or weights.sum() == 0:
        return 0.0
    return float(len(centred) / weights.sum() * (centred @ (weights @ centred)) / spread)


def truth_summary(truth: pd.DataFrame, adjacency: scipy.sparse.spmatrix | None = None) -> dict:
    """Plain-number summary of a truth frame (for logs and docs): size, totals, spread.

    Rates per 100,000; quantiles are over counties (unweighted); ``national_rate`` is
    sum(expected) / sum(population). With ``adjacency`` (rows in the frame's order) it
    adds Moran's I of log(rate).
    """
    per_100k = truth["rate"].to_numpy(float) * PER_100K
    quantiles = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)
    values = np.quantile(per_100k, quantiles)
    summary = {
        "counties": int(len(truth)),
        "population": float(truth["population"].sum()),
        "expected_deaths": float(truth["expected"].sum()),
        "national_rate_per_100k": float(
            PER_100K * truth["expected"].sum() / truth["population"].sum()
        ),
        "rate_per_100k_quantiles": {
            f"{q:g}": float(v) for q, v in zip(quantiles, values, strict=True)
        },
        "sd_log_rate": float(np.std(np.log(truth["rate"].to_numpy(float)))),
    }
    if adjacency is not None:
        summary["morans_i_log_rate"] = morans_i(np.log(truth["rate"].to_numpy(float)), adjacency)
    return summary
