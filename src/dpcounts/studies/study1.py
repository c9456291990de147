"""Study 1 (Quick (2021), Section 3): score each arm on the datasets of one scenario.

One call of :func:`score_datasets` is one unit of work: a scenario, an arm, a chunk of
epsilons and a chunk of datasets. For every dataset and epsilon it draws one vector of
posterior rates (the paper's utility proxy: lambda for PG, theta y./n for MD; noisy counts
over n for the geometric baseline) and records the rMSE and the group rates.

The arms (:data:`ARMS`, :class:`dpcounts.arms.Arm` values; their names fill the ``arm``
column of the artifacts and the config's ``study1.arms``):

- ``md``: multinomial-Dirichlet, alpha = y./(e^eps - 1).
- ``pg_national`` / ``pg_state``: Poisson-gamma smoothing toward the national rate or the
  state rates (state rates of the truth, treated as public), paper calibration (eq 15).
- ``pg_national_certified`` / ``pg_state_certified``: the same with the certified
  calibration (holds for any number of cells and prior rates; docs/privacy.md).
- ``pg_state_sanitised``: state prior rates released with geometric noise on the state
  totals (eq 19), eps = eps_prior + eps_synth, the synthesis step calibrated by eq 15.
- ``geometric``: two-sided geometric output perturbation, post-processed to non-negative
  counts summing to y..

:class:`Study1Design` is the study's design built from the config
(:meth:`Study1Design.from_config`): its arms, epsilon grid, map epsilons and job
chunks, so that the workflow never computes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from dpcounts.arms import Arm, arm_named, mechanism_title
from dpcounts.baselines.geometric import geometric_release_each
from dpcounts.data.scenarios import Scenario, draw_datasets, make_scenario
from dpcounts.design import at_epsilon, chunk_labels, chunk_members, grid_from_config
from dpcounts.mechanisms import registry
from dpcounts.privacy.calibrate import calibrate
from dpcounts.privacy.sanitised_prior import StateGroups, check_prior_share
from dpcounts.sampling.bounds import count_values
from dpcounts.sampling.synthesize import posterior_rates_per_dataset
from dpcounts.seeding import job_rng
from dpcounts.studies.metrics import BAND_COLUMNS, group_rate_per_100k, pooled_mean, rmse_per_100k

#: Study 1's arms, in the order of the figures' legends (``title``: the legend's text; MD
#: and the baseline read as in every figure, :func:`dpcounts.arms.arm_title`):
#: Quick (2021), Section 3's MD and PG with national and state priors, the sanitised state
#: prior of its eq 19, and the certified calibrations and the geometric baseline we add.
ARMS = (
    Arm("md", "paper", "md", title=mechanism_title("md", "paper")),
    Arm("pg", "paper", "pg_national", "national", "PG, national prior"),
    Arm("pg", "paper", "pg_state", "state", "PG, state prior"),
    Arm("pg", "certified", "pg_national_certified", "national",
        "PG, national prior (certified)"),
    Arm("pg", "certified", "pg_state_certified", "state", "PG, state prior (certified)"),
    Arm("pg", "paper", "pg_state_sanitised", "sanitised", "PG, sanitised state prior"),
    Arm("geometric", None, "geometric"),
)  # fmt: skip
#: The arms' names (the values of the artifacts' ``arm`` column).
ARM_NAMES = tuple(arm.name for arm in ARMS)
METRICS = (
    "rmse",
    "rate_urban",
    "rate_rural",
    "ratio_urban_rural",
    "rate_nm",
    "rate_ny",
    "ratio_nm_ny",
)


@dataclass(frozen=True)
class Geography:
    """Public county attributes the metrics and the state prior need (county order)."""

    state: np.ndarray  # postal abbreviation per county
    urban: np.ndarray  # bool: modelled 35+ population above the urban threshold

    @cached_property
    def state_codes(self) -> np.ndarray:
        """Each county's state as an integer, in the sorted order of the postal codes."""
        return np.unique(self.state, return_inverse=True)[1].reshape(-1)

    @cached_property
    def groups(self) -> dict[str, np.ndarray]:
        """The county groups of the metrics (bool masks): urban, rural, NM and NY."""
        state = np.asarray(self.state)
        return {"urban": self.urban, "rural": ~self.urban, "nm": state == "NM",
                "ny": state == "NY"}  # fmt: skip

    def state_rates(self, population, rate) -> np.ndarray:
        """Each county's state rate sum n lambda / sum n over its state (per person)."""
        frame = pd.DataFrame({"state": self.state, "events": population * rate, "n": population})
        totals = frame.groupby("state")[["events", "n"]].transform("sum")
        return (totals["events"] / totals["n"]).to_numpy()


def group_metrics(rates: np.ndarray, scenario: Scenario, geo: Geography) -> dict[str, np.ndarray]:
    """Every metric of Study 1 for a batch of rate vectors (rows), per 100,000."""
    n = scenario.population
    urban, rural, nm, ny = (group_rate_per_100k(rates, n, geo.groups[name])
                            for name in ("urban", "rural", "nm", "ny"))  # fmt: skip
    return {
        "rmse": rmse_per_100k(rates, scenario.rate),
        "rate_urban": urban,
        "rate_rural": rural,
        "ratio_urban_rural": _ratio(urban, rural),
        "rate_nm": nm,
        "rate_ny": ny,
        "ratio_nm_ny": _ratio(nm, ny),
    }


def _ratio(numerator, denominator) -> np.ndarray:
    """numerator / denominator, NaN where the denominator is 0 (a group with no events;
    the geometric baseline produces these at small epsilon). Summaries skip NaN."""
    numerator, denominator = np.broadcast_arrays(numerator, denominator)
    out = np.full(numerator.shape, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def truth_metrics(scenario: Scenario, geo: Geography) -> dict[str, float]:
    """The metrics of the true rates (rMSE 0 by definition)."""
    return {k: float(v[0]) for k, v in group_metrics(scenario.rate[None, :], scenario, geo).items()}


def study1_arm(arm: Arm | str) -> Arm:
    """One of :data:`ARMS`, or the arm of that name."""
    return arm if isinstance(arm, Arm) else arm_named(ARMS, arm)


def study1_calibration(arm: Arm, epsilon: float, scenario: Scenario, state_prior):
    """The data-independent calibration of an arm that has one (``state_prior``: the
    state rates of the truth, used by the arms with the ``state`` prior; the ``national``
    prior is calibrate's default, y. / sum n in every county)."""
    prior = state_prior if arm.prior == "state" else None  # md has no prior
    return calibrate(arm.mechanism, epsilon, scenario.total, scenario.population, prior,
                     method=arm.method)  # fmt: skip


def _checked_rows(datasets: np.ndarray, population: np.ndarray) -> np.ndarray:
    """The datasets as int64 rows of non-negative integers (posterior_rates' checks of
    each row, made once; every row is checked against its own total), and the populations
    positive."""
    if datasets.ndim != 2 or datasets.shape[1] != population.size:
        raise ValueError(f"datasets must be rows of {population.size} counts, got {datasets.shape}")
    counts = count_values(datasets)
    if np.any(population <= 0):
        raise ValueError("cal.population must be positive in every cell")
    return counts


def _sanitised_rates(counts, states, population, arm, epsilon, epsilon_prior, rng):
    """One draw of the posterior rates of each dataset (row of ``counts``, checked once)
    with its own sanitised state prior: the noisy prior depends on the data, so each row
    has its own calibration at epsilon - epsilon_prior. The prior noise of every row is
    drawn first (one call), then the rates of every row (one gamma call)."""
    check_prior_share(epsilon, epsilon_prior)
    prior = states.noisy_rates(counts, epsilon_prior, rng)
    totals = counts.sum(axis=1)
    rows = registry.family(arm.mechanism).calibrate_rows.get(arm.method)
    if rows is not None:  # the family's calibration of every row, bit for bit, in one pass
        a, b = rows(epsilon - epsilon_prior, totals, population, prior)
        if not np.all(np.isfinite(a) & (a > 0)):
            raise ValueError(f"epsilon {epsilon:g} is too large for {arm.mechanism}/"
                             f"{arm.method}: the shapes a underflow to 0")  # fmt: skip
        shapes, rates = counts + a, population + b
    else:
        cals = [
            calibrate(arm.mechanism, epsilon - epsilon_prior, int(total), population, rates,
                      method=arm.method)
            for total, rates in zip(totals, prior, strict=True)
        ]  # fmt: skip
        shapes = np.stack([cal.clamp(y) + cal.a for cal, y in zip(cals, counts, strict=True)])
        rates = np.stack([population + cal.b for cal in cals])
    return rng.gamma(shapes, 1.0 / rates)


def score_datasets(
    scenario: Scenario,
    geo: Geography,
    datasets: np.ndarray,
    dataset_ids: np.ndarray,
    arm: Arm | str,
    epsilons,
    rng: np.random.Generator,
    *,
    prior_budget_fraction: float,
    map_epsilons=(),
    calibrations: dict | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Score ``arm`` (one of :data:`ARMS`, or its name) on ``datasets`` (rows) at each
    epsilon.

    ``prior_budget_fraction`` is the share of each epsilon the sanitised state prior spends
    (config ``study1.prior_budget_fraction``; unused by the other arms). Returns the long
    frame ``dataset, epsilon, metric, value`` and, for the epsilons in
    ``map_epsilons`` (found by label), the per-county sums of the rate draws over these
    datasets (``epsilon, county, rate_sum, count``) from which the workflow maps mean rates.

    ``calibrations`` (optional, a dict the caller keeps for this scenario) stores the
    data-independent calibrations by ``(arm name, epsilon)``, so that the chunks of one
    scenario compute each once; it changes no draw.
    """
    if not isinstance(arm, Arm) and arm not in ARM_NAMES:
        raise ValueError(f"arm must be one of {ARM_NAMES}, got {arm!r}")
    arm = study1_arm(arm)
    datasets = np.asarray(datasets)
    dataset_ids = np.asarray(dataset_ids)
    n = scenario.population
    state_prior = geo.state_rates(n, scenario.rate) if arm.prior == "state" else None
    states = StateGroups.of(geo.state_codes, n) if arm.prior == "sanitised" else None
    counts = _checked_rows(datasets, n) if arm.prior == "sanitised" else None
    epsilons = [float(epsilon) for epsilon in epsilons]
    mapped = at_epsilon(epsilons, list(map_epsilons))
    values, sums = [], []
    for epsilon, is_mapped in zip(epsilons, mapped, strict=True):
        if arm.baseline:
            rates = geometric_release_each(datasets, epsilon, rng) / n
        elif arm.prior == "sanitised":
            rates = _sanitised_rates(
                counts, states, n, arm, epsilon, prior_budget_fraction * epsilon, rng
            )
        else:
            # Calibrations are data-independent: one per epsilon, shared by every dataset.
            # A calibration is immutable: the chunks of a scenario can share it.
            key = (arm.name, epsilon)
            cal = calibrations.get(key) if calibrations is not None else None
            if cal is None:
                cal = study1_calibration(arm, epsilon, scenario, state_prior)
                if calibrations is not None:
                    calibrations[key] = cal
            rates = posterior_rates_per_dataset(datasets, cal, rng)
        metrics = group_metrics(rates, scenario, geo)
        values.extend(metrics[metric] for metric in METRICS)
        if is_mapped:
            sums.append((epsilon, rates.sum(axis=0)))
    # long frame: epsilon, then metric, then dataset (the order of the loops above)
    size = dataset_ids.size
    scores = pd.DataFrame(
        {
            "dataset": np.tile(dataset_ids, len(values)),
            "epsilon": np.repeat(epsilons, len(METRICS) * size),
            "metric": np.tile(np.repeat(np.array(METRICS, dtype=object), size), len(epsilons)),
            "value": np.concatenate(values) if values else np.array([], dtype=float),
        }
    )
    if not sums:
        return scores, pd.DataFrame(columns=["epsilon", "county", "rate_sum", "count"])
    county_sums = pd.DataFrame(
        {
            "epsilon": np.repeat([e for e, _ in sums], n.size),
            "county": np.tile(np.arange(n.size), len(sums)),
            "rate_sum": np.concatenate([s for _, s in sums]),
            "count": len(datasets),
        }
    )
    return scores, county_sums


# --- artifacts ----------------------------------------------------------------------------
def scenario_frame(
    number: int, counties: pd.DataFrame, truth: pd.DataFrame, over_35, urban_threshold
) -> pd.DataFrame:
    """Scenario ``number``'s artifact: ``scenario, fips, state, urban, population, rate,
    total`` in the county frame's order.

    ``truth`` has ``fips, population, rate, expected`` (the true rates of the run's age
    group); ``over_35`` is each county's 35+ population, whose excess over
    ``urban_threshold`` makes a county urban; y. is the rounded sum of ``expected``.
    """
    truth = truth.set_index("fips").loc[counties["fips"]]
    total = int(round(truth["expected"].sum()))
    scenario = make_scenario(int(number), truth["population"], truth["rate"], total)
    return pd.DataFrame(
        {
            "scenario": scenario.number,
            "fips": counties["fips"].to_numpy(),
            "state": counties["state"].to_numpy(),
            "urban": np.asarray(over_35) > urban_threshold,
            "population": scenario.population,
            "rate": scenario.rate,
            "total": total,
        }
    )


def run_rng(seed: int, run_labels, *labels) -> np.random.Generator:
    """The generator of one unit of a Study-1 run: ``job_rng(seed, "study1", *run_labels,
    *labels)``; ``run_labels`` is empty for 35-44 (its historical key) and ``("appendix_c",
    <age group>)`` for an older group. Units: ``("datasets", scenario)`` and ``("score",
    scenario, arm name, chunk)``: each has its own stream however jobs group them."""
    return job_rng(seed, "study1", *run_labels, *labels)


def datasets_frame(scenario: Scenario, n_datasets: int, rng) -> pd.DataFrame:
    """The L datasets y ~ Mult(y., n lambda / sum n lambda), long: ``dataset, county, count``."""
    return datasets_long(draw_datasets(scenario, n_datasets, rng))


def datasets_long(y) -> pd.DataFrame:
    """Datasets (rows of counts) as the long artifact ``dataset, county, count``."""
    y = np.asarray(y)
    n_sets, n_cells = y.shape
    return pd.DataFrame(
        {
            "dataset": np.repeat(np.arange(n_sets), n_cells),
            "county": np.tile(np.arange(n_cells), n_sets),
            "count": y.ravel(),
        }
    )


@dataclass(frozen=True)
class Study1Design:
    """Study 1's design (config ``study1``): its arms, the epsilon grid (the log-spaced
    grid plus the map epsilons, 6 significant digits), L, how scoring is chunked (the units
    of random streams), the map epsilons and the sanitised prior's share of epsilon. Built
    from the config by :meth:`from_config`; the workflow passes it along unopened."""

    arms: tuple
    epsilons: tuple
    epsilons_per_job: int
    datasets: int
    datasets_per_job: int
    prior_budget_fraction: float
    map_epsilons: tuple = ()

    #: The config keys of ``study1`` a design is made of (:meth:`from_config`).
    KEYS = ("arms", "epsilons", "map_epsilons", "epsilons_per_job", "datasets",
            "datasets_per_job", "prior_budget_fraction")  # fmt: skip

    @classmethod
    def from_config(cls, study1) -> Study1Design:
        """The design of the config's ``study1`` entry (defaults filled by the schema):
        ``arms`` names the arms (:data:`ARMS`), ``epsilons`` is ``{start, stop,
        num}``."""
        epsilons, map_epsilons = grid_from_config(study1["epsilons"], study1["map_epsilons"])
        return cls(
            arms=tuple(study1_arm(name) for name in study1["arms"]),
            epsilons=epsilons,
            epsilons_per_job=int(study1["epsilons_per_job"]),
            datasets=int(study1["datasets"]),
            datasets_per_job=int(study1["datasets_per_job"]),
            map_epsilons=map_epsilons,
            prior_budget_fraction=float(study1["prior_budget_fraction"]),
        )

    @staticmethod
    def entry(study1) -> dict:
        """The part of the config's ``study1`` entry a design is made of: what a job
        receives (a plain mapping, so that a change reruns exactly the jobs it concerns)."""
        return {key: study1[key] for key in Study1Design.KEYS}

    @property
    def chunks(self) -> list[str]:
        """Labels ``e{i}_d{j}`` of the scoring units of one scenario x arm."""
        return chunk_labels(len(self.epsilons), self.epsilons_per_job, self.datasets,
                            self.datasets_per_job)  # fmt: skip

    def members(self, chunk: str) -> tuple[list[float], np.ndarray]:
        """The epsilons and dataset ids of the chunk ``e{i}_d{j}``."""
        return chunk_members(chunk, self.epsilons, self.epsilons_per_job, self.datasets,
                             self.datasets_per_job)  # fmt: skip

    @property
    def units(self) -> list[tuple[str, str]]:
        """(arm name, chunk) of every scoring unit of one scenario: a job of its own
        (job_structure: split) or one of a scenario's bundle (bundled)."""
        return [(arm.name, chunk) for arm in self.arms for chunk in self.chunks]


def score_chunk(
    scenario_path, datasets_path, arm: Arm | str, chunk: str, design: Study1Design, rng
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Scores and county sums of one unit (an arm and chunk ``e{i}_d{j}``) of a
    scenario, from the scenario and datasets artifacts: :func:`score_unit` of the
    chunk's datasets read from ``datasets_path``."""
    scenario, geo = load_scenario(scenario_path)
    _, ids = design.members(chunk)
    return score_unit(scenario, geo, load_datasets(datasets_path, ids), arm, chunk, design, rng)


def score_unit(
    scenario: Scenario,
    geo: Geography,
    datasets: np.ndarray,
    arm: Arm | str,
    chunk: str,
    design: Study1Design,
    rng,
    *,
    calibrations: dict | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Scores and county sums of one unit (an arm and chunk ``e{i}_d{j}``) of a loaded
    scenario; ``datasets`` holds the chunk's datasets (rows, in the order of their ids,
    ``design.members(chunk)``). Both frames start with the columns ``scenario, arm`` (the
    arm's name)."""
    arm = arm_named(design.arms, arm) if isinstance(arm, str) else arm
    epsilons, ids = design.members(chunk)
    datasets = np.asarray(datasets)
    if datasets.shape[0] != ids.size:
        raise ValueError(f"chunk {chunk!r} has {ids.size} datasets, got {datasets.shape[0]}")
    scores, county_sums = score_datasets(
        scenario,
        geo,
        datasets,
        ids,
        arm,
        epsilons,
        rng,
        prior_budget_fraction=design.prior_budget_fraction,
        map_epsilons=design.map_epsilons,
        calibrations=calibrations,
    )
    for frame in (scores, county_sums):
        frame.insert(0, "arm", arm.name)
        frame.insert(0, "scenario", scenario.number)
    return scores, county_sums


def load_scenario(path) -> tuple[Scenario, Geography]:
    """A scenario artifact (``scenario, fips, state, urban, population, rate, total``)."""
    frame = pd.read_parquet(path)
    scenario = Scenario(
        number=int(frame["scenario"].iloc[0]),
        population=frame["population"].to_numpy(float),
        rate=frame["rate"].to_numpy(float),
        total=int(frame["total"].iloc[0]),
    )
    geo = Geography(state=frame["state"].to_numpy(), urban=frame["urban"].to_numpy(bool))
    return scenario, geo


def load_datasets(path, ids) -> np.ndarray:
    """Rows ``ids`` of a datasets artifact (long ``dataset, county, count``) as (len(ids), I)."""
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    frame = pd.read_parquet(path, filters=[("dataset", "in", [int(i) for i in ids])])
    dataset = frame["dataset"].to_numpy(np.int64)
    county = frame["county"].to_numpy(np.int64)
    n_cells = int(county.max()) + 1 if county.size else 0
    order = np.argsort(ids, kind="stable")
    found = np.searchsorted(ids, dataset, sorter=order)
    row = order[np.minimum(found, max(ids.size - 1, 0))]
    if ids.size != np.unique(ids).size or np.any(ids[row] != dataset):
        raise ValueError("dataset ids must be distinct and present in the datasets artifact")
    out = np.zeros((ids.size, n_cells), dtype=np.int64)
    filled = np.zeros((ids.size, n_cells), dtype=bool)
    out[row, county] = frame["count"].to_numpy(np.int64)
    filled[row, county] = True
    if not filled.all():
        raise ValueError("the datasets artifact lacks some (dataset, county) of these ids")
    return out


def summarise_run(score_paths, county_sum_paths, scenario_paths) -> tuple:
    """A run's summary from its units' files: ``(summary, county means, behaviour
    checks)`` of :func:`summarise_units`, the scores and county sums read in the order
    given."""
    return summarise_units(
        [pd.read_parquet(path) for path in score_paths],
        [pd.read_parquet(path) for path in county_sum_paths],
        scenario_paths,
    )


def summarise_units(scores, county_sums, scenario_paths) -> tuple:
    """A run's summary from its units' frames (``scores`` and ``county_sums``: one frame
    per unit, as :func:`score_unit` returns them or as read from their files): ``(summary,
    county means, behaviour checks)`` of :func:`summarise_scores`, :func:`county_means`
    and :func:`behaviour_checks`."""
    summary = summarise_scores(pd.concat(scores, ignore_index=True), scenario_paths)
    sums = pd.concat(county_sums, ignore_index=True)
    return summary, county_means(sums), behaviour_checks(summary)


def summarise_scores(scores: pd.DataFrame, scenario_paths) -> pd.DataFrame:
    """Median and 95% band per scenario x arm x epsilon x metric, plus truth rows.

    Truth rows have arm ``truth``, no epsilon, and median = lower = upper.
    """
    from dpcounts.studies.metrics import summarise_frame

    summary = summarise_frame(scores, ["scenario", "arm", "epsilon", "metric"])
    truth_rows = []
    for path in scenario_paths:
        scenario, geo = load_scenario(path)
        for metric, value in truth_metrics(scenario, geo).items():
            truth_rows.append(
                {
                    "scenario": scenario.number,
                    "arm": "truth",
                    "epsilon": np.nan,
                    "metric": metric,
                    "median": value,
                    "lower": value,
                    "upper": value,
                }
            )
    out = pd.concat([summary, pd.DataFrame(truth_rows)], ignore_index=True)
    return out.sort_values(["scenario", "arm", "metric", "epsilon"], ignore_index=True)


#: Columns of a Study-1 summary (``results/study1/summary.parquet``, ages 35-44).
SUMMARY_COLUMNS = ("scenario", "arm", "epsilon", "metric", *BAND_COLUMNS)


def stack_age_groups(summaries: dict) -> pd.DataFrame:
    """One frame of several age groups' summaries (Appendix C), ``age_group`` first.

    ``summaries`` maps an age-group label (e.g. ``"45-54"``) to its summary (the columns
    of :data:`SUMMARY_COLUMNS`); rows keep the mapping's order of groups, then each
    summary's own order.
    """
    if not summaries:
        raise ValueError("no age group to stack; expected at least one summary")
    frames = []
    for age_group, summary in summaries.items():
        missing = [c for c in SUMMARY_COLUMNS if c not in summary.columns]
        if missing:
            raise ValueError(f"summary of {age_group!r}: missing column(s) {missing}")
        if "age_group" in summary.columns:
            raise ValueError(f"summary of {age_group!r} already has an age_group column")
        frames.append(summary[list(SUMMARY_COLUMNS)].assign(age_group=str(age_group)))
    out = pd.concat(frames, ignore_index=True)
    return out[["age_group", *SUMMARY_COLUMNS]]


def county_means(county_sums: pd.DataFrame) -> pd.DataFrame:
    """Mean synthetic rate per scenario x arm x epsilon x county over all datasets."""
    keys = ["scenario", "arm", "epsilon", "county"]
    return pooled_mean(county_sums, keys, "rate_sum", "count")


def behaviour_checks(summary: pd.DataFrame) -> dict:
    """The behaviour Quick (2021) reports, measured on a Study-1 summary.

    - scenario 1: MD and PG-national coincide (ratio of median rMSEs per epsilon);
    - real populations (scenarios 2, 4): the largest epsilon up to which each PG variant's
      rMSE band lies wholly below MD's (beyond it both reproduce the data and tie);
    - scenario 4 at the smallest epsilon: MD's and PG-state's New Mexico / New York ratio
      (the paper's "14/2 = 7" under MD) and urban / rural ratio, beside the truth.
    """

    def rows(scenario, arm, metric):
        sel = summary[
            (summary["scenario"] == scenario)
            & (summary["arm"] == arm)
            & (summary["metric"] == metric)
        ]
        return sel.set_index("epsilon").sort_index()

    out: dict = {}
    if {"md", "pg_national"} <= set(summary["arm"]) and 1 in set(summary["scenario"]):
        ratio = rows(1, "md", "rmse")["median"] / rows(1, "pg_national", "rmse")["median"]
        out["scenario1_md_over_pg_national_rmse"] = {
            "min": float(ratio.min()),
            "max": float(ratio.max()),
        }
    for scenario in (2, 4):
        if scenario not in set(summary["scenario"]):
            continue
        md = rows(scenario, "md", "rmse")
        for arm in ("pg_national", "pg_state"):
            pg = rows(scenario, arm, "rmse")
            below = (pg["upper"] < md["lower"]).reindex(md.index, fill_value=False)
            ties = below[~below].index
            out[f"scenario{scenario}_{arm}_band_below_md_up_to_epsilon"] = (
                float(below[below].index.max()) if below.any() else None
            )
            out[f"scenario{scenario}_{arm}_first_tie_epsilon"] = (
                float(ties.min()) if len(ties) else None
            )
    if 4 in set(summary["scenario"]):
        for metric in ("ratio_nm_ny", "ratio_urban_rural"):
            truth = summary[
                (summary["scenario"] == 4)
                & (summary["arm"] == "truth")
                & (summary["metric"] == metric)
            ]["median"]
            out[f"scenario4_{metric}_truth"] = float(truth.iloc[0])
            for arm in ("md", "pg_state"):
                sel = rows(4, arm, metric)
                if len(sel):
                    out[f"scenario4_{metric}_{arm}_smallest_epsilon"] = float(sel["median"].iloc[0])
    return out
