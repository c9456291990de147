"""Study 2 (seed 001 sec 3): prior predictive truncation on Pennsylvania strata.

Two scenarios share the code:

* ``pennlc``: the real pennLC strata (county x race x sex x 4 age bands, 2002 lung-cancer
  cases). The one stratum with zero population (and zero cases) is structurally empty
  and public, so it is left out of the release (:func:`release_strata`).
* ``standin``: the synthetic paper-scale stand-in of
  :mod:`dpsynth.data.pennsylvania_standin` (47,034 strata, y. = 26,116).

Prior rates per stratum group play the paper's "national rates" role (:func:`prior_rates`):

* ``noisy`` (default for pennLC): the statewide rates of each prior group, with two-sided
  geometric noise on the group totals (Delta = 2 under move-one-event), released once with
  their own budget eps_prior; the whole release then costs eps_prior + eps by sequential
  composition (:func:`total_epsilon`).
* ``public``: the same statewide rates treated as public invariants (costs nothing *only*
  if they really are published; computed from the confidential counts otherwise).
* ``national``: the stand-in's modelled national rates (the paper's setting).

Utility (seed 001 Figures 3-6) is measured on age-adjusted rates (US 2000 standard,
direct method) of groups of strata: every county, urban and rural counties (urban: county
density above the statewide mean), each race by sex, and configured subgroups.
:class:`AgeAdjuster` turns many synthetic count vectors into all these rates with one
sparse product.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dpsynth.calibration import Calibration
from dpsynth.data.pennsylvania import PENNLC_AGE_BANDS
from dpsynth.data.pennsylvania_standin import STANDIN_AGE_GROUPS
from dpsynth.mechanisms.geometric import SENSITIVITY
from dpsynth.mechanisms.sanitised_prior import noisy_state_rates
from dpsynth.metrics import summarise_draws
from dpsynth.privacy.calibrate import calibrate
from dpsynth.sampling.conditioned import ConditionedSampler
from dpsynth.study.rates import GroupRates

SCENARIOS = ("pennlc", "standin")
#: Study label -> (mechanism, method) of :func:`dpsynth.calibrate`.
MECHANISMS: dict[str, tuple[str, str]] = {
    "untruncated": ("pg", "paper"),
    "truncated_paper": ("truncated", "paper"),
    "truncated_exact": ("truncated", "exact"),
    "truncated_certified": ("truncated", "certified"),
}
#: Strata that share one population (the stand-in repeats it for every cancer type).
POPULATION_KEYS = ("county", "age", "race", "sex")
#: Columns defining the prior groups of each scenario (the paper: age x race x sex x cause).
PRIOR_KEYS = {"pennlc": ("race", "sex", "age"), "standin": ("cancer", "age", "race", "sex")}
PRIOR_MODES = ("noisy", "public", "national")
#: L1 sensitivity of the vector of group totals under move-one-event (module docstring).
PRIOR_SENSITIVITY = SENSITIVITY


# ---- strata and geography ------------------------------------------------------------
def release_strata(strata: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Strata with positive population (the released cells) and how many were left out.

    A stratum without population cannot hold a case; its emptiness is public (the
    populations are), so leaving it out costs no privacy. Raises if such a stratum has
    cases (the input would then be inconsistent).
    """
    empty = strata["population"] <= 0
    if (strata.loc[empty, "cases"] > 0).any():
        raise ValueError("strata with zero population have cases")
    return strata.loc[~empty].reset_index(drop=True), int(empty.sum())


def unit_populations(strata: pd.DataFrame) -> pd.DataFrame:
    """One row per population unit (county x age x race x sex), with its population."""
    keys = [k for k in POPULATION_KEYS if k in strata.columns]
    return strata.drop_duplicates(keys)[[*keys, "population"]]


def county_urban(strata: pd.DataFrame, counties: pd.DataFrame) -> pd.DataFrame:
    """Per county: ``population``, ``land_area``, ``density`` and ``urban``.

    Urban means a density above the statewide mean density (total population over total
    land area), seed 001 sec 3.2's rule. ``counties`` needs ``county`` and ``land_area``.
    """
    for column in ("county", "land_area"):
        if column not in counties.columns:
            raise KeyError(f"counties frame needs a {column!r} column")
    pop = unit_populations(strata).groupby("county", observed=True)["population"].sum()
    area = counties.set_index("county")["land_area"].astype(float)
    missing = sorted(set(pop.index) - set(area.index))
    if missing:
        raise ValueError(f"counties without land area: {missing[:5]}")
    area = area.loc[pop.index]
    out = pd.DataFrame({"population": pop.astype(float), "land_area": area})
    out["density"] = out["population"] / out["land_area"]
    out["urban"] = out["density"] > out["population"].sum() / out["land_area"].sum()
    return out.rename_axis("county").reset_index()


# ---- prior rates ------------------------------------------------------------------------
def prior_group_labels(strata: pd.DataFrame, keys: Sequence[str]) -> np.ndarray:
    """One string label per stratum naming its prior group (e.g. ``"w|f|70+"``)."""
    missing = [k for k in keys if k not in strata.columns]
    if missing:
        raise KeyError(f"strata have no column(s) {missing} for the prior groups")
    return strata[list(keys)].astype(str).agg("|".join, axis=1).to_numpy()


def group_totals(cases, labels) -> pd.Series:
    """Cases per prior group (the statistic the noisy prior releases)."""
    return pd.Series(np.asarray(cases), index=np.asarray(labels)).groupby(level=0).sum()


def prior_rates(
    strata: pd.DataFrame,
    keys: Sequence[str],
    mode: str,
    rng: np.random.Generator | None = None,
    epsilon_prior: float | None = None,
) -> np.ndarray:
    """Per-stratum prior rate lambda0 (per person) under ``mode`` (module docstring).

    ``noisy`` needs ``rng`` and ``epsilon_prior``: the group totals get two-sided geometric
    noise with Delta = 2 (:func:`dpsynth.mechanisms.sanitised_prior.noisy_state_rates`,
    noisy totals below 1/2 raised to 1/2). Each group's population sums its strata,
    which are distinct population units because every prior key set holds age, race and
    sex (and the cancer type for the stand-in).
    """
    if mode not in PRIOR_MODES:
        raise ValueError(f"prior mode must be one of {PRIOR_MODES}, got {mode!r}")
    if mode == "national":
        if "national_rate" not in strata.columns:
            raise KeyError("prior mode 'national' needs a 'national_rate' column (stand-in)")
        return strata["national_rate"].to_numpy(dtype=float)
    labels = prior_group_labels(strata, keys)
    cases = strata["cases"].to_numpy()
    population = strata["population"].to_numpy(dtype=float)
    if mode == "public":
        totals = group_totals(cases, labels)
        pops = group_totals(population, labels)
        return (totals / pops).loc[labels].to_numpy(dtype=float)
    if rng is None or epsilon_prior is None:
        raise ValueError("prior mode 'noisy' needs rng and epsilon_prior")
    return noisy_state_rates(cases, labels, population, epsilon_prior, rng)


def total_epsilon(epsilon: float, mode: str, epsilon_prior: float | None = None) -> float:
    """Budget of the whole release: eps + eps_prior for a noisy prior, else eps."""
    if mode == "noisy":
        if epsilon_prior is None or not epsilon_prior > 0:
            raise ValueError("a noisy prior needs epsilon_prior > 0")
        return float(epsilon) + float(epsilon_prior)
    return float(epsilon)


def age_bands(strata: pd.DataFrame) -> dict[str, tuple[int, int | None]]:
    """The age bands of the strata: pennLC's four or the stand-in's 13 groups."""
    labels = set(strata["age"].astype(str))
    for bands in (PENNLC_AGE_BANDS, STANDIN_AGE_GROUPS):
        if labels <= set(bands):
            return dict(bands)
    raise ValueError(f"unknown age bands {sorted(labels)[:5]}")


# ---- age adjustment ---------------------------------------------------------------------
def AgeAdjuster(strata: pd.DataFrame, weights: pd.Series, groups: Mapping[str, np.ndarray]):
    """Age-adjusted rates (US 2000 standard) of groups of Study 2's strata: a
    :class:`~dpsynth.study.rates.GroupRates` whose population units are county x age x
    race x sex (so the stand-in's cancer types do not multiply the population)."""
    unit_keys = [k for k in POPULATION_KEYS if k in strata.columns]
    return GroupRates(
        strata["population"].to_numpy(dtype=float),
        groups,
        band=strata["age"].astype(str).to_numpy(),
        weights=weights,
        unit=strata[unit_keys].astype(str).agg("|".join, axis=1).to_numpy(),
    )


# ---- groups and metrics -----------------------------------------------------------------
@dataclass(frozen=True)
class Ratio:
    """A metric: the age-adjusted rate of group ``numerator`` over that of ``denominator``."""

    metric: str
    numerator: str
    denominator: str


def _mask(strata: pd.DataFrame, urban: Mapping[str, bool], where: Mapping) -> np.ndarray:
    mask = np.ones(len(strata), dtype=bool)
    for column, value in where.items():
        if column == "urban":
            flags = strata["county"].map(dict(urban)).to_numpy(dtype=bool)
            mask &= flags == bool(value)
        elif column in strata.columns:
            mask &= strata[column].astype(str).to_numpy() == str(value)
        else:
            raise KeyError(f"subgroup filter on unknown column {column!r}")
    if not mask.any():
        raise ValueError(f"no strata match {dict(where)}")
    return mask


def study_groups(
    strata: pd.DataFrame,
    urban: Mapping[str, bool],
    race_comparison: Mapping[str, str],
    subgroups: Sequence[Mapping] = (),
) -> tuple[dict[str, np.ndarray], list[Ratio]]:
    """The groups whose age-adjusted rates Study 2 tracks, and the ratio metrics.

    Groups: ``state``, ``county:<name>`` for every county, ``urban``, ``rural``, the
    race comparison's numerator and denominator by sex, and each subgroup's two sides.
    Ratios: ``ratio_urban_rural``, ``ratio_race_female``, ``ratio_race_male`` and
    ``ratio_<subgroup name>``. A subgroup is ``{name, where: {column: value},
    numerator: {column: value}, denominator: {column: value}}``; ``where`` may use the key
    ``urban`` (true/false).
    """
    groups: dict[str, np.ndarray] = {"state": np.ones(len(strata), dtype=bool)}
    for county in sorted(strata["county"].unique()):
        groups[f"county:{county}"] = strata["county"].to_numpy() == county
    groups["urban"] = _mask(strata, urban, {"urban": True})
    groups["rural"] = _mask(strata, urban, {"urban": False})
    ratios = [Ratio("ratio_urban_rural", "urban", "rural")]
    num, den = race_comparison["numerator"], race_comparison["denominator"]
    for sex, label in (("f", "female"), ("m", "male")):
        groups[f"race_{num}_{sex}"] = _mask(strata, urban, {"race": num, "sex": sex})
        groups[f"race_{den}_{sex}"] = _mask(strata, urban, {"race": den, "sex": sex})
        ratios.append(Ratio(f"ratio_race_{label}", f"race_{num}_{sex}", f"race_{den}_{sex}"))
    for spec in subgroups:
        name = spec["name"]
        where = dict(spec.get("where", {}))
        groups[f"{name}:num"] = _mask(strata, urban, {**where, **spec["numerator"]})
        groups[f"{name}:den"] = _mask(strata, urban, {**where, **spec["denominator"]})
        ratios.append(Ratio(f"ratio_{name}", f"{name}:num", f"{name}:den"))
    return groups, ratios


def metric_values(adjuster: AgeAdjuster, ratios: Sequence[Ratio], counts) -> pd.DataFrame:
    """One row per count vector: ``aar_state``, ``aar_urban``, ``aar_rural`` and every ratio."""
    rates = np.atleast_2d(adjuster.rates(counts))
    index = {name: k for k, name in enumerate(adjuster.names)}
    out = {f"aar_{g}": rates[:, index[g]] for g in ("state", "urban", "rural")}
    with np.errstate(divide="ignore", invalid="ignore"):
        for ratio in ratios:
            out[ratio.metric] = (
                rates[:, index[ratio.numerator]] / rates[:, index[ratio.denominator]]
            )
    return pd.DataFrame(out)


def county_values(adjuster: AgeAdjuster, counts) -> pd.DataFrame:
    """Age-adjusted rate per county (columns named by county), one row per count vector."""
    rates = np.atleast_2d(adjuster.rates(counts))
    cols = [k for k, name in enumerate(adjuster.names) if name.startswith("county:")]
    return pd.DataFrame(rates[:, cols], columns=[adjuster.names[k][7:] for k in cols])


# ---- calibrations -----------------------------------------------------------------------
def study_calibration(
    label: str,
    epsilon: float,
    strata: pd.DataFrame,
    *,
    tail: float | None = None,
    inflation: float = 1.0,
) -> Calibration:
    """The calibration of study mechanism ``label`` at ``epsilon`` (public inputs only:
    the total, the populations and ``strata['prior_rate']``). ``tail`` None means 1/I."""
    if label not in MECHANISMS:
        raise ValueError(f"mechanism must be one of {list(MECHANISMS)}, got {label!r}")
    mechanism, method = MECHANISMS[label]
    total = int(strata["cases"].sum())  # y. is public; the counts themselves are not used
    population = strata["population"].to_numpy(dtype=float)
    prior = strata["prior_rate"].to_numpy(dtype=float)
    if mechanism == "pg":
        return calibrate(mechanism, epsilon, total, population, prior, method=method)
    tail = 1.0 / len(strata) if tail is None else tail
    return calibrate(
        mechanism, epsilon, total, population, prior, method=method, tail=tail,
        inflation=inflation,
    )  # fmt: skip


CALIBRATION_COLUMNS = [
    "mechanism", "epsilon", "cell", "a", "b", "lower", "upper", "population", "prior_rate",
    "total", "tail", "inflation",
]  # fmt: skip


def calibration_frame(cal: Calibration, label: str) -> pd.DataFrame:
    """The published hyperparameters: one row per stratum with epsilon, a, b, lower, upper
    (untruncated: 0 and y.), population, prior_rate."""
    lower, upper = cal.bounds()
    return pd.DataFrame(
        {
            "mechanism": label,
            "epsilon": cal.epsilon,
            "cell": np.arange(cal.n_cells),
            "a": cal.a,
            "b": cal.b,
            "lower": lower,
            "upper": upper,
            "population": cal.population,
            "prior_rate": cal.prior_rate,
            "total": cal.total,
            "tail": np.nan if cal.tail is None else cal.tail,
            "inflation": cal.inflation,
        }
    )


def calibration_from_frame(frame: pd.DataFrame, label: str, epsilon: float) -> Calibration:
    """Rebuild the :class:`Calibration` of ``label`` at ``epsilon`` from a published frame."""
    rows = frame[(frame["mechanism"] == label) & np.isclose(frame["epsilon"], epsilon, rtol=1e-12)]
    if rows.empty:
        raise KeyError(f"no calibration of {label!r} at epsilon={epsilon} in the frame")
    rows = rows.sort_values("cell")
    mechanism, method = MECHANISMS[label]
    truncated = mechanism == "truncated"
    return Calibration(
        mechanism,
        method,
        float(rows["epsilon"].iloc[0]),
        int(rows["total"].iloc[0]),
        rows["a"].to_numpy(),
        rows["b"].to_numpy(),
        rows["population"].to_numpy(),
        rows["prior_rate"].to_numpy(),
        rows["lower"].to_numpy() if truncated else None,
        rows["upper"].to_numpy() if truncated else None,
        tail=float(rows["tail"].iloc[0]) if truncated else None,
        inflation=float(rows["inflation"].iloc[0]),
    )


def shape_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Distribution of a across strata per (mechanism, epsilon): rows of the summary with
    metrics ``a_median`` (lower/upper: 2.5% and 97.5% quantiles), ``a_max`` and ``a_min``."""
    rows = []
    for (label, eps), group in frame.groupby(["mechanism", "epsilon"], sort=True):
        a = group["a"].to_numpy()
        lo, med, hi = np.quantile(a, [0.025, 0.5, 0.975])
        rows.append((label, eps, "a_median", med, lo, hi))
        rows.append((label, eps, "a_max", a.max(), a.max(), a.max()))
        rows.append((label, eps, "a_min", a.min(), a.min(), a.min()))
    return pd.DataFrame(
        rows, columns=["mechanism", "epsilon", "metric", "median", "lower", "upper"]
    )


def truth_outside_bounds(frame: pd.DataFrame, cases) -> pd.DataFrame:
    """How many true counts fall outside [L, U] per (mechanism, epsilon): metric
    ``n_truth_outside_bounds`` (allowed, but a sign of poor prior information)."""
    cases = np.asarray(cases)
    rows = []
    for (label, eps), group in frame.groupby(["mechanism", "epsilon"], sort=True):
        group = group.sort_values("cell")
        y = cases[group["cell"].to_numpy()]
        n_out = float(np.sum((y < group["lower"].to_numpy()) | (y > group["upper"].to_numpy())))
        rows.append((label, eps, "n_truth_outside_bounds", n_out, n_out, n_out))
    return pd.DataFrame(
        rows, columns=["mechanism", "epsilon", "metric", "median", "lower", "upper"]
    )


# ---- synthesis --------------------------------------------------------------------------
def simulate(
    y,
    cal: Calibration,
    adjuster: AgeAdjuster,
    ratios: Sequence[Ratio],
    n_datasets: int,
    rng: np.random.Generator,
    *,
    batch: int = 100,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Draw ``n_datasets`` synthetic vectors for ``y`` under ``cal`` and measure each.

    Returns two frames with one row per dataset: the metrics of :func:`metric_values`
    plus ``n_outside_bounds`` (synthetic counts outside [L, U]; must be 0), and the county
    age-adjusted rates. The exact sampler is built once; draws come ``batch`` at a time,
    so memory holds ``batch`` x I counts, never n_datasets x I.
    """
    if n_datasets < 1 or batch < 1:
        raise ValueError("n_datasets and batch must be positive")
    sampler = ConditionedSampler(y, cal)
    lower, upper = cal.bounds()
    metrics, counties = [], []
    for start in range(0, n_datasets, batch):
        z = sampler.draw(min(batch, n_datasets - start), rng)
        values = metric_values(adjuster, ratios, z)
        values["n_outside_bounds"] = np.sum((z < lower) | (z > upper), axis=1).astype(float)
        metrics.append(values)
        counties.append(county_values(adjuster, z))
    return pd.concat(metrics, ignore_index=True), pd.concat(counties, ignore_index=True)


# ---- summaries --------------------------------------------------------------------------
SUMMARY_COLUMNS = ["scenario", "mechanism", "epsilon", "metric", "median", "lower", "upper"]


def reference_rows(values: pd.DataFrame, label: str) -> pd.DataFrame:
    """Rows of a reference (``truth`` or ``prior``) from a one-row metric frame."""
    long = values.iloc[[0]].melt(var_name="metric", value_name="median")
    long["lower"] = long["median"]
    long["upper"] = long["median"]
    long.insert(0, "epsilon", np.nan)
    long.insert(0, "mechanism", label)
    return long


def load_study(strata_path, counties_path, standard_path, race_comparison, subgroups=()):
    """Strata, the :class:`AgeAdjuster` of the study's groups and the ratio metrics, from
    the workflow's strata and county files and the standard population table."""
    from dpsynth.data.standard_population import load_standard_population, standard_weights

    strata = pd.read_parquet(strata_path)
    counties = pd.read_parquet(counties_path)
    urban = dict(zip(counties["county"], counties["urban"].astype(bool), strict=True))
    weights = standard_weights(load_standard_population(standard_path), age_bands(strata))
    groups, ratios = study_groups(strata, urban, race_comparison, subgroups)
    return strata, AgeAdjuster(strata, weights, groups), ratios


def summarise_scenario(
    scenario: str,
    strata: pd.DataFrame,
    adjuster: AgeAdjuster,
    ratios: Sequence[Ratio],
    *,
    metrics: pd.DataFrame,
    counties: pd.DataFrame,
    calibrations: pd.DataFrame,
    status: pd.DataFrame,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The scenario's summary rows (:data:`SUMMARY_COLUMNS`) and county rates.

    Summary: median and 95% band over the datasets of every metric per (mechanism,
    epsilon); ``truth`` rows (the confidential counts) and ``prior`` rows (the expected
    counts n * lambda0); the distribution of a (:func:`shape_summary`); true counts outside
    the bounds; ``calibration_failed`` per calibration (timings stay in the job logs, so
    the artifacts are the same bytes on every run).
    County rates: ``mechanism, epsilon, county, mean, median, lower, upper``, with the
    truth and the prior as mechanisms ``truth`` and ``prior``.
    """
    y = strata["cases"].to_numpy()
    expected = (strata["population"] * strata["prior_rate"]).to_numpy()
    parts = []
    if len(metrics):
        value_columns = [c for c in metrics.columns if c not in ("mechanism", "epsilon", "dataset")]
        parts.append(summarise_draws(metrics, ["mechanism", "epsilon"], value_columns))
    parts.append(reference_rows(metric_values(adjuster, ratios, y), "truth"))
    parts.append(reference_rows(metric_values(adjuster, ratios, expected), "prior"))
    if len(calibrations):
        parts.append(shape_summary(calibrations))
        parts.append(truth_outside_bounds(calibrations, y))
    if len(status):
        failed = 1.0 - status["ok"].astype(float)
        parts.append(
            pd.DataFrame(
                {
                    "mechanism": status["mechanism"],
                    "epsilon": status["epsilon"],
                    "metric": "calibration_failed",
                    "median": failed,
                    "lower": failed,
                    "upper": failed,
                }
            )
        )
    summary = pd.concat(parts, ignore_index=True)
    summary.insert(0, "scenario", scenario)
    summary = summary[SUMMARY_COLUMNS]

    rate_parts = []
    if len(counties):
        county_cols = [c for c in counties.columns if c not in ("mechanism", "epsilon", "dataset")]
        long = counties.melt(
            id_vars=["mechanism", "epsilon"], value_vars=county_cols, var_name="county"
        )
        grouped = long.groupby(["mechanism", "epsilon", "county"], sort=True)["value"]
        stats = grouped.quantile([0.5, 0.025, 0.975]).unstack()
        stats.columns = ["median", "lower", "upper"]
        stats.insert(0, "mean", grouped.mean())
        rate_parts.append(stats.reset_index())
    for label, counts in (("truth", y), ("prior", expected)):
        values = county_values(adjuster, counts).iloc[0]
        rate_parts.append(
            pd.DataFrame(
                {
                    "mechanism": label,
                    "epsilon": np.nan,
                    "county": values.index,
                    "mean": values.to_numpy(),
                    "median": values.to_numpy(),
                    "lower": values.to_numpy(),
                    "upper": values.to_numpy(),
                }
            )  # fmt: skip
        )
    county_rates = pd.concat(rate_parts, ignore_index=True)
    county_rates.insert(0, "scenario", scenario)
    return summary, county_rates
