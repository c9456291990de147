"""The one registry of mechanisms: a :class:`Family` record per mechanism family, the only
place that says what a mechanism is, and the study arms that are not release mechanisms.

A family holds its name and title, the calibration methods it accepts and which of them
are certified (with the section of ``docs/privacy.md`` or the paper that proves it), the
hyperparameter columns a release publishes, the settings it takes (``tail`` and
``inflation`` for truncation), whether it uses a prior, and three functions:

* ``calibrate(epsilon, total, population, prior_rate, method, settings) -> Calibration``
  from public inputs only (:func:`dpcounts.privacy.calibrate.calibrate` checks them
  first, then calls it);
* ``privacy_map(total, columns) -> (epsilon, how)``: the epsilon per set that published
  hyperparameters ``columns`` (a mapping of column name to values) prove, and how, the
  one function a release's check and ``dpcounts verify`` both use;
* ``draw(counts, calibration, size, rng) -> tables``: its sampler, size synthetic count
  vectors summing to the total (:func:`dpcounts.sampling.synthesize.synthesize`).

The CLI's ``--mechanism`` and ``--method`` choices, the config schema's enums
(``tools/write_schema_enums.py``, checked by ``make lint``), a study's arms, the
manifest's certified status and proof, verify's columns and privacy map, the figures'
labels and colours, and what the release path and Study 1 do differently by family (a
prior-blind method's early check, the lighter family a refusal for size suggests, a batch
calibration) are read from here; no module outside it compares a mechanism's name, and a
new mechanism is one :func:`register` call.
Arms of the studies that draw no release (``geometric``, ...) are registered with
:func:`register_baseline`. This module imports nothing: it is the vocabulary, at the
bottom layer, that a :class:`~dpcounts.calibration.Calibration` and an arm check their
names against. The papers' three families and the baselines are registered by
:mod:`dpcounts.privacy.families`, which the package imports first (``dpcounts/__init__``),
so they are known wherever the library is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

#: Relative tolerance of a privacy map's epsilon against the epsilon per set it must prove
#: (floating-point sums only): the release's own check and ``dpcounts verify``'s.
BOUND_RTOL = 1e-9


@dataclass(frozen=True)
class Family:
    """One mechanism family (see the module's docstring for the three functions)."""

    name: str
    title: str  # how legends and tables name it ("Truncated PG")
    methods: tuple[str, ...]  # the calibration methods it accepts, in the CLI's order
    #: method -> what proves its guarantee; a method not here is nominal
    certified: Mapping[str, str]
    hyperparameters: tuple[str, ...]  # the columns hyperparameters.parquet publishes
    calibrate: Callable
    privacy_map: Callable
    draw: Callable
    settings: tuple[str, ...] = ()  # options only this family takes (tail, inflation)
    uses_prior: bool = True  # whether its calibration reads prior rates
    #: a method with its own words in titles ("MD (exact alpha)" for every md method)
    method_titles: Mapping[str, str] = field(default_factory=dict)
    #: methods whose shapes and bounds do not read the prior rates (pg's certified): a
    #: release with a sanitised prior checks their calibration at a stand-in prior before
    #: spending, where any other is checked against the least rounding bound
    prior_blind: tuple[str, ...] = ()
    #: a family whose sampler of the same inputs is smaller, suggested when this one's is
    #: over the machine's limits (pg: truncated, whose strata are bounded)
    lighter: str | None = None
    #: method -> the calibration of many totals at once, bit for bit the family's own:
    #: ``(epsilon, totals, population, prior_rows) -> (a_rows, b_rows)`` (Study 1's
    #: sanitised arms, one calibration per dataset)
    calibrate_rows: Mapping[str, Callable] = field(default_factory=dict)
    #: how figures draw its arms: a colour per value of the arm's field ``colour_by``
    #: ("prior" or "method"; None: the one colour under None), and the line and marker of
    #: each arm's method, or of ``line_method`` for all (md's methods are one calibration)
    colours: Mapping[str | None, str] = field(default_factory=dict)
    colour_by: str | None = None
    line_method: str | None = None

    def is_certified(self, method: str) -> bool:
        return method in self.certified

    def proven_epsilon(self, cal) -> tuple[float, str]:
        """(epsilon, how): the privacy map of a calibration of this family, from the
        columns it publishes (:attr:`hyperparameters`), as ``dpcounts verify`` recomputes it
        from the published file."""
        names = ("a", "b", "population", "prior_rate", "lower", "upper")
        columns = {name: getattr(cal, name) for name in names}
        return self.privacy_map(cal.total, {c: columns[c] for c in self.hyperparameters})

    @property
    def bounded(self) -> bool:
        """Whether its calibrations carry truncation bounds (it takes ``tail``)."""
        return "tail" in self.settings


@dataclass(frozen=True)
class Baseline:
    """A study arm that is not a release mechanism: no calibration method, no release."""

    name: str
    title: str
    colour: str = "tab:cyan"  # how figures draw it (a dash-dot line with diamonds)


_FAMILIES: dict[str, Family] = {}
_BASELINES: dict[str, Baseline] = {}


def register(family: Family) -> Family:
    """Add ``family`` (a name already taken is refused: one record per family)."""
    if family.name in _FAMILIES or family.name in _BASELINES:
        raise ValueError(f"mechanism {family.name!r} is registered already")
    unknown = sorted(set(family.certified) - set(family.methods))
    if unknown:
        raise ValueError(f"{family.name}: certified methods {unknown} are not among its "
                         f"methods {list(family.methods)}")  # fmt: skip
    _FAMILIES[family.name] = family
    return family


def register_baseline(baseline: Baseline) -> Baseline:
    """Add a study arm that is not a release mechanism."""
    if baseline.name in _FAMILIES or baseline.name in _BASELINES:
        raise ValueError(f"arm kind {baseline.name!r} is registered already")
    _BASELINES[baseline.name] = baseline
    return baseline


def unregister(name: str) -> None:
    """Remove a family or baseline (a test's toy, when the test ends)."""
    _FAMILIES.pop(name, None)
    _BASELINES.pop(name, None)


def family(name: str) -> Family:
    """The family called ``name``; an unknown name is refused naming the known ones."""
    try:
        return _FAMILIES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown mechanism {name!r}; expected one of {names()}") from None


def names() -> tuple[str, ...]:
    """Every registered mechanism, in registration order."""
    return tuple(_FAMILIES)


def methods() -> tuple[str, ...]:
    """Every calibration method of some family, in first-seen order."""
    return tuple(dict.fromkeys(m for f in _FAMILIES.values() for m in f.methods))


def baselines() -> tuple[str, ...]:
    """Every registered study arm that is not a release mechanism."""
    return tuple(_BASELINES)


def baseline(name: str) -> Baseline:
    try:
        return _BASELINES[name]
    except KeyError:
        raise ValueError(f"unknown baseline {name!r}; expected one of {baselines()}") from None
