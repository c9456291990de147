"""What an analyst can infer from a release folder alone (issue #54): the rate of each group
of strata, with an interval from the M synthetic sets by the combining rules for fully
synthetic data (Raghunathan, Reiter and Rubin 2003).

:func:`estimate` reads nothing but the public folder (its manifest, ``synthetic.*`` and
``hyperparameters.*``), and refuses a folder that ``dpcounts verify`` rejects. For each
group of the keys ``by`` (every stratum of the group pooled), set m gives the group's rate
q_m = y_m / n (per 100,000; an SMR with expected counts as the denominator) and its
Poisson variance u_m = y_m / n^2 (same scale). :func:`combine` then gives, over the M sets:

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
epsilon) the sets differ for privacy, not for sampling, and the interval then reflects
that spread only. Whether it covers the truth is what a study's coverage measures; the
public hyperparameters permit a noise-aware posterior (the issue's method ``posterior``,
not yet built).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

#: The methods of :func:`estimate`.
METHODS = ("combining",)
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


def estimate(folder, by, level: float = 0.9, method: str = "combining") -> pd.DataFrame:
    """The rate of each group of the keys ``by`` (a list of the release's key columns) from
    the release in ``folder``, with its interval at ``level``: one row per group, the
    group's keys then :data:`COLUMNS`. Refuses (ValueError) a folder ``dpcounts verify``
    rejects, a key the release does not have, and a release of one set."""
    from dpcounts.verify import FAIL, failed, load_manifest, verify_release

    folder = Path(folder)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
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
    if sets < 2:
        raise ValueError(f"{folder}: a release of {sets} set; the combining rules need at "
                         "least 2 (a release with --sets 5 or more)")  # fmt: skip
    files = manifest["files"]
    synthetic = _table(folder / files["synthetic"]["path"])
    hyper = _table(folder / files["hyperparameters"]["path"])
    per = 1.0 if manifest.get("denominator", {}).get("kind") == "expected" else 1e5
    groups = hyper[by].astype(str).agg("\x1f".join, axis=1) if len(by) > 1 else hyper[
        by[0]].astype(str)  # fmt: skip
    codes, uniques = pd.factorize(groups, sort=True)
    people = np.bincount(codes, weights=hyper["population"].to_numpy(float))
    stratum = synthetic.groupby("set", sort=True)["count"]
    counts = np.vstack([np.bincount(codes, weights=rows.to_numpy(float),
                                    minlength=len(uniques)) for _, rows in stratum])  # fmt: skip
    with np.errstate(divide="ignore", invalid="ignore"):
        rates = counts / people * per
        variances = counts / people**2 * per**2
    combined = combine(rates, variances, level)
    named = hyper.assign(_group=groups).drop_duplicates("_group").set_index("_group")
    out = named.loc[list(uniques), by].reset_index(drop=True)  # each group's keys
    for column in ("estimate", "lower", "upper", "variance", "df", "adjusted"):
        out[column] = combined[column]
    out["lower"] = np.maximum(out["lower"], 0.0)  # a rate is not negative
    out["method"] = method
    out["sets"] = sets
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
