"""Tidy tables of a study: what the workflow saves, and the summary and checks it reports.

- draws: one row per synthesizer and posterior draw (``chain``, ``draw``, parameters).
- records: one row per synthesizer and record (``y``, ``weight``, ``lipschitz``).
- fit metadata: per synthesizer, Delta, eps = 2 Delta, the target Delta and the constant
  it was tuned with, the tuning history, how the draws were made (``sampler``: exact or
  nuts) and their diagnostics.
- summary: per synthesizer, privacy, weights, the posterior of the mean and utility.
- checks: the seed's qualitative claims, each a measured value and whether it holds.
- gathered: every data set's records, summary, posterior of mu, utility and synthetic
  data in one table each (a ``dataset`` column first), and every data set's checks.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpcounts.studies.metrics import summarise
from dpcounts.studies.pseudo_posterior.likelihood import parameter_names
from dpcounts.studies.pseudo_posterior.posterior import PosteriorFit
from dpcounts.studies.pseudo_posterior.study import SYNTHESIZERS, SynthesizerFit
from dpcounts.studies.pseudo_posterior.synthesis import DATA, STATISTICS

logger = logging.getLogger(__name__)


def draws_table(fits: Mapping[str, SynthesizerFit]) -> pd.DataFrame:
    frames = []
    for name, result in fits.items():
        fit = result.fit
        size = fit.draws["mu"].size
        frame = pd.DataFrame(
            {
                "synthesizer": name,
                "chain": np.repeat(np.arange(fit.chains), size // fit.chains),
                "draw": np.arange(size),
            }
        )
        for parameter in parameter_names(fit.family):
            frame[parameter] = fit.draws[parameter]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def records_table(fits: Mapping[str, SynthesizerFit]) -> pd.DataFrame:
    return pd.concat(
        [
            pd.DataFrame(
                {
                    "synthesizer": name,
                    "record": np.arange(result.fit.y.size),
                    "y": result.fit.y,
                    "weight": result.fit.weights,
                    "lipschitz": result.bounds.record,
                }
            )
            for name, result in fits.items()
        ],
        ignore_index=True,
    )


def fit_metadata(fits: Mapping[str, SynthesizerFit]) -> dict:
    return {
        name: {
            "family": result.fit.family,
            "sampler": result.fit.sampler,
            "chains": result.fit.chains,
            "delta": result.bounds.delta,
            "epsilon": result.bounds.epsilon,
            "lipschitz_quantile": result.bounds.quantile,
            "target_delta": result.target_delta,
            "constant": result.constant,
            "history": result.history,
            "rhat": result.fit.rhat,
            "ess": result.fit.ess,
        }
        for name, result in fits.items()
    }


def load_fits(
    draws: pd.DataFrame, records: pd.DataFrame, metadata: Mapping
) -> dict[str, PosteriorFit]:
    """Rebuild every synthesizer's fit (draws, weights, log-likelihoods) from saved tables."""
    fits = {}
    for name, meta in metadata.items():
        own_draws = draws[draws["synthesizer"] == name].sort_values("draw")
        own_records = records[records["synthesizer"] == name].sort_values("record")
        if own_draws.empty or own_records.empty:
            raise ValueError(f"saved tables have no draws or records of synthesizer {name!r}")
        fits[name] = PosteriorFit.from_draws(
            own_records["y"].to_numpy(),
            own_records["weight"].to_numpy(),
            {p: own_draws[p].to_numpy() for p in parameter_names(meta["family"])},
            meta["family"],
            meta["chains"],
            meta["rhat"],
            meta["ess"],
            sampler=meta.get("sampler", "nuts"),
        )
    return fits


@dataclass(frozen=True)
class DatasetTables:
    """What the workflow saved of one data set: its fits (``records``, ``draws``,
    ``metadata``: :func:`records_table`, :func:`draws_table`, :func:`fit_metadata`) and
    its synthetic data (``utility``, ``synthetic``: :func:`~dpcounts.studies.pseudo_posterior.
    synthesis.synthetic_tables`)."""

    records: pd.DataFrame
    draws: pd.DataFrame
    metadata: Mapping
    utility: pd.DataFrame
    synthetic: pd.DataFrame


#: The study's gathered tables (:func:`gather_datasets`), one row set per data set.
GATHERED = ("records", "summary", "posterior", "utility", "synthetic")


def gather_datasets(
    datasets: Mapping[str, DatasetTables], tolerance: float
) -> tuple[dict[str, pd.DataFrame], dict[str, list[dict]]]:
    """Every data set's tables in one of each, and every data set's checks.

    Returns ``(tables, checks)``. ``tables`` maps each name of :data:`GATHERED` to one
    frame whose first column, ``dataset``, names the data set (data sets in the order of
    ``datasets``): ``records`` (``synthesizer, record, weight, lipschitz``), ``summary``
    (:func:`summary_table`), ``posterior`` (``synthesizer, draw, mu``), ``utility`` and
    ``synthetic`` as saved. ``checks`` maps each data set to its :func:`study_checks` at
    ``tolerance``; each check is logged.
    """
    if not datasets:
        raise ValueError("gather_datasets needs at least one data set; got none")
    tables: dict[str, list[pd.DataFrame]] = {key: [] for key in GATHERED}
    checks = {}
    for dataset, saved in datasets.items():
        summary = summary_table(saved.records, saved.draws, saved.metadata, saved.utility)
        checks[dataset] = study_checks(summary, tolerance)
        for check in checks[dataset]:
            logger.info(
                "%s %s: %.4g (%s)",
                dataset,
                check["check"],
                check["value"],
                "holds" if check["passed"] else "DOES NOT HOLD",
            )
        own = {
            "records": saved.records[["synthesizer", "record", "weight", "lipschitz"]],
            "summary": summary,
            "posterior": saved.draws[["synthesizer", "draw", "mu"]],
            "utility": saved.utility,
            "synthetic": saved.synthetic,
        }
        for key, frame in own.items():
            tables[key].append(frame.assign(dataset=dataset))
    gathered = {}
    for key, frames in tables.items():
        frame = pd.concat(frames, ignore_index=True)
        gathered[key] = frame[["dataset", *[c for c in frame.columns if c != "dataset"]]]
    return gathered, checks


def summary_table(
    records: pd.DataFrame, draws: pd.DataFrame, metadata: Mapping, utility: pd.DataFrame
) -> pd.DataFrame:
    """One row per synthesizer: Delta, eps, weights, posterior of mu and mean utility."""
    data_stats = utility[utility["synthesizer"] == DATA].iloc[0]
    rows = []
    for name in [s for s in SYNTHESIZERS if s in metadata]:
        meta = metadata[name]
        weight = records.loc[records["synthesizer"] == name, "weight"].to_numpy()
        mu = draws.loc[draws["synthesizer"] == name, "mu"].to_numpy()
        mu_band = summarise(mu)  # the 95% interval of mu over the posterior draws
        synthetic = utility[utility["synthesizer"] == name]
        row = {
            "synthesizer": name,
            "delta": meta["delta"],
            "epsilon": meta["epsilon"],
            "target_delta": np.nan if meta["target_delta"] is None else meta["target_delta"],
            "delta_gap": np.nan
            if meta["target_delta"] is None
            else meta["delta"] / meta["target_delta"] - 1.0,
            "constant": np.nan if meta["constant"] is None else meta["constant"],
            "fits": max(1, len(meta["history"])),
            "weight_mean": weight.mean(),
            "weight_min": weight.min(),
            "share_weight_below_half": np.mean(weight < 0.5),
            "mu_mean": mu.mean(),
            "mu_q025": mu_band["lower"],
            "mu_q975": mu_band["upper"],
            "sampler": meta.get("sampler", "nuts"),
            "rhat_max": max(meta["rhat"].values()),
            "ess_min": min(meta["ess"].values()),
        }
        row["mu_interval_width"] = row["mu_q975"] - row["mu_q025"]
        base = name.removesuffix("_final")
        if base != name and base in metadata:
            before = records.loc[records["synthesizer"] == base, "weight"].to_numpy()
            row["min_weight_increase"] = float(np.min(weight - before))
            row["share_weights_raised"] = float(np.mean(weight > before))
            row["delta_change"] = meta["delta"] / metadata[base]["delta"] - 1.0
        for stat in STATISTICS:
            row[f"{stat}_synthetic"] = synthetic[stat].mean()
            row[f"{stat}_data"] = data_stats[stat]
        rows.append(row)
    return pd.DataFrame(rows)


def study_checks(summary: pd.DataFrame, tolerance: float) -> list[dict]:
    """The seed's claims on one data set, each with its measured value and verdict."""
    by = summary.set_index("synthesizer")
    checks = []

    def add(name, value, passed, meaning):
        checks.append(
            {"check": name, "value": float(value), "passed": bool(passed), "what": meaning}
        )

    if {"LW", "SW"} <= set(by.index):
        ratio = by.at["SW", "mu_interval_width"] / by.at["LW", "mu_interval_width"]
        add("sw_interval_wider_than_lw", ratio, ratio > 1, "SW / LW width of 95% interval of mu")
    if {"LW", "CW"} <= set(by.index):
        gap = by.at["CW", "share_weight_below_half"] - by.at["LW", "share_weight_below_half"]
        add(
            "cw_downweights_more_than_lw",
            gap,
            gap > 0,
            "share of records with weight below 1/2: CW - LW",
        )
    for name in ("CW", "SW", "LW_final", "CW_final"):
        if name in by.index:
            gap = by.at[name, "delta_gap"]
            add(
                f"{name}_delta_matches_target",
                gap,
                abs(gap) <= tolerance,
                "relative gap of Delta to its target",
            )
    for name in ("LW_final", "CW_final"):
        if name in by.index:
            raised = by.at[name, "min_weight_increase"]
            add(
                f"{name}_raises_every_weight",
                raised,
                raised >= 0,
                "smallest weight increase over the weights before re-weighting",
            )
            change = by.at[name, "delta_change"]
            add(
                f"{name}_keeps_delta",
                change,
                abs(change) <= tolerance,
                "relative change of Delta by re-weighting",
            )
    return checks
