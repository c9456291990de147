"""Whether a release kept what its study's guide promised (``--study``), measure by measure.

The study stage judged each of its arms over an epsilon grid (:mod:`dpcounts.studies.stage.guide`):
for every measure of the one registry (:func:`dpcounts.studies.stage.measures.study_measure_list`:
the strata rates' rMSE, the areas' rank correlation, each disparity, age-adjusted where the
study adjusts), from which epsilon privacy moves it by at most the study's tolerance from
synthesis with no privacy. A release of the study's table under one of its arms is then
checked the same way, on its own sets: each measure for every synthetic set and for tables
of the no-privacy reference at the same settings (:func:`dpcounts.sampling.reference.
no_privacy_draws`), the distance between their medians in the units of the guide's
tolerance (:class:`dpcounts.studies.stage.measures.Kind`), and beside it the guide's verdict for the
arm and measure at this epsilon.

A release's sets are each drawn at ``epsilon_per_set``, as a one-set release of total
``epsilon_prior + epsilon_per_set`` would be, the total the guide's epsilons state: that
is the epsilon compared with the guide's. With few sets the median is noisy (the guide's
verdict rests on many sets and a confidence interval): the report says how many sets
it has. It is private, like every utility number: it shows the true values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Kept:
    """One measure of the study: its values and the guide's word on it."""

    name: str
    title: str
    kind: str  # error, correlation or ratio (dpcounts.studies.stage.measures.KINDS)
    truth: float
    synthetic: np.ndarray  # per set
    reference: np.ndarray  # per no-privacy table
    distance: float  # of the sets' median from the reference's, in the tolerance's units
    tolerance: float
    guide_verdict: str | None  # guide.csv's verdict for the arm and measure, None: not run
    guide_text: str | None
    guide_epsilon: float | None  # from which total epsilon the guide says it is met
    #: the study's single tables at the grid's largest epsilon not above this release's:
    #: (that epsilon, the 2.5% and 97.5% quantiles over its sets), or None
    study_range: tuple[float, float, float] | None = None
    #: the prior's own value of the measure (the guide's ``prior``), None: not known
    prior: float | None = None
    scale: float = 1.0  # an error's: the table's true overall rate

    @property
    def kept(self) -> bool:
        """The guide's test (:meth:`dpcounts.studies.stage.measures.Kind.kept`): the
        sets' median within the tolerance of the reference's; for a ratio, what it keeps
        of the true departure from parity, never nearer the prior's value than the truth."""
        from dpcounts.studies.stage.measures import KINDS

        return bool(KINDS[self.kind].kept(
            np.nanmedian(self.synthetic), np.nanmedian(self.reference), self.tolerance,
            self.scale, truth=self.truth, prior=self.prior,
        ))  # fmt: skip

    def _off(self) -> str:
        """How far the sets' median is from the reference's, against the tolerance."""
        if self.kind != "ratio":
            return f"{100 * self.distance:.2g}% against {100 * self.tolerance:.2g}%"
        if not np.isfinite(self.distance):
            return (f"nearer the prior's {self.prior:.3g} than the truth: never kept, against "
                    f"{100 * self.tolerance:.2g}%")  # fmt: skip
        return (f"{100 * self.distance:.2g}% of the true departure from parity off, against "
                f"{100 * self.tolerance:.2g}%")  # fmt: skip

    def conclusion(self, epsilon: float) -> str:
        """The guide's promise and this release's outcome, in one line. The guide promises
        the typical table (the median over the study's sets); a single table varies
        around it, so a set beyond the tolerance is told apart by whether it lies within
        the range of the study's own tables at this epsilon."""
        ours, theirs = np.nanmedian(self.synthetic), np.nanmedian(self.reference)
        outcome = (
            f"this release: {ours:.3g} against {theirs:.3g} with no privacy (truth "
            f"{self.truth:.3g}), {'within' if self.kept else 'beyond'} the tolerance "
            f"({self._off()})"
        )
        if self.guide_verdict is None:
            return f"the guide: not run for this arm; {outcome}"
        promised = self.guide_verdict == "met" and epsilon >= self.guide_epsilon * (1 - 1e-9)
        within_study = None
        if self.study_range is not None:
            at, low, high = self.study_range
            within_study = bool(low <= ours <= high)
            spread = (
                f"the study's single tables at epsilon {at:.3g}: 95% in [{low:.3g}, {high:.3g}]"
            )
        if promised and self.kept:
            word = "kept, as the guide promised"
        elif promised and within_study:
            word = (
                f"not within the tolerance, but as one table varies ({spread}): the guide "
                "promises the typical table; more sets would bring their median nearer"
            )
        elif promised:
            word = "NOT kept, though promised" + (f" ({spread})" if within_study is False else "")
        elif self.guide_verdict == "met":
            word = f"not promised at this epsilon (the guide: from {self.guide_epsilon:.3g})"
        else:
            word = "not promised"
        return f"the guide: {self.guide_text}; {outcome}: {word}"


def _tables(y: np.ndarray, n: int, rng) -> list[np.ndarray]:
    """The no-privacy tables in the batches of the utility report: from one seed, the same
    tables as the report's general measures score."""
    from dpcounts.sampling.reference import reference_batches

    return list(reference_batches(y, n, rng))


def study_frame(study, strata) -> pd.DataFrame:
    """The release's strata as the study's measures read them: keys, attributes, the
    count and the population, in the release's order."""
    d = study.definition
    frame = strata.groupable().reset_index(drop=True).copy()
    frame[d.count] = strata.counts
    frame[d.population] = strata.population
    return frame


def check_promise(study, strata, synthetic: np.ndarray, arm_name: str, n_reference: int,
                  rng: np.random.Generator, epsilon: float = np.inf) -> list[Kept]:  # fmt: skip
    """Every measure of ``study`` on the release's ``synthetic`` sets (shape (sets,
    strata), in the order of ``strata``) and on ``n_reference`` no-privacy tables, with
    the guide's verdict for ``arm_name`` and the study's range of single tables at the
    grid's largest epsilon not above ``epsilon`` (the total one table is drawn at)."""
    from dpcounts.studies.stage.measures import overall_rate, study_measures

    d = study.definition
    frame = study_frame(study, strata)
    measures = study_measures(d, frame)
    y = strata.counts
    ours = pd.concat([measures.values(synthetic[k : k + 1], y) for k in range(len(synthetic))])
    theirs = pd.concat([measures.values(t, y) for t in _tables(y, n_reference, rng)])
    truth = measures.values(y, y).iloc[0]
    # the guide's scale for errors: the table's true overall rate (dpcounts.studies.stage.guide)
    scale = overall_rate(d, frame)
    guide = study.guide()
    ranges = _study_ranges(study, arm_name, epsilon)
    rows = {} if guide is None else {
        measure: row for measure, row in guide[guide["arm"] == arm_name].set_index("measure")
        .iterrows()
    }  # fmt: skip
    out = []
    for m in measures.measures:
        mine, ref = ours[m.name].to_numpy(float), theirs[m.name].to_numpy(float)
        row = rows.get(m.name)
        # the guide's prior value: a ratio nearer it than the truth is never kept
        true = float(truth[m.name])
        prior = None if row is None else float(row.get("prior", np.nan))
        prior = m.kind.judged_prior(true, prior, d.tolerance)
        distance = float(m.kind.distance(np.nanmedian(mine), np.nanmedian(ref), scale,
                                         truth=true, prior=prior))  # fmt: skip
        met_from = None if row is None else float(row["epsilon"])
        out.append(
            Kept(
                name=m.name,
                title=m.title,
                kind=m.kind.name,
                truth=true,
                synthetic=mine,
                reference=ref,
                distance=distance,
                tolerance=d.tolerance,
                guide_verdict=None if row is None else str(row["verdict"]),
                guide_text=None if row is None else str(row.get("verdict_text", row["verdict"])),
                guide_epsilon=met_from,
                study_range=ranges.get(m.name),
                prior=prior,
                scale=scale,
            )
        )
    return out


def _study_ranges(study, arm_name: str, epsilon: float) -> dict:
    """Per measure, the study's single tables at the grid's largest epsilon not above
    ``epsilon`` (its ``summary.parquet``: lower and upper, the 2.5% and 97.5% quantiles
    over its sets), as (epsilon, lower, upper); {} when the study has not run."""
    path = study.guide_path.with_name("summary.parquet")
    if not path.is_file():
        return {}
    summary = pd.read_parquet(path)
    rows = summary[(summary["arm"] == arm_name) & (summary["epsilon"] <= epsilon * (1 + 1e-9))]
    out = {}
    for metric, group in rows.groupby("metric"):
        last = group.loc[group["epsilon"].idxmax()]
        out[metric] = (float(last["epsilon"]), float(last["lower"]), float(last["upper"]))
    return out


#: The map of the release in the study's own geometry, in the private folder.
MAP = "utility_map.png"


def write_map(path, study, strata, synthetic: np.ndarray, arm, epsilon: float) -> bool:
    """The study's map (:func:`dpcounts.plots.study.figure_maps`: its geometry, its
    projection, its colour scale) of the true area rates and the sets' mean area rates,
    into ``path``; False when the study has no geometry."""
    d = study.definition
    if d.geometry is None or d.area is None:
        return False
    import geopandas as gpd

    from dpcounts.io import save_figure
    from dpcounts.plots.study import figure_maps, study_heading
    from dpcounts.studies.stage.measures import study_measures

    measures = study_measures(d, study_frame(study, strata))
    truth = measures.area_rates(strata.counts)[0]
    mean = measures.area_rates(synthetic).mean(axis=0)
    areas = list(measures.areas)
    rates = pd.concat([
        pd.DataFrame({"arm": "truth", "area": areas, "epsilon": np.nan, "rate": truth}),
        pd.DataFrame({"arm": arm.name, "area": areas, "epsilon": epsilon, "rate": mean}),
    ], ignore_index=True)  # fmt: skip
    geometry = (
        gpd.read_parquet(d.geometry)
        if d.geometry.suffix in (".parquet", ".pq")
        else gpd.read_file(d.geometry)
    )
    label = "rate per 100,000" if d.denominator == "population" else d.rate_unit
    figure = figure_maps(geometry, d.geometry_key, rates, [arm], [epsilon], d.name,
                         d.geometry_outline, label=label)  # fmt: skip
    sets = len(synthetic)
    figure.suptitle(f"{study_heading(d.title)}: true area rates and the release's mean rates "
                    f"over its {sets} synthetic set{'s' if sets > 1 else ''}",
                    fontsize=11)  # fmt: skip
    save_figure(figure, path)
    return True


def markdown(kept: list[Kept], study, arm_name: str, epsilon: float, sets: int) -> list[str]:
    """The section of utility.md: one line per measure."""
    guide = study.guide_path
    where = f"`{guide}`" if guide.is_file() else f"none found at `{guide}` (run the study first)"
    lines = [
        f"## What the study's guide promised (study `{study.name}`, arm `{arm_name}`)",
        "",
        f"Each measure of the study, as the study computes it, for the {sets} synthetic "
        f"set(s) and the no-privacy reference; judged as the guide judges it, by the "
        f"distance of the sets' median from the reference's (tolerance "
        f"{100 * study.definition.tolerance:.2g}%). Each set is drawn at total epsilon "
        f"{epsilon:.3g} as the guide counts it (the prior's share and one set's). The "
        f"guide: {where}."
        + (" With one set the median is a single draw: expect noise." if sets == 1 else ""),
        "",
    ]
    for k in kept:
        lines.append(f"- **{k.title}** (`{k.name}`): {k.conclusion(epsilon)}")
    return lines


def suppression_lines(study, strata, synthetic: np.ndarray, cal, rng) -> list[str]:
    """The section of utility.md on what suppression under the study's rule would have
    kept of this table, how many of its hidden counts differencing pins with the margins
    the study publishes, and what this release's sets give an attacker of the same counts,
    reading them as the truth or with the published hyperparameters ``cal`` (the release's
    calibration; issue #53); [] when the study has no suppression arm. ``cal.prior_rate``:
    the release's prior rates (for a completion by the prior and the posterior attacker's
    prior; None: the overall rate)."""
    d = study.definition
    if d.suppression is None:
        return []
    from dpcounts.studies.stage.measures import (
        attack_shares,
        overall_rate,
        posterior_shares,
        study_measures,
    )
    from dpcounts.studies.stage.suppression import label, suppression_result

    frame = study_frame(study, strata)
    y = strata.counts
    people = frame[d.population].to_numpy(float)
    frame["prior_rate"] = (np.full(y.size, y.sum() / people.sum()) if cal.prior_rate is None
                           else np.asarray(cal.prior_rate, dtype=float))  # fmt: skip
    measures = study_measures(d, frame)
    result = suppression_result(d, frame, measures, rng)
    truth = measures.values(y, y).iloc[0]
    scale = overall_rate(d, frame)
    kept = [m.title for m in measures.measures
            if result["measures"].get(m.name) is not None
            and m.kind.kept(result["measures"][m.name], truth[m.name], d.tolerance, scale,
                            truth=truth[m.name])]  # fmt: skip
    attack, rule = result["attack"], result["rule"]
    ours = attack_shares(synthetic, y, rule["low"], rule["high"])
    lines = [
        "", f"## Against suppression ({label(result)}, study `{study.name}`)", "",
        f"Suppressed under the study's rule, this table would hide {result['suppressed']} of "
        f"its {result['strata']} counts, each completed by the {result['completion']}; that "
        f"table keeps {len(kept)} of the study's {len(measures.measures)} measures against "
        f"the truth at the guide's tolerance" + (f" ({', '.join(kept)})" if kept else "")
        + ".",
    ]  # fmt: skip
    if attack.get("cells"):
        published = "; ".join(" x ".join(m) for m in result["published"])
        lines.append(
            f"With the margins the study publishes beside it ({published}), differencing "
            f"(linear programming, SciPy's HiGHS) pins {attack['pinned']['estimate']:.0%} of "
            f"the hidden counts exactly and {attack['within_one']['estimate']:.0%} to within "
            "one."
        )
    exact, within = np.nanmedian(ours["attack:exact"]), np.nanmedian(ours["attack:within_one"])
    if np.isfinite(exact):
        lines.append(
            f"Read as the truth, this release's sets give {exact:.0%} of the true counts "
            f"{rule['low']}-{rule['high']} exactly and {within:.0%} to within one (median over "
            f"the {len(synthetic)} set(s))."
        )
    # the study's posterior attacker: its prior is the public prior's expected counts
    expected = people * frame["prior_rate"].to_numpy(float)
    posterior = posterior_shares(synthetic, y, cal, rule["low"], rule["high"], len(synthetic),
                                 expected)  # fmt: skip
    exact, within = (
        posterior["attack:posterior_exact"][0],
        posterior["attack:posterior_within_one"][0],
    )
    if np.isfinite(exact):
        lines.append(
            f"Read with the published hyperparameters (each count's posterior mode in "
            f"{rule['low']}-{rule['high']} given the {len(synthetic)} set(s) and the public "
            f"prior), this release's sets give {exact:.0%} of the same counts exactly and "
            f"{within:.0%} to within one."
        )
    return lines


#: The most strata whose posterior intervals the utility report computes: above, the
#: posterior (0.15-0.25 s per 1,000 strata for md and pg, 1-1.8 s for truncated, at 1,000
#: to 10,000 strata: ``benchmarks/estimate.py``) would add minutes to hours to a release.
POSTERIOR_REPORT_STRATA = 100_000


def coverage_lines(study, strata, synthetic: np.ndarray, cal) -> list[str]:
    """The section of utility.md on the intervals of this release's areas (issue #54):
    per method of the study's ``coverage`` setting, the share of the areas whose interval
    from the release's sets (at the study's level) holds the confidential area rate, and
    the median width over the exact no-privacy (Garwood) interval, scored by the study's
    own :func:`dpcounts.studies.stage.coverage.release_scores`; [] when the study does not
    enable coverage. The combining rules need 2 sets: with one, the posterior only; the
    posterior is left out above :data:`POSTERIOR_REPORT_STRATA` strata."""
    d = study.definition
    spec = d.coverage
    if spec is None:
        return []
    from dpcounts.studies.stage.coverage import METHOD_WORDS, release_scores, study_areas

    areas = study_areas(d, study_frame(study, strata), spec.level)
    sets = len(synthetic)
    lines = [
        "", f"## Coverage of the areas' intervals (study `{study.name}`)", "",
        f"The intervals an analyst computes from this release's {sets} set(s) of each "
        f"area's rate (`{d.area}`, {len(areas.names)} areas) at the study's level "
        f"{spec.level:.0%}, against the confidential rates. This is one release, one draw: "
        f"the study's coverage rows (the `coverage:<quantity>` rows of its `guide.csv`) "
        "average many.",
        "",
    ]  # fmt: skip
    for method in spec.methods:
        strata_count = len(synthetic[0])
        if method == "posterior" and strata_count > POSTERIOR_REPORT_STRATA:
            lines.append(f"- **{METHOD_WORDS[method]}**: not computed for the {strata_count:,} "
                         f"strata of this release (more than {POSTERIOR_REPORT_STRATA:,}: "
                         "the posterior takes about 0.2-2 s per 1,000 strata, "
                         "`benchmarks/estimate.py`); `dpcounts estimate` on the public folder "
                         "computes it")  # fmt: skip
            continue
        if method == "combining" and sets < 2:
            lines.append(f"- **{METHOD_WORDS[method]}**: the combining rules need 2 sets "
                         "(`--sets 2` or more); this release has one")  # fmt: skip
            continue
        shares, ratios = release_scores(synthetic, areas, cal, method, spec.level, sets)
        lines.append(
            f"- **{METHOD_WORDS[method]}**: {shares[0]:.0%} of the {len(areas.names)} "
            f"areas' intervals hold the confidential rate; median width "
            f"{np.median(ratios):.3g}x the exact no-privacy (Garwood) interval's"
        )
    return lines
