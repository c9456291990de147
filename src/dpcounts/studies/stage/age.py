"""Direct age adjustment of a study (``studies.<name>.age``), checked before the first job.

:func:`age_adjustment` turns the age column of a study's strata and its standard
population into the bands and weights that :class:`dpcounts.studies.stage.rates.GroupRates`
applies, and refuses, naming the config key and the fix, everything that would make a job
fail: a label that cannot be read as ages, bands that overlap, a band whose edges are not
edges of the standard's groups, an area or a disparity without population in a band it
needs. :func:`dpcounts.studies.stage.table.read_study_table` calls it, so the workflow's check of
the config (``checked_studies``) meets every problem before any job runs.

The rules, as ``config/README.md`` states them:

* A label is read as ages by :func:`dpcounts.studies.stage.selection.parse_age_band` (``45-54``,
  ``85+``, ``Under 40``) unless ``age.bands`` gives it; with ``age.bands: single-years`` a
  label holding one whole number (``7``, ``7 years``, ``7.0``) is that single year of age.
  Labels that ``age.bands`` gives the same ages are adjusted as one band (coarser bands
  for a sparse table); bands of different ages must not overlap, nor leave ages out
  between the first and the last (a table may start above age 0, and its last band may be
  open). So ``single-years`` refuses whole-number labels that are not consecutive years
  (``0, 5, ..., 90``: five-year groups named by their first age), naming the labels and
  the bands that fit them (``{'0': [0, 5], ..., '90': [90, null]}``).
* With ``single-years`` the standard population is split into single years of age
  (:func:`single_year_standard`): **each closed group's population is spread evenly over
  its single years** (US 2000: ages 1-4 get 15,191,619 / 4 each). The standard's open top
  group (85+) cannot be spread (it has no width).
* In every case, the strata whose ages lie at or past the start of the standard's open
  top group are adjusted as one band with that group's weight (their cases over their
  population): a table in single years to 100+ uses the US 2000 standard's 85+ as it is.
* A disparity whose filters (numerator, denominator or where) name the age column
  compares rates adjusted over the ages each side selects: the standard's weights of the
  bands a side covers, normalised to sum to one over them (as SEER*Stat adjusts a rate of
  an age range). A single band's adjusted rate is its crude rate.

Bands are listed in messages in the order of their ages (``0, 1, 2, ..., 10``), never as
text (``0, 1, 10, 11, ...``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import pandas as pd

from dpcounts.studies.stage.definition import SINGLE_YEARS, StudyDefinition
from dpcounts.studies.stage.selection import StudyDataError, natural_key, parse_age_band

#: Bands listed in one message before "and N more".
SHOWN = 8
#: A label that is one year of age: ``7``, ``7 years``, ``7.0`` (an age stored as a float).
WHOLE_AGE = re.compile(r"\s*(\d+)(?:\.0+)?\s*(?:years?)?\s*", flags=re.IGNORECASE)


def single_year_standard(table: pd.DataFrame) -> pd.DataFrame:
    """The standard population in single years of age: each closed group ``[age_start,
    age_end]`` becomes ``age_end - age_start + 1`` rows of one year, each with the group's
    population spread evenly (population / width, a float); the open top group is kept as
    it is. The total is unchanged, and so is every group's weight."""
    rows = []
    for start, end, population in table[["age_start", "age_end", "population"]].itertuples(
        index=False
    ):
        if pd.isna(end):
            rows.append((int(start), pd.NA, float(population)))
            continue
        width = int(end) - int(start) + 1
        share = float(population) / width
        rows.extend((age, age, share) for age in range(int(start), int(end) + 1))
    out = pd.DataFrame(rows, columns=["age_start", "age_end", "population"])
    return out.astype({"age_start": "Int64", "age_end": "Int64", "population": float})


def _span(first: int, past: int | None) -> str:
    """Ages in short: ``[40, 60)`` -> ``40-59``, ``[85, None)`` -> ``85+``, ``[7, 8)`` -> ``7``."""
    if past is None:
        return f"{first}+"
    return str(first) if past == first + 1 else f"{first}-{past - 1}"


def _ages(first: int, past: int | None) -> str:
    """Ages in words: ``ages 40-59``, ``ages 85+``, ``age 7``."""
    single = past is not None and past == first + 1
    return f"age{'' if single else 's'} {_span(first, past)}"


def in_age_order(bands: Mapping[str, tuple[int, int | None]]) -> list[str]:
    """The labels of ``bands`` ordered by their ages (first age, then last; open last)."""

    def ages(label: str) -> tuple:
        first, past = bands[label]
        return first, np.inf if past is None else past

    return sorted(bands, key=ages)


def _listed(labels: list[str]) -> str:
    text = ", ".join(repr(v) for v in labels[:SHOWN])
    return text + (f" and {len(labels) - SHOWN} more" if len(labels) > SHOWN else "")


def _single_year(label: str) -> tuple[int, int | None]:
    """A label under ``bands: single-years``: one whole number is that year of age; any
    other label as :func:`parse_age_band` reads it (``< 1 year``, ``100+ years``)."""
    whole = WHOLE_AGE.fullmatch(label)  # 7, 7 years, 7.0 (ages stored as floats)
    if whole:
        return int(whole.group(1)), int(whole.group(1)) + 1
    return parse_age_band(label)


def label_bands(definition: StudyDefinition, strata: pd.DataFrame) -> dict[str, tuple]:
    """Label -> (first age, first age past; None = open) of every value of the age column,
    in the order of their ages. Refuses a label that cannot be read, a band given in
    ``age.bands`` that no stratum has, an empty band, bands that overlap and bands that
    leave ages out between the first and the last (:func:`_gap_message`)."""
    name, column = definition.name, definition.age
    key = f"studies.{name}.age.bands"
    labels = list(strata[column].astype(str).unique())
    given = definition.age_bands if isinstance(definition.age_bands, Mapping) else {}
    unknown = sorted(set(given) - set(labels))
    if unknown:
        raise StudyDataError(
            f"config key {key}.{unknown[0]}: no stratum has age {unknown[0]!r}; the column "
            f"{column!r} holds {_listed(labels)}; expected a label of the column (compared "
            "as text)"
        )
    bands = {}
    for label in labels:
        if label in given:
            bands[label] = given[label]
            continue
        try:
            bands[label] = (_single_year if definition.single_years else parse_age_band)(label)
        except ValueError:
            hint = ""
            if WHOLE_AGE.fullmatch(label):
                hint = (f"; for single years of age set studies.{name}.age.bands: "
                        f"{SINGLE_YEARS}")  # fmt: skip
            raise StudyDataError(
                f"config key {key}: age {label!r} of column {column!r} cannot be read as "
                "ages; expected labels such as '45-54', '85+' or 'Under 40', or give it as "
                f"age.bands.{label}: [first age, first age past]{hint}"
            ) from None
    for label, (first, past) in bands.items():
        if first < 0 or (past is not None and past <= first):
            raise StudyDataError(
                f"config key {key}: band {label!r} = [{first}, {past}) holds no age; expected "
                "[first age, first age past] with 0 <= first < past (past null: open)"
            )
    ordered = in_age_order(bands)
    distinct = [label for k, label in enumerate(ordered)  # labels of the same ages: one band
                if k == 0 or bands[label] != bands[ordered[k - 1]]]  # fmt: skip
    seen = [label for label in ordered if label in distinct]
    for left, right in zip(distinct, distinct[1:], strict=False):
        past = bands[left][1]
        if past is None or past > bands[right][0]:
            raise StudyDataError(
                f"config key {key}: bands {left!r} ({_ages(*bands[left])}) and {right!r} "
                f"({_ages(*bands[right])}) of column {column!r} overlap (the column holds "
                f"{_listed(seen)}); expected bands that share no age: give each label its "
                "own ages (age.bands.<label>: [first, past]; labels given the same ages are "
                "adjusted as one band) or merge the overlapping rows into one label"
            )
    gaps = [(left, right) for left, right in zip(distinct, distinct[1:], strict=False)
            if bands[left][1] < bands[right][0]]  # fmt: skip
    if gaps:
        raise StudyDataError(_gap_message(definition, bands, distinct, gaps))
    return {label: bands[label] for label in ordered}


def _fitting(
    bands: Mapping[str, tuple], distinct: list[str], single_years: bool
) -> dict[str, list]:
    """Bands that fit the labels: each band from its first age to the next band's first age
    (so none leaves an age out); a whole-number label read as one year under
    ``single-years`` is read as a group named by its first age (the last one open)."""
    fitted = {}
    for k, label in enumerate(distinct):
        first, past = bands[label]
        following = bands[distinct[k + 1]][0] if k + 1 < len(distinct) else None
        if single_years and WHOLE_AGE.fullmatch(label):
            past = following
        elif following is not None:
            past = following
        fitted[label] = [first, past]
    return fitted


def _mapping(fitted: Mapping[str, list]) -> str:
    """``{'0': [0, 5], '5': [5, 10], ..., '90': [90, null]}`` (a YAML flow mapping), the
    first bands and the last when there are many."""

    def entry(label):
        first, past = fitted[label]
        return f"{label!r}: [{first}, {'null' if past is None else past}]"

    labels = list(fitted)
    shown = [entry(label) for label in labels]
    if len(shown) > SHOWN + 1:
        shown = [*shown[:SHOWN], f"... ({len(labels) - SHOWN - 1} more)", shown[-1]]
    return "{" + ", ".join(shown) + "}"


def _gap_message(
    definition: StudyDefinition, bands: Mapping[str, tuple], distinct: list[str], gaps: list
) -> str:
    """The refusal of bands that leave ages out: the labels seen, the first ages left out
    and the bands that fit the labels."""
    name, column = definition.name, definition.age
    key = f"studies.{name}.age.bands"
    left, right = gaps[0]
    missing = _ages(bands[left][1], bands[right][0])  # the first ages left out
    more = f" (and {len(gaps) - 1} more gap{'s' if len(gaps) > 2 else ''})" if len(gaps) > 1 else ""
    fitted = _mapping(_fitting(bands, distinct, definition.single_years))
    if definition.single_years:
        starts = [bands[label][0] for label in distinct]
        steps = {b - a for a, b in zip(starts, starts[1:], strict=False)}
        pattern = f" step by {steps.pop()}" if len(steps) == 1 else " are not consecutive"
        return (
            f"config key {key}: {SINGLE_YEARS} reads each whole-number label of column "
            f"{column!r} as one year of age, but its labels ({_listed(distinct)}){pattern}: "
            f"no label holds {missing} (between {left!r} and {right!r})"
            f"{more}; expected consecutive single years (0, 1, 2, ...); if each label names "
            f"the first age of a group, give the groups in place of {SINGLE_YEARS}: "
            f"studies.{name}.age.bands: {fitted}"
        )
    return (
        f"config key {key}: bands {left!r} ({_ages(*bands[left])}) and {right!r} "
        f"({_ages(*bands[right])}) of column {column!r} leave {missing} "
        f"out{more} (the column holds {_listed(distinct)}); expected bands that leave no age "
        "out from the first to the last: give each label the ages it holds so that the "
        f"bands meet, such as studies.{name}.age.bands: {fitted}, or add the table's rows "
        "of the ages left out"
    )


class AgeAdjustment(NamedTuple):
    """What :class:`~dpcounts.studies.stage.rates.GroupRates` needs: the adjustment band of each
    stratum (``band``), the standard's weight of each band (``weights``), and each band's
    ages (``edges``, in the order of their ages)."""

    band: np.ndarray
    weights: pd.Series
    edges: dict[str, tuple[int, int | None]]


def _standard(definition: StudyDefinition) -> pd.DataFrame:
    from dpcounts.data.counties import DataFileError
    from dpcounts.data.standard_population import load_standard_population

    key = f"config key studies.{definition.name}.age.standard_population"
    try:
        return load_standard_population(definition.standard_population)
    except (DataFileError, ValueError, OSError) as error:
        raise StudyDataError(
            f"{key}: {error}; expected a CSV with columns age_start, age_end (empty for the "
            "open top group) and population, such as data/us_standard_population_2000.csv"
        ) from None


def age_adjustment(definition: StudyDefinition, strata: pd.DataFrame) -> AgeAdjustment:
    """The study's age bands and standard weights, checked (the module's rules)."""
    from dpcounts.data.standard_population import standard_weights

    name = definition.name
    key = f"studies.{name}.age.bands"
    labels = label_bands(definition, strata)
    standard = _standard(definition)
    if definition.single_years:
        standard = single_year_standard(standard)
    starts = standard["age_start"].to_numpy(dtype=int)
    top = int(starts[-1])  # the open group's first age
    source = definition.standard_population
    groups = ", ".join(_span(int(s), None if pd.isna(e) else int(e) + 1)
                       for s, e in zip(standard["age_start"], standard["age_end"],
                                       strict=True))  # fmt: skip
    if definition.single_years:
        groups = f"single years 0-{top - 1} (spread evenly from its groups), {top}+"
    band_of, edges = {}, {}
    sharing = Counter(labels.values())  # labels given the same ages: one band
    for label, (first, past) in labels.items():
        if first >= top:  # inside the standard's open group: adjusted as that group
            band_of[label] = f"{top}+"
            edges[f"{top}+"] = (top, None)
            continue
        bad = [age for age in (first, past) if age is not None and age not in starts]
        if bad and past is not None and first < top < past:
            raise StudyDataError(
                f"config key {key}: band {label!r} ({_ages(first, past)}) straddles age "
                f"{top}, where the open top group of the standard population {source} "
                f"begins; expected bands that end at {top} or start at or after it: split "
                f"the label at {top} (or merge the labels from {top} on into one band)"
            )
        if bad:
            single = past is not None and past == first + 1
            fix = (
                f"set studies.{name}.age.bands: {SINGLE_YEARS} (the standard's groups spread "
                "evenly over their single years), or give age.standard_population a "
                "single-year standard"
                if single and not definition.single_years
                else "merge the table's ages into bands on those edges, or give "
                "age.standard_population a standard with groups on the table's edges"
            )
            raise StudyDataError(
                f"config key {key}: band {label!r} ({_ages(first, past)}) of column "
                f"{definition.age!r} does not fall on the groups of the standard population "
                f"{source} (ages {groups}): age {bad[0]} is not where one of its groups "
                f"begins; {fix}"
            )
        band = label if sharing[(first, past)] == 1 else _span(first, past)  # one name
        if band != label and band in labels and labels[band] != (first, past):
            band = f"ages {band}"
        band_of[label] = band
        edges[band] = (first, past)
    # the weights' order is the labels' as text, as it has always been (the sum's order)
    weights = standard_weights(standard, {b: edges[b] for b in sorted(edges)})
    band = strata[definition.age].astype(str).map(band_of).to_numpy(dtype=object)
    ordered = {b: edges[b] for b in in_age_order(edges)}
    adjustment = AgeAdjustment(band, weights, ordered)
    _check_populations(definition, strata, adjustment)
    return adjustment


def names_age(definition: StudyDefinition, spec) -> bool:
    """Whether a disparity's filters name the age column."""
    return any(definition.age in filters for filters in (spec.numerator, spec.denominator,
                                                          spec.where))  # fmt: skip


def _check_populations(
    definition: StudyDefinition, strata: pd.DataFrame, adjustment: AgeAdjustment
) -> None:
    """Every area, and every side of a disparity, has strata (so population: strata have
    population > 0) in every band its rate needs."""
    from dpcounts.studies.stage.selection import filter_mask

    name = definition.name
    bands = list(adjustment.edges)
    band = pd.Series(adjustment.band, index=strata.index)
    fix = (
        f"give coarser bands (studies.{name}.age.bands: label: [first, past] for each label; "
        "labels given the same ages are adjusted as one band) so that every one has people "
        f"in each, or leave out age adjustment (remove studies.{name}.age)"
    )
    if definition.area is not None:
        present = pd.crosstab(strata[definition.area].astype(str), band)
        present = present.reindex(columns=bands, fill_value=0)
        lacking = sorted(present.index[(present == 0).any(axis=1)], key=natural_key)
        if len(lacking):
            area = lacking[0]
            missing = [b for b in bands if present.loc[area, b] == 0]
            raise StudyDataError(
                f"config key studies.{name}.area: {len(lacking)} area(s) of "
                f"{definition.area!r} ({_listed(list(lacking))}) have no population in some "
                f"age band: {area!r} in {_listed(missing)}; an age-adjusted rate needs people "
                f"in every band; {fix}"
            )
    for k, spec in enumerate(definition.disparities):
        key = f"studies.{name}.disparities[{k}]"
        where = filter_mask(strata, spec.where, f"{key}.where")
        for side in ("numerator", "denominator"):
            mask = filter_mask(strata, getattr(spec, side), f"{key}.{side}") & where
            have = set(band[mask])
            needed = side_bands(definition, spec, side, strata, adjustment)
            missing = [b for b in needed if b not in have]
            if not missing:
                continue
            if names_age(definition, spec):
                raise StudyDataError(
                    f"config key {key}.{side}: its strata have no population in age band(s) "
                    f"{_listed(missing)}, which its filters select; an age-adjusted rate "
                    f"needs people in every band it covers: select only ages it has "
                    f"({definition.age!r} in its filters), {fix}"
                )
            raise StudyDataError(
                f"config key {key}.{side}: its strata have no population in age band(s) "
                f"{_listed(missing)}; an age-adjusted rate needs people in every band: "
                f"{fix}, or name the ages it compares (where: {{{definition.age}: "
                "[...]}), which adjusts each side over the ages it selects"
            )


def side_bands(
    definition: StudyDefinition, spec, side: str, strata: pd.DataFrame, adjustment: AgeAdjustment
) -> list[str]:
    """The bands a side of a disparity is adjusted over, in the order of their ages: those
    of the ages its filters select (its own filter on the age column and its where's),
    every band when they name none."""
    labels = strata[definition.age].astype(str).to_numpy()
    mask = np.ones(len(strata), dtype=bool)
    for filters in (getattr(spec, side), spec.where):
        if definition.age in filters:
            mask &= np.isin(labels, list(filters[definition.age]))
    selected = set(adjustment.band[mask])
    return [b for b in adjustment.edges if b in selected]
