"""Figures of Hu, Savitsky and Williams (2020): the vector-weighted pseudo-posterior
synthesizers, one data set each.

Every function takes the aggregated tables of ``results/pseudo_posterior/`` and returns a
matplotlib ``Figure`` (built without pyplot, so no global backend state is touched).
Distributions (of counts, which are whole numbers, and of weights, which may all be
equal) are drawn as empirical distribution functions, one step line per synthesizer: a
step at each value, no smoothing that would put mass between whole numbers or hide a
distribution of one value.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from dpcounts.plots.style import DELTA_TEXT, EPSILON_TEXT, delta_equals, eps_equals, human, styled
from dpcounts.studies.pseudo_posterior.names import DATA, SYNTHESIZERS

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


#: Line widths of the step lines: the data widest, under the synthesizers.
WIDTHS = {DATA: 3.0}
# Greek letters as plain characters in the body font: these figures' many labels are
# drawn without mathtext's parser (which took much of the figure job's time).
ALPHA = "\N{GREEK SMALL LETTER ALPHA}"
MU = "\N{GREEK SMALL LETTER MU}"
EPSILON_2_DELTA = f"{EPSILON_TEXT} = 2{DELTA_TEXT}"


def synthesizer_label(name: str, epsilons: dict[str, float]) -> str:
    """``LW final (eps = 7.1)``: a synthesizer (or the data) with its guarantee."""
    label = "the data" if name == DATA else human(name)
    if name not in epsilons:
        return label
    return f"{label} ({eps_equals(epsilons[name], '.1f', plain=True)})"


def _heading(fig: Figure, dataset: str, what: str, summary: pd.DataFrame) -> None:
    """Title: the data set and what is shown; below it, the guarantee being compared."""
    own = _one(summary, dataset).set_index("synthesizer")
    line = (f"each synthesizer is {EPSILON_TEXT}-DP with {EPSILON_2_DELTA}, {DELTA_TEXT} its "
            "overall Lipschitz bound")  # fmt: skip
    if "LW" in own.index:
        tuned = delta_equals(float(own.at["LW", "delta"]), plain=True)
        line += f";\nweighted ones tuned to LW's {tuned}"
    fig.suptitle(f"{dataset_title(dataset)}: {what}\n{line}", fontsize=10)


def _present(frame: pd.DataFrame, order=SYNTHESIZERS) -> list[str]:
    names = set(frame["synthesizer"])
    return [name for name in order if name in names]


def _distributions(ax, groups: list[np.ndarray], labels: list[str], epsilons=None) -> None:
    """Each synthesizer's values as an empirical distribution function (steps; the data
    widest), labelled with its epsilon where ``epsilons`` knows it; the figure's legend
    (:func:`_legend`) names them."""
    for values, name in zip(groups, labels, strict=True):
        values = np.asarray(values, dtype=float)
        if values.size == 0:
            continue
        ax.ecdf(values, color=COLORS.get(name, "tab:gray"), lw=WIDTHS.get(name, 1.4),
                label=synthesizer_label(name, epsilons or {}))  # fmt: skip
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("share of values at most x")


def _legend(fig: Figure, ax) -> None:
    """One legend for the figure, below the panels: it covers no line and no title."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 4), fontsize=8)


def _one(frame: pd.DataFrame, dataset: str) -> pd.DataFrame:
    subset = frame[frame["dataset"] == dataset]
    if subset.empty:
        raise ValueError(f"no rows of data set {dataset!r}")
    return subset


@styled
def lipschitz_violins(records: pd.DataFrame, summary: pd.DataFrame, dataset: str) -> Figure:
    """Record-level Lipschitz bounds by synthesizer (distribution functions); the dotted
    line is LW's Delta."""
    records, summary = _one(records, dataset), _one(summary, dataset)
    names = _present(records)
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    groups = [records.loc[records.synthesizer == n, "lipschitz"] for n in names]
    delta = summary.set_index("synthesizer").at["LW", "delta"]
    ax.axvline(delta, color="red", linestyle=":", label=f"LW's {delta_equals(delta, plain=True)}")
    _distributions(ax, groups, names, _epsilons(summary, dataset))
    ax.set_xlabel("record-level Lipschitz bound x")
    _legend(fig, ax)
    _heading(fig, dataset, "record-level Lipschitz bounds", summary)
    return fig


@styled
def weight_violins(records: pd.DataFrame, summary: pd.DataFrame, dataset: str) -> Figure:
    """Each weighted synthesizer's record weights (distribution functions: SW's, all
    equal, is one step)."""
    records = _one(records, dataset)
    names = [n for n in _present(records) if n != "unweighted"]
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    groups = [records.loc[records.synthesizer == n, "weight"] for n in names]
    _distributions(ax, groups, names, _epsilons(summary, dataset))
    ax.set_xlim(-0.03, 1.03)
    ax.set_xlabel(f"record weight {ALPHA} = x")
    _legend(fig, ax)
    _heading(fig, dataset, "record weights", summary)
    return fig


@styled
def utility_violins(
    utility: pd.DataFrame, summary: pd.DataFrame, dataset: str, statistics: tuple[str, ...]
) -> Figure:
    """Each statistic over the synthetic data sets (distribution functions); the dashed
    line is the data's value."""
    utility = _one(utility, dataset)
    names = _present(utility)
    fig = Figure(figsize=(5.5 * len(statistics), 4.2), layout="constrained")
    axes = fig.subplots(1, len(statistics), squeeze=False)[0]
    data = utility[utility.synthesizer == DATA].iloc[0]
    for ax, stat in zip(axes, statistics, strict=True):
        groups = [utility.loc[utility.synthesizer == n, stat] for n in names]
        ax.axvline(data[stat], color="black", linestyle="--", label="the data's value")
        _distributions(ax, groups, names, _epsilons(summary, dataset))
        ax.set_title(f"{STAT_LABELS[stat]} (the data's: {data[stat]:.2f})", fontsize=10)
        ax.set_xlabel(f"{STAT_LABELS[stat]} x of a synthetic data set")
    _legend(fig, axes[0])
    what = " and ".join(STAT_LABELS[stat] for stat in statistics) + " of the synthetic data sets"
    _heading(fig, dataset, what, summary)
    return fig


@styled
def posterior_density(posterior: pd.DataFrame, summary: pd.DataFrame, dataset: str) -> Figure:
    """Posterior density of the mean parameter mu by synthesizer."""
    from scipy.stats import gaussian_kde  # here: the other figures' jobs need no scipy

    posterior = _one(posterior, dataset)
    epsilons = _epsilons(summary, dataset)
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    for name in _present(posterior):
        mu = posterior.loc[posterior.synthesizer == name, "mu"].to_numpy()
        grid = np.linspace(mu.min(), mu.max(), 200)
        label = synthesizer_label(name, epsilons)
        ax.plot(grid, gaussian_kde(mu)(grid), color=COLORS[name], label=label)
    ax.set_xlabel(f"{MU} (mean parameter)")
    ax.set_ylabel("posterior density")
    _heading(fig, dataset, f"pseudo-posterior of the mean {MU}", summary)
    ax.legend(fontsize=8)
    return fig


@styled
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
                label=f"{human(name)} ({delta_equals(deltas[name], plain=True)})",
            )
        ax.axhline(deltas[before], color="red", linestyle="--", label=f"{DELTA_TEXT} of {before}")
        ax.set_xlabel(f"record weight {ALPHA}")
        ax.set_ylabel("record-level Lipschitz bound")
        ax.set_title(f"{before} vs {human(after)}", fontsize=10)
        ax.legend(loc="lower right", fontsize=8)
    _heading(fig, dataset, "re-weighting (Algorithm 3)", summary)
    return fig


@styled
def synthetic_violins(synthetic: pd.DataFrame, summary: pd.DataFrame, dataset: str) -> Figure:
    """One synthetic data set per synthesizer against the data (distribution functions of
    the counts: steps at whole numbers)."""
    synthetic = _one(synthetic, dataset)
    names = _present(synthetic, (DATA, *SYNTHESIZERS))
    fig = Figure(figsize=(7, 4), layout="constrained")
    ax = fig.add_subplot()
    groups = [synthetic.loc[synthetic.synthesizer == n, "value"] for n in names]
    _distributions(ax, groups, names, _epsilons(summary, dataset))
    ax.set_xlabel("count x")
    _legend(fig, ax)
    _heading(fig, dataset, "the data and one synthetic data set per synthesizer", summary)
    return fig


#: The figures of one data set (the workflow's output names): each draws from the
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


def dataset_figures(tables: Mapping[str, pd.DataFrame], dataset: str) -> dict[str, Figure]:
    """Every figure of ``dataset`` by kind (:data:`FIGURES`' order), from the gathered tables:
    one process draws them all, each as :func:`dataset_figure` draws it alone."""
    return {kind: dataset_figure(kind, tables, dataset) for kind in FIGURES}
