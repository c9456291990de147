"""A study on the analyst's own strata, as the config states it (``studies.<name>``).

:func:`study_definition` turns one config entry into a frozen :class:`StudyDefinition`;
every problem raises :class:`StudyConfigError` naming the config key (``studies.<name>.
<key>``), the value and what was expected, in one line. The schema
(``workflow/schemas/config.schema.yaml``) holds the defaults; this module checks what the
schema cannot (arms that exist, a prior that is well formed, disparity names that are
unique) and nothing that needs the data (:mod:`dpcounts.studies.stage.table` does that).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dpcounts.arms import Arm, arm_named
from dpcounts.design import GridError, at_epsilon, chunk_labels, epsilon_chunks, grid_from_config
from dpcounts.mechanisms import registry
from dpcounts.units import DENOMINATORS, rate_scale, rate_unit

PRIOR_SOURCES = ("overall", "sanitised", "file", "column")
ROUNDING = ("refuse", "nearest")
ON_FAILURE = ("fail", "skip")
GEOMETRY_MISSING = ("refuse", "allow")
#: ``age.bands: single-years``: labels that are whole numbers are single years of age, and
#: the standard population is spread evenly over single years (:mod:`dpcounts.studies.stage.age`).
SINGLE_YEARS = "single-years"


class StudyConfigError(ValueError):
    """A study's config entry is wrong; the message names the key and what is expected."""


@dataclass(frozen=True)
class Disparity:
    """The rate of the strata matching ``numerator`` over that of ``denominator`` (both
    restricted to ``where``); filters map a column to one value or a list of values."""

    name: str
    numerator: Mapping[str, tuple[str, ...]]
    denominator: Mapping[str, tuple[str, ...]]
    where: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    label: str = ""  # how figures name it (default: the filters, :attr:`title`)

    @property
    def title(self) -> str:
        """Its label, or ``numerator / denominator; where`` from its filters."""
        if self.label:
            return self.label

        def text(filters):
            return ", ".join(f"{k} = {'/'.join(v)}" for k, v in filters.items())

        title = f"{text(self.numerator)} / {text(self.denominator)}"
        return f"{title}; {text(self.where)}" if self.where else title


@dataclass(frozen=True)
class Prior:
    """Where the prior rates come from (module :mod:`dpcounts.studies.stage.prior`)."""

    source: str
    by: tuple[str, ...] = ()
    epsilon: float = 0.0
    path: Path | None = None
    column: str | None = None
    #: where public rates (file, column) come from, in the steward's words: a release of
    #: the study (``synthesize --study``) publishes them only with it (``--prior-source``)
    source_note: str | None = None


@dataclass(frozen=True)
class Suppression:
    """The study's suppression arm (``suppression``): the rule
    (:class:`dpcounts.baselines.suppression.SuppressionRule`), the analyst's completion of
    a hidden count, and the margins published beside the table (tuples of key or attribute
    columns), which the differencing attack knows."""

    low: int
    high: int
    show_zeros: bool
    complementary: str | None
    completion: str
    published: tuple[tuple[str, ...], ...]
    sets: int = 5  # the release's sets the attacker takes the mode over

    @property
    def rule(self):
        from dpcounts.baselines.suppression import SuppressionRule

        return SuppressionRule(self.low, self.high, self.show_zeros, self.complementary)


@dataclass(frozen=True)
class Coverage:
    """The study's coverage measure (``coverage``; :mod:`dpcounts.studies.stage.coverage`):
    the nominal ``level``, the ``sets`` of a release, the ``releases`` drawn per arm and
    epsilon (``releases`` x ``sets`` synthetic tables), the ``epsilons`` of the grid scored
    and the interval ``methods``."""

    level: float
    sets: int
    releases: int
    epsilons: tuple[float, ...]
    methods: tuple[str, ...]


@dataclass(frozen=True)
class StudyDefinition:
    name: str
    title: str  # its name in Study 2's figure headings (default: the name)
    table: Path
    keys: tuple[str, ...]
    count: str
    population: str  # the denominator column: populations, or expected counts
    rows: Mapping[str, tuple[str, ...]]
    attributes: tuple[str, ...]
    area: str | None
    geometry: Path | None
    geometry_key: str | None
    geometry_outline: str | None
    geometry_missing: str  # areas without a shape: "refuse" (stop) or "allow" (listed)
    age: str | None
    standard_population: Path | None
    age_bands: Mapping[str, tuple[int, int | None]] | None
    single_years: bool  # age.bands: single-years (dpcounts.studies.stage.age)
    population_keys: tuple[str, ...]
    prior: Prior
    arms: tuple[Arm, ...]
    epsilons: tuple[float, ...]
    map_epsilons: tuple[float, ...]
    sets: int  # synthetic sets (tables) drawn per arm and epsilon (L)
    sets_per_job: int
    epsilons_per_job: int
    batch: int
    stream: tuple[str, ...]
    tail: float | None
    inflation: float
    disparities: tuple[Disparity, ...]
    tolerance: float
    rounding: str
    on_calibration_failure: str
    wonder: bool
    #: what ``population`` holds: ``population`` or ``expected`` (expected counts; rates
    #: are SMRs, no count bound; :func:`dpcounts.data.validation.validate_strata`)
    denominator: str = "population"
    #: the key combinations whose totals are measured beside each key's own
    #: (``margins``; :func:`dpcounts.studies.stage.measures.margin_keys` lists them all)
    margins: tuple[tuple[str, ...], ...] = ()
    #: the suppression arm (``suppression``; None: the study has none)
    suppression: Suppression | None = None
    #: the coverage measure (``coverage``; None: not enabled)
    coverage: Coverage | None = None

    @property
    def per(self) -> float:
        """Reported rate per rate per person (or per SMR): 100,000, or 1 for SMRs."""
        return rate_scale(self.denominator)

    @property
    def rate_unit(self) -> str:
        """The reported unit of a rate: ``per 100,000`` or ``SMR (observed / expected)``."""
        return rate_unit(self.denominator)

    @property
    def calibration_chunks(self) -> list[str]:
        """Labels ``e{i}`` of the calibration jobs of one arm (:mod:`dpcounts.design`)."""
        return epsilon_chunks(len(self.epsilons), self.epsilons_per_job)

    @property
    def chunks(self) -> list[str]:
        """Labels ``e{i}_d{j}`` of the draw jobs of one arm (:mod:`dpcounts.design`)."""
        return chunk_labels(len(self.epsilons), self.epsilons_per_job, self.sets,
                            self.sets_per_job)  # fmt: skip

    def arm(self, name: str) -> Arm:
        """The arm called ``name``."""
        return arm_named(self.arms, name)

    @property
    def columns(self) -> tuple[str, ...]:
        """Every input column the study reads."""
        extra = [self.prior.column] if self.prior.source == "column" else []
        return (*self.keys, self.count, self.population, *self.attributes, *extra)


def _fail(name: str, key: str, message: str):
    raise StudyConfigError(f"config key studies.{name}.{key}: {message}")


def _filled(name: str, entry: Mapping, *path: str):
    """The value at ``path`` of a study's entry, whose defaults the config's schema fills
    (:func:`dpcounts.config_check.check_config`): the library keeps no second copy of them."""
    node = entry
    for k, key in enumerate(path):
        if not isinstance(node, Mapping) or key not in node:
            _fail(name, ".".join(path[: k + 1]), "missing; expected the config checked "
                  "against its schema, which fills every default (check_config)")  # fmt: skip
        node = node[key]
    return node


def _filter(name: str, key: str, value) -> dict[str, tuple[str, ...]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not value:
        _fail(name, key, f"got {value!r}; expected a mapping column: value (or [values])")
    out = {}
    for column, wanted in value.items():
        values = wanted if isinstance(wanted, list) else [wanted]
        if not values:
            _fail(name, f"{key}.{column}", "an empty list; expected at least one value")
        out[str(column)] = tuple(str(v) for v in values)
    return out


def _finite_positive(name: str, key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _fail(name, key, f"got {value!r}; expected a number")
    if not (math.isfinite(value) and value > 0):
        _fail(name, key, f"got {value!r}; expected a finite number > 0")
    return float(value)


def _age_bands(name: str, bands) -> dict[str, tuple[int, int | None]] | None:
    if bands is None or bands == SINGLE_YEARS:
        return None
    if not isinstance(bands, Mapping):
        _fail(name, "age.bands", f"got {bands!r}; expected {SINGLE_YEARS} or label: [first "
              "age, first age past] for each label, such as {'40-59': [40, 60]}")  # fmt: skip
    out = {}

    def whole(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    for label, edges in bands.items():
        if not (isinstance(edges, list) and len(edges) == 2 and whole(edges[0])
                and (edges[1] is None or whole(edges[1]))):  # fmt: skip
            _fail(name, f"age.bands.{label}", f"got {edges!r}; expected [first age, first age "
                  "past the band] such as [40, 60], or [85, null] for an open band")  # fmt: skip
        if edges[1] is not None and edges[1] <= edges[0]:
            _fail(name, f"age.bands.{label}", f"got {edges!r}, which holds no age; expected "
                  "[first age, first age past] with first < past, such as [40, 60]")  # fmt: skip
        out[str(label)] = (int(edges[0]), None if edges[1] is None else int(edges[1]))
    return out


def _arm(key: str, mechanism, method, name: str = "", title: str = "") -> Arm:
    if mechanism not in registry.names():
        raise StudyConfigError(
            f"config key {key}: unknown mechanism {mechanism!r}; expected {list(registry.names())}"
        )
    methods = registry.family(mechanism).methods
    if method not in methods:
        raise StudyConfigError(
            f"config key {key}: got method {method!r}; {mechanism} has {list(methods)}"
        )
    return Arm(mechanism, method, name, title=title)


def config_arms(key: str, entry) -> tuple[Arm, ...]:
    """The arms of the config key ``key`` (``studies.<name>.arms``, ``study2.arms``):
    ``{mechanism: [methods]}`` (arms named ``<mechanism>_<method>``) or a list of ``{name,
    mechanism, method, title}`` (``title``, the legend text, defaults to the name)."""
    if isinstance(entry, Mapping) and entry:
        arms = [
            _arm(f"{key}.{mechanism}", mechanism, method)
            for mechanism, methods in entry.items()
            for method in (methods if isinstance(methods, list) else [methods])
        ]
    elif isinstance(entry, list) and entry:
        arms = [
            _arm(f"{key}[{k}]", spec.get("mechanism"), spec.get("method"),
                 str(spec.get("name") or ""), str(spec.get("title") or ""))
            for k, spec in enumerate(entry)
        ]  # fmt: skip
    else:
        raise StudyConfigError(
            f"config key {key}: got {entry!r}; expected mechanism: [methods], e.g. {{pg: "
            "[certified], truncated: [certified, exact]}, or a list of {name, mechanism, "
            "method, title}"
        )
    names = [arm.name for arm in arms]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise StudyConfigError(f"config key {key}: arm(s) {repeated} given twice; expected "
                               "distinct arms")  # fmt: skip
    return tuple(arms)


def study_definition(name: str, entry: Mapping, base: Path = Path()) -> StudyDefinition:
    """Check one ``studies.<name>`` entry (defaults already filled by the schema)."""
    get = entry.get
    keys = tuple(get("keys") or ())
    if not keys:
        _fail(name, "keys", "no key column; expected the columns that identify a stratum")
    for key in ("count", "population"):
        if not isinstance(get(key), str) or not get(key):
            _fail(name, key, f"got {get(key)!r}; expected a column name")
    attributes = tuple(get("attributes") or ())
    named = [*keys, get("count"), get("population"), *attributes]
    repeated = sorted({c for c in named if named.count(c) > 1})
    if repeated:
        _fail(name, "keys", f"column(s) {repeated} named twice among keys, count, population "
              "and attributes")  # fmt: skip
    area = get("area")
    if area is not None and area not in keys:
        _fail(name, "area", f"{area!r} is not one of the keys {list(keys)}")
    geometry = get("geometry") or {}
    if geometry and area is None:
        _fail(name, "geometry", f"maps need an area key: set studies.{name}.area")
    missing = _filled(name, entry, "geometry", "missing") if geometry else "refuse"
    if missing not in GEOMETRY_MISSING:
        _fail(name, "geometry.missing", f"got {missing!r}; expected {list(GEOMETRY_MISSING)}")
    age = get("age") or {}
    age_column = age.get("column")
    if age and age_column not in keys:
        _fail(name, "age.column", f"{age_column!r} is not one of the keys {list(keys)}")
    if age and not age.get("standard_population"):
        _fail(name, "age.standard_population", "missing; expected the standard population CSV")

    prior_entry = _filled(name, entry, "prior")
    source = _filled(name, entry, "prior", "source")
    if source not in PRIOR_SOURCES:
        _fail(name, "prior.source", f"got {source!r}; expected one of {list(PRIOR_SOURCES)}")
    prior = Prior(source=source)
    if source == "sanitised":
        by = tuple(prior_entry.get("by") or ())
        unknown = [c for c in by if c not in (*keys, *attributes)]
        if not by or unknown:
            _fail(name, "prior.by", f"got {list(by)!r}; expected key or attribute columns "
                  f"from {[*keys, *attributes]}")  # fmt: skip
        eps = _finite_positive(name, "prior.epsilon", prior_entry.get("epsilon"))
        prior = Prior(source, by=by, epsilon=eps)
    elif source == "file":
        if not prior_entry.get("path") or not prior_entry.get("column"):
            _fail(name, "prior", "source 'file' needs path and column (the prior-rate column)")
        prior = Prior(source, path=base / prior_entry["path"], column=prior_entry["column"],
                      source_note=prior_entry.get("source_note"))  # fmt: skip
    elif source == "column":
        if not prior_entry.get("column"):
            _fail(name, "prior.column", "missing; expected the input's public prior-rate column")
        prior = Prior(source, column=prior_entry["column"],
                      source_note=prior_entry.get("source_note"))  # fmt: skip

    arms = config_arms(f"studies.{name}.arms", get("arms"))
    if get("map_epsilons") and area is None:
        _fail(name, "map_epsilons", f"maps need an area key: set studies.{name}.area")
    try:
        epsilons, map_epsilons = grid_from_config(get("epsilons"), get("map_epsilons"))
    except GridError as error:
        _fail(name, error.key, error.problem)

    disparities, seen = [], set()
    for k, spec in enumerate(get("disparities") or []):
        label = spec.get("name")
        if not label or label in seen:
            _fail(name, f"disparities[{k}].name", f"got {label!r}; expected a unique name")
        seen.add(label)
        disparities.append(
            Disparity(
                label,
                _filter(name, f"disparities[{k}].numerator", spec.get("numerator")),
                _filter(name, f"disparities[{k}].denominator", spec.get("denominator")),
                _filter(name, f"disparities[{k}].where", spec.get("where")) or {},
                str(spec.get("label") or ""),
            )
        )
    margins = []
    for k, combination in enumerate(get("margins") or []):
        unknown = [c for c in combination if c not in keys]
        if unknown or len(set(combination)) != len(combination) or len(combination) < 2:
            _fail(name, f"margins[{k}]", f"got {list(combination)!r}; expected two or more "
                  f"distinct keys from {list(keys)}")  # fmt: skip
        ordered = tuple(c for c in keys if c in combination)  # the keys' order: one name
        if ordered in margins:
            _fail(name, f"margins[{k}]", f"{list(combination)!r} is given twice")
        margins.append(ordered)
    suppression = None
    if _filled(name, entry, "suppression", "enabled"):
        spec = {key: _filled(name, entry, "suppression", key) for key in (
            "low", "high", "show_zeros", "complementary", "completion", "published",
            "sets")}  # fmt: skip
        if spec["high"] < spec["low"]:
            _fail(name, "suppression.high", f"got {spec['high']}, below low {spec['low']}; "
                  "expected low <= high (CDC WONDER: 1 and 9)")  # fmt: skip
        published = spec["published"]
        if published is None:  # every key's and every pair of keys' totals
            from itertools import combinations

            published = [[key] for key in keys] + [list(p) for p in combinations(keys, 2)]
        for k, columns in enumerate(published):
            unknown = [c for c in columns if c not in (*keys, *attributes)]
            if unknown:
                _fail(name, f"suppression.published[{k}]", f"{unknown} are not key or "
                      f"attribute columns; expected columns of {[*keys, *attributes]}")  # fmt: skip
        spec["published"] = tuple(tuple(map(str, columns)) for columns in published)
        suppression = Suppression(**spec)
    tolerance = _finite_positive(
        name, "guide.tolerance", _filled(name, entry, "guide", "tolerance")
    )
    rounding = _filled(name, entry, "rounding")
    if rounding not in ROUNDING:
        _fail(name, "rounding", f"got {rounding!r}; expected one of {list(ROUNDING)}")
    failure = _filled(name, entry, "on_calibration_failure")
    if failure not in ON_FAILURE:
        _fail(name, "on_calibration_failure", f"got {failure!r}; expected {list(ON_FAILURE)}")
    tail = _filled(name, entry, "truncation", "tail")
    if tail is not None and not (isinstance(tail, (int, float)) and 0 < tail < 1):
        _fail(name, "truncation.tail", f"got {tail!r}; expected a number in (0, 1) or null")
    inflation = _finite_positive(
        name, "truncation.inflation", _filled(name, entry, "truncation", "inflation")
    )
    denominator = _filled(name, entry, "denominator")
    if denominator not in DENOMINATORS:
        _fail(name, "denominator", f"got {denominator!r}; expected one of {list(DENOMINATORS)}")
    population_keys = tuple(get("population_keys") or keys)
    unknown = [c for c in population_keys if c not in keys]
    if unknown:
        _fail(name, "population_keys", f"{unknown} not among the keys {list(keys)}")
    stream = tuple(str(part) for part in (get("stream") or ["studies", name]))
    for key in ("sets", "sets_per_job", "epsilons_per_job", "batch"):
        value = _filled(name, entry, key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            _fail(name, key, f"got {value!r}; expected an integer >= 1")
    coverage = _coverage(name, entry, area, epsilons)
    return StudyDefinition(
        name=name,
        title=str(get("title") or name),
        table=base / get("table"),
        keys=keys,
        count=get("count"),
        population=get("population"),
        rows=_filter(name, "rows", get("rows")),
        attributes=attributes,
        area=area,
        geometry=base / geometry["path"] if geometry else None,
        geometry_key=geometry.get("key", area) if geometry else None,
        geometry_outline=geometry.get("outline"),
        geometry_missing=missing,
        population_keys=population_keys,
        age=age_column,
        standard_population=base / age["standard_population"] if age else None,
        age_bands=_age_bands(name, age.get("bands")) if age else None,
        single_years=bool(age) and age.get("bands") == SINGLE_YEARS,
        prior=prior,
        arms=tuple(arms),
        epsilons=epsilons,
        map_epsilons=map_epsilons,
        sets=get("sets"),
        sets_per_job=get("sets_per_job"),
        epsilons_per_job=get("epsilons_per_job"),
        batch=entry["batch"],
        stream=stream,
        tail=None if tail is None else float(tail),
        inflation=inflation,
        disparities=tuple(disparities),
        tolerance=tolerance,
        rounding=rounding,
        on_calibration_failure=failure,
        wonder=_filled(name, entry, "format") == "wonder",
        denominator=denominator,
        margins=tuple(margins),
        suppression=suppression,
        coverage=coverage,
    )


def _coverage(name: str, entry: Mapping, area, epsilons) -> Coverage | None:
    """The ``coverage`` setting, checked (None where it is not enabled)."""
    if not _filled(name, entry, "coverage", "enabled"):
        return None
    if area is None:
        _fail(name, "coverage", f"the areas' rates need an area key: set studies.{name}.area")
    if "datasets" in (entry.get("coverage") or {}):
        _fail(name, "coverage.datasets", "is renamed coverage.releases: the number of "
              "releases of coverage.sets sets each (it draws releases x sets tables); e.g. "
              "datasets: 50 with sets: 5 is releases: 10")  # fmt: skip
    spec = {key: _filled(name, entry, "coverage", key) for key in (
        "level", "sets", "releases", "epsilons", "methods")}  # fmt: skip
    if not 0 < spec["level"] < 1:
        _fail(name, "coverage.level", f"got {spec['level']!r}; expected a number in (0, 1)")
    if spec["releases"] < 2:
        _fail(name, "coverage.releases", f"got {spec['releases']}: expected at least 2 "
              "releases for a Monte Carlo error")  # fmt: skip
    if spec["epsilons"] is None:
        spec["epsilons"] = list(epsilons)
    outside = [e for e in spec["epsilons"] if not at_epsilon(list(epsilons), e).any()]
    if outside:
        _fail(name, "coverage.epsilons", f"{outside} are not in the study's grid "
              f"{[float(f'{e:.6g}') for e in epsilons]}; expected epsilons of it")  # fmt: skip
    spec["epsilons"] = tuple(float(e) for e in spec["epsilons"])
    spec["methods"] = tuple(dict.fromkeys(spec["methods"]))
    return Coverage(**spec)
