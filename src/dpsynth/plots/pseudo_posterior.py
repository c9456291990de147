"""Figures of Hu, Savitsky and Williams (2020): the vector-weighted pseudo-posterior
synthesizers, one data set each.

Every function takes the aggregated tables of ``results/pseudo_posterior/`` and returns a
matplotlib ``Figure`` (built without pyplot, so no global backend state is touched).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from scipy.stats import gaussian_kde

from dpsynth.pseudo_posterior.study import SYNTHESIZERS
from dpsynth.pseudo_posterior.synthesis import DATA

COLORS = {
    DATA: "0.35",
    "unweighted": "tab:gray",
    "LW": "tab:blue",
    "CW": "tab:orange",
    "SW": "tab:green",
    "LW_final": "tab:purple",
    "CW_final": "tab:red",
}
STAT_LABELS = {
    "q15": "15th percentile",
    "q90": "90th percentile",
    "mean": "mean",
    "median": "median",
}


#: How a figure names the configured data sets; others: their name with spaces.
DATASET_TITLES = {
    "poisson": "Poisson data",
    "negbin_mixture": "Negative-binomial mixture",
}


def dataset_title(dataset: str) -> str:
    return DATASET_TITLES.get(dataset, dataset.replace("_", " ").capitalize())


def _epsilons(summary: pd.DataFrame, dataset: str) -> dict[str, float]:
    """Each synthesizer's guarantee eps = 2 Delta (its overall Lipschitz bound)."""
    own = _one(summary, dataset).set_index("synthesizer")
    return {name: 2.0 * float(delta) for name, delta in own["delta"].items()}


def _tick(name: str, epsilons: dict[str, float]) -> str:
    return f"{name}\neps {epsilons[name]:.1f}" if name in epsilons else name


def _heading(fig: Figure, dataset: str, what: str, summary: pd.DataFrame) -> None:
    """Title: the data set and what is shown; below it, the guarantee being compared."""
    own = _one(summary, dataset).set_index("synthesizer")
    line = "each synthesizer is eps-DP with eps = 2 Delta, Delta its overall Lipschitz bound"
    if "LW" in own.index:
        line += f"; weighted ones tuned to LW's Delta = {float(own.at['LW', 'delta']):.2f}"
    fig.suptitle(f"{dataset_title(dataset)}: {what}\n{line}", fontsize=10)


def _present(frame: pd.DataFrame, order=SYNTHESIZERS) -> list[str]:
    names = set(frame["synthesizer"])
    return [name for name in order if name in names]


def _violins(ax, groups: list[np.ndarray], labels: list[str], epsilons=None) -> None:
    """seaborn violins of each synthesizer's values (quartiles inside, cut at the data's
    range); a group with a single value (SW's weights) is drawn as a line at that value.
    Tick labels carry each synthesizer's eps where ``epsilons`` knows it."""
    import seaborn as sns

    long = pd.DataFrame(
        {
            "synthesizer": np.repeat(labels, [len(values) for values in groups]),
            "value": np.concatenate([np.asarray(values, dtype=float) for values in groups]),
        }
    )
    sns.violinplot(data=long, x="synthesizer", y="value", hue="synthesizer", order=labels,
                   hue_order=labels, palette={n: COLORS.get(n, "tab:gray") for n in labels},
                   cut=0, inner="quart", linewidth=0.8, legend=False, ax=ax)  # fmt: skip
    ax.set_xlabel("")
    ax.set_ylabel("")
    ticks = [_tick(label, epsilons or {}) for label in labels]
    ax.set_xticks(range(len(labels)), ticks, fontsize=8)


def _one(frame: pd.DataFrame, dataset: str) -> pd.DataFrame:
    subset = frame[frame["dataset"] == dataset]
    if subset.empty:
        raise ValueError(f"no rows of data set {dataset!r}")
    return subset


def lipschitz_violins(records: pd.DataFrame, summary: pd.DataFrame, dataset: str) -> Figure:
    """Record-level Lipschitz bounds by synthesizer; the dotted line is LW's Delta."""
    records, summary = _one(records, dataset), _one(summary, dataset)
    names = _present(records)
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    groups = [records.loc[records.synthesizer == n, "lipschitz"] for n in names]
    _violins(ax, groups, names, _epsilons(summary, dataset))
    delta = summary.set_index("synthesizer").at["LW", "delta"]
    ax.axhline(delta, color="red", linestyle=":", label=f"LW's Delta = {delta:.2f}")
    ax.set_ylabel("record-level Lipschitz bound")
    _heading(fig, dataset, "record-level Lipschitz bounds", summary)
    ax.legend(loc="upper right")
    return fig


def weight_violins(records: pd.DataFrame, summary: pd.DataFrame, dataset: str) -> Figure:
    """Each weighted synthesizer's record weights."""
    records = _one(records, dataset)
    names = [n for n in _present(records) if n != "unweighted"]
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    groups = [records.loc[records.synthesizer == n, "weight"] for n in names]
    _violins(ax, groups, names, _epsilons(summary, dataset))
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel("record weight alpha")
    _heading(fig, dataset, "record weights", summary)
    return fig


def utility_violins(
    utility: pd.DataFrame, summary: pd.DataFrame, dataset: str, statistics: tuple[str, ...]
) -> Figure:
    """Each statistic over the synthetic data sets; the dashed line is the data's value."""
    utility = _one(utility, dataset)
    names = _present(utility)
    fig = Figure(figsize=(5.5 * len(statistics), 4.2), layout="constrained")
    axes = fig.subplots(1, len(statistics), squeeze=False)[0]
    data = utility[utility.synthesizer == DATA].iloc[0]
    for ax, stat in zip(axes, statistics, strict=True):
        groups = [utility.loc[utility.synthesizer == n, stat] for n in names]
        _violins(ax, groups, names, _epsilons(summary, dataset))
        ax.axhline(data[stat], color="black", linestyle="--", label=f"data: {data[stat]:.2f}")
        ax.set_title(STAT_LABELS[stat], fontsize=10)
        ax.legend(loc="best", fontsize=8)
    axes[0].set_ylabel("value in the synthetic data")
    what = " and ".join(STAT_LABELS[stat] for stat in statistics) + " of the synthetic data sets"
    _heading(fig, dataset, what, summary)
    return fig


def posterior_density(posterior: pd.DataFrame, summary: pd.DataFrame, dataset: str) -> Figure:
    """Posterior density of the mean parameter mu by synthesizer."""
    posterior = _one(posterior, dataset)
    epsilons = _epsilons(summary, dataset)
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    for name in _present(posterior):
        mu = posterior.loc[posterior.synthesizer == name, "mu"].to_numpy()
        grid = np.linspace(mu.min(), mu.max(), 200)
        label = f"{name} (eps = {epsilons[name]:.1f})" if name in epsilons else name
        ax.plot(grid, gaussian_kde(mu)(grid), color=COLORS[name], label=label)
    ax.set_xlabel("mu (mean parameter)")
    ax.set_ylabel("posterior density")
    _heading(fig, dataset, "pseudo-posterior of the mean mu", summary)
    ax.legend(fontsize=8)
    return fig


def reweighting_scatter(records: pd.DataFrame, summary: pd.DataFrame, dataset: str) -> Figure:
    """Lipschitz bound against weight before and after re-weighting (Algorithm 3)."""
    records, summary = _one(records, dataset), _one(summary, dataset)
    deltas = summary.set_index("synthesizer")["delta"]
    pairs = [(b, f"{b}_final") for b in ("LW", "CW") if f"{b}_final" in deltas.index]
    fig = Figure(figsize=(6 * len(pairs), 4.5), layout="constrained")
    axes = fig.subplots(1, len(pairs), squeeze=False)[0]
    for ax, (before, after) in zip(axes, pairs, strict=True):
        for name in (before, after):
            own = records[records.synthesizer == name]
            ax.scatter(
                own["weight"],
                own["lipschitz"],
                s=6,
                alpha=0.6,
                color=COLORS[name],
                label=f"{name} (Delta = {deltas[name]:.2f})",
            )
        ax.axhline(deltas[before], color="red", linestyle="--", label=f"Delta of {before}")
        ax.set_xlabel("record weight alpha")
        ax.set_ylabel("record-level Lipschitz bound")
        ax.set_title(f"{before} vs {after}", fontsize=10)
        ax.legend(loc="lower right", fontsize=8)
    _heading(fig, dataset, "re-weighting (Algorithm 3)", summary)
    return fig


def synthetic_violins(synthetic: pd.DataFrame, summary: pd.DataFrame, dataset: str) -> Figure:
    """One synthetic data set per synthesizer against the data."""
    synthetic = _one(synthetic, dataset)
    names = _present(synthetic, (DATA, *SYNTHESIZERS))
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    groups = [synthetic.loc[synthetic.synthesizer == n, "value"] for n in names]
    _violins(ax, groups, names, _epsilons(summary, dataset))
    ax.set_ylabel("value")
    _heading(fig, dataset, "the data and one synthetic data set per synthesizer", summary)
    return fig


#: The figures of one data set (the workflow's ``figure`` wildcard): each draws from the
#: gathered tables (``records``, ``summary``, ``posterior``, ``utility``, ``synthetic``).
FIGURES = {
    "lipschitz": lambda t, d: lipschitz_violins(t["records"], t["summary"], d),
    "weights": lambda t, d: weight_violins(t["records"], t["summary"], d),
    "utility_quantiles": lambda t, d: utility_violins(
        t["utility"], t["summary"], d, ("q15", "q90")
    ),
    "utility_centre": lambda t, d: utility_violins(
        t["utility"], t["summary"], d, ("mean", "median")
    ),
    "posterior_mu": lambda t, d: posterior_density(t["posterior"], t["summary"], d),
    "reweighting": lambda t, d: reweighting_scatter(t["records"], t["summary"], d),
    "synthetic": lambda t, d: synthetic_violins(t["synthetic"], t["summary"], d),
}


def dataset_figure(kind: str, tables: Mapping[str, pd.DataFrame], dataset: str) -> Figure:
    """Figure ``kind`` (a key of :data:`FIGURES`) of ``dataset`` from the gathered tables."""
    if kind not in FIGURES:
        raise ValueError(f"figure must be one of {list(FIGURES)}, got {kind!r}")
    return FIGURES[kind](tables, dataset)
