"""What an analyst can infer from a release folder alone (issue #54): the rate of each group
of strata, with an interval, by one of two methods (:data:`METHODS`).

:func:`estimate` reads nothing but the public folder (its manifest, ``synthetic.*`` and
``hyperparameters.*``), and refuses a folder that ``dpcounts verify`` rejects. A group's
rate is its strata's count over their population (per 100,000; an SMR with expected
counts as the denominator).

``posterior`` (the default): the noise-aware posterior of
:mod:`dpcounts.release.posterior`. Each stratum's true count gets a public prior (gamma-
Poisson of mean population x the published prior rate, md: the overall rate, shape
``prior_shape``, default 1) times the likelihood of the M sets under the published
hyperparameters; a group's total is the convolution of its strata's posteriors,
conditioned on the public total. ``estimate`` is the posterior mean of the rate,
``variance`` its posterior variance, ``lower`` and ``upper`` the equal-tailed posterior
quantiles at ``level``; ``df`` is NaN and ``adjusted`` False (neither has a meaning
here). It works from one set on. Its approximation (cells independent given the total,
the normaliser in saddle-point form) and where it fails (how an excess above a truncated
release's bounds is spread among strata; a prior far from the truth) are stated in that
module and ``docs/release.md``. On simulated tables where its prior holds
(``tests/test_estimate_posterior.py``) its 90% intervals cover about 90% of the groups'
true rates where the combining rules cover about 60% (pg and md, epsilon 0.5 a set):
hence the default.

``combining``: the combining rules for fully synthetic data (Raghunathan, Reiter and
Rubin 2003). Set m gives the group's rate q_m = y_m / n and its Poisson variance u_m =
y_m / n^2 (same scale). :func:`combine` then gives, over the M sets:

* the estimate q_M = mean of q_m;
* b_M, the variance of the q_m across the sets, and u_M, the mean of the u_m;
* the variance T_f = (1 + 1/M) b_M - u_M, with nu_f = (M - 1) (1 - M u_M / ((M + 1)
  b_M))^2 degrees of freedom (Raghunathan, Reiter and Rubin 2003; Reiter 2002): the
  interval is q_M +- t_{nu_f} sqrt(T_f);
* where T_f <= 0 (which happens when the sets barely differ), the documented adjustment
  T* = (n_syn / n) u_M (Reiter 2002, section 3), here u_M (a synthetic set has the
  table's own size), with a normal quantile; the ``adjusted`` column says where.

These rules assume each set is drawn from the posterior predictive of a model that holds,
and they do not see the privacy noise as such: where the DP noise dominates (small
epsilon) the sets differ for privacy, not for sampling, and are shrunk towards the prior
alike, so the interval is too narrow and misplaced; they need 2 sets or more.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

#: The methods of :func:`estimate`.
METHODS = ("posterior", "combining")
#: The columns of the table :func:`estimate` returns, after the group's keys.
COLUMNS = ("estimate", "lower", "upper", "variance", "df", "adjusted", "method", "sets")


def combine(estimates, variances, level: float = 0.9) -> dict:
    """The combining rules for fully synthetic data over M sets (rows of ``estimates`` and
    ``variances``, one column per quantity; module docstring): a dict of arrays
    ``estimate``, ``variance``, ``df``, ``lower``, ``upper`` and ``adjusted``."""
    from scipy import stats

    q = np.atleast_2d(np.asarray(estimates, dtype=float))
    u = np.atleast_2d(np.asarray(variances, dtype=float))
    if q.shape != u.shape:
        raise ValueError(f"estimates {q.shape} and variances {u.shape} must have one shape")
    m = q.shape[0]
    if m < 2:
        raise ValueError(f"the combining rules need at least 2 synthetic sets, got {m}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    mean = q.mean(axis=0)
    between = q.var(axis=0, ddof=1)
    within = u.mean(axis=0)
    total = (1 + 1 / m) * between - within
    adjusted = ~(total > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (m - 1) * (1 - m * within / ((m + 1) * between)) ** 2
    variance = np.where(adjusted, within, total)
    df = np.where(adjusted, np.inf, df)
    quantile = np.where(np.isfinite(df), stats.t.ppf(0.5 + level / 2, np.where(
        np.isfinite(df), df, 1.0)), stats.norm.ppf(0.5 + level / 2))  # fmt: skip
    half = quantile * np.sqrt(variance)
    return {"estimate": mean, "variance": variance, "df": df, "lower": mean - half,
            "upper": mean + half, "adjusted": adjusted}  # fmt: skip


def estimate(folder, by, level: float = 0.9, method: str = "posterior",
             prior_shape: float = 1.0) -> pd.DataFrame:  # fmt: skip
    """The rate of each group of the keys ``by`` (a list of the release's key columns) from
    the release in ``folder``, with its interval at ``level`` by ``method`` (module
    docstring; ``prior_shape``: the posterior's prior, s >= 1): one row per group, the
    group's keys then :data:`COLUMNS`. Refuses (ValueError) a folder ``dpcounts verify``
    rejects, a key the release does not have, and for ``combining`` a release of one set."""
    from dpcounts.verify import FAIL, failed, load_manifest, verify_release

    folder = Path(folder)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    checks = verify_release(folder)
    if failed(checks):
        names = [f"{c.topic}/{c.name}" for c in checks if c.status == FAIL]
        raise ValueError(f"{folder}: dpcounts verify rejects this folder ({', '.join(names[:5])}"
                         "): no estimate from it")  # fmt: skip
    manifest, error = load_manifest(folder)
    if manifest is None:
        raise ValueError(f"{folder}: {error}")
    keys, by = list(manifest["keys"]), list(by)
    unknown = [c for c in by if c not in keys]
    if not by or unknown:
        raise ValueError(f"--by {by}: expected one or more of the release's keys {keys}")
    sets = int(manifest["sets"])
    if sets < 2 and method == "combining":
        raise ValueError(f"{folder}: a release of {sets} set; the combining rules need at "
                         "least 2 (--sets 5 or more, or --method posterior)")  # fmt: skip
    files = manifest["files"]
    synthetic = _table(folder / files["synthetic"]["path"])
    hyper = _table(folder / files["hyperparameters"]["path"])
    expected = manifest.get("denominator", {}).get("kind") == "expected"
    per = 1.0 if expected else 1e5
    groups = hyper[by].astype(str).agg("\x1f".join, axis=1) if len(by) > 1 else hyper[
        by[0]].astype(str)  # fmt: skip
    codes, uniques = pd.factorize(groups, sort=True)
    people = np.bincount(codes, weights=hyper["population"].to_numpy(float))
    # every set lists the hyperparameters' strata in their order (verify checks it)
    counts = np.vstack([rows.to_numpy(float) for _, rows in
                        synthetic.groupby("set", sort=True)["count"]])  # fmt: skip
    if method == "combining":
        combined = _combining(counts, codes, len(uniques), people, per, level)
    else:
        cap = None if expected else hyper["population"].to_numpy(float)
        combined = _posterior(manifest, hyper, counts, codes, people, per, level, prior_shape,
                              cap)  # fmt: skip
    named = hyper.assign(_group=groups).drop_duplicates("_group").set_index("_group")
    out = named.loc[list(uniques), by].reset_index(drop=True)  # each group's keys
    for column in ("estimate", "lower", "upper", "variance", "df", "adjusted"):
        out[column] = combined[column]
    out["lower"] = np.maximum(out["lower"], 0.0)  # a rate is not negative
    out["method"] = method
    out["sets"] = sets
    return out


def _combining(counts, codes, groups: int, people, per: float, level: float) -> dict:
    """The combining rules on each group's rate in each set (module docstring)."""
    pooled = np.vstack([np.bincount(codes, weights=row, minlength=groups) for row in counts])
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = pooled / people * per
        variances = pooled / people**2 * per**2
    return combine(rates, variances, level)


def _posterior(manifest, hyper, counts, codes, people, per, level, prior_shape, cap) -> dict:
    """The noise-aware posterior of each group's rate (module docstring), from the
    calibration the folder publishes."""
    from dpcounts.calibration import Calibration
    from dpcounts.mechanisms.registry import family
    from dpcounts.release.posterior import group_posteriors, summarise

    mechanism = manifest["mechanism"]
    published = family(mechanism).hyperparameters
    columns = {name: hyper[name].to_numpy() if name in published else None
               for name in ("a", "b", "population", "prior_rate", "lower", "upper")}  # fmt: skip
    cal = Calibration(mechanism, manifest["method"], manifest["budget"]["epsilon_per_set"],
                      int(manifest["total"]), **columns)  # fmt: skip
    laws = group_posteriors(cal, counts.astype(np.int64), codes, prior_shape, cap)
    out = summarise(laws, people, per, level)
    out["df"] = np.full(len(laws), np.nan)
    out["adjusted"] = np.zeros(len(laws), dtype=bool)
    return out


def _table(path: Path) -> pd.DataFrame:
    """A public table of the folder (Parquet or CSV, as the manifest names it)."""
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path, dtype=str).pipe(_numbers)


def _numbers(frame: pd.DataFrame) -> pd.DataFrame:
    for column in ("set", "count", "population"):
        if column in frame:
            frame[column] = pd.to_numeric(frame[column])
    return frame


__all__ = ["COLUMNS", "METHODS", "combine", "estimate"]
