"""The studies' vocabulary, written once: mechanism, calibration method, prior, arm.

- A **mechanism** draws synthetic counts given their total: ``md``
  (multinomial-Dirichlet, Quick (2021), Section 2.1), ``pg`` (Poisson-gamma, Quick (2021),
  Section 2.2) or ``truncated`` (truncated PG, Quick (2022), Section 2.3); the one list is
  the registry's (:mod:`dpcounts.mechanisms.registry`).
- A **calibration method** chooses a mechanism's hyperparameters for an epsilon:
  ``paper``, ``exact`` or ``certified`` (each family's ``methods`` in the registry).
- A **baseline** perturbs the counts themselves and has no calibration: ``geometric``
  (two-sided geometric output perturbation, the baseline Study 1 adds to Quick (2021)'s
  Section 3), registered as a study arm beside the mechanisms.
- A **prior** says where a PG arm's prior rates come from (:data:`PRIORS`); ``None`` is
  the study's own (``studies.<name>.prior`` in the config).
- An **arm** (:class:`Arm`) is one line of a study's figures, the thing a legend names: a
  mechanism or baseline, a method, a prior, and its name. A study's arms are a table of
  :class:`Arm` values (Study 1's: :data:`dpcounts.studies.study1.ARMS`; the study stage's: the
  config's ``arms``), and every computation dispatches on an arm's fields, never on its
  name.
- A **dataset** is confidential counts of people, real or simulated (Study 1 draws L per
  scenario); a **set** is one synthetic table drawn from a calibration (the study stage
  draws L per arm and epsilon). A **scenario** (Study 1, Quick (2021), Section 3) or a
  **study** (the study stage, :mod:`dpcounts.studies.stage`) is the public setting (strata,
  populations, true rates) the datasets are drawn in (docs/architecture.md, "One
  vocabulary").
"""

from __future__ import annotations

from dataclasses import dataclass

from dpcounts.mechanisms import registry

#: Study 1's priors (Quick (2021), Section 3): ``national`` (y. / sum n in every county),
#: ``state`` (the state rates of the truth, treated as public) and ``sanitised`` (the
#: state rates released with geometric noise, eq 19, paid from the arm's epsilon).
PRIORS = ("national", "state", "sanitised")


@dataclass(frozen=True)
class Arm:
    """One arm of a study: a mechanism (or baseline), a calibration method, a prior, and
    its name (file-safe; in file names, random streams, tables and legends; by default
    ``<mechanism>_<method>``, e.g. ``truncated_certified``) and legend title (by default
    the name)."""

    mechanism: str
    method: str | None = None
    name: str = ""
    prior: str | None = None
    title: str = ""

    def __post_init__(self) -> None:
        if self.mechanism in registry.baselines():
            if self.method is not None:
                raise ValueError(f"baseline {self.mechanism!r} has no calibration method")
        elif self.mechanism not in registry.names():
            raise ValueError(
                f"mechanism must be one of {registry.names()} or a baseline "
                f"{registry.baselines()}, got {self.mechanism!r}"
            )
        elif self.method not in registry.family(self.mechanism).methods:
            raise ValueError(
                f"method must be one of {registry.family(self.mechanism).methods} for "
                f"{self.mechanism}, got {self.method!r}"
            )
        if self.prior is not None and self.prior not in PRIORS:
            raise ValueError(f"prior must be one of {PRIORS} or None, got {self.prior!r}")
        if not self.name:
            name = self.mechanism if self.method is None else f"{self.mechanism}_{self.method}"
            object.__setattr__(self, "name", name)
        if not self.title:
            object.__setattr__(self, "title", self.name)

    @property
    def baseline(self) -> bool:
        """Whether the arm perturbs the counts instead of drawing from a calibration."""
        return self.mechanism in registry.baselines()


def arm_named(arms, name: str) -> Arm:
    """The arm called ``name`` among ``arms``."""
    for arm in arms:
        if arm.name == name:
            return arm
    raise ValueError(f"no arm {name!r}; expected one of {[arm.name for arm in arms]}")


# ---- the arms in words: the one vocabulary of legends, captions and tables ----------------
#: The symbol epsilon in plain text (tables, such as the guide's ``arm_label``); figures
#: write it in mathtext (:data:`dpcounts.plots.style.EPSILON`), which draws the same glyph.
EPSILON_TEXT = "ε"
#: Each calibration method in words; ``{epsilon}`` stands for the symbol as the medium
#: writes it (:data:`EPSILON_TEXT` in tables, mathtext in figures).
METHOD_WORDS = {"paper": "paper calibration, nominal {epsilon}", "exact": "exact bivariate",
                "certified": "certified"}  # fmt: skip


def mechanism_name(mechanism: str) -> str:
    """A mechanism's or baseline's title in the registry (``Truncated PG``); an unknown
    name in words."""
    if mechanism in registry.names():
        return registry.family(mechanism).title
    if mechanism in registry.baselines():
        return registry.baseline(mechanism).title
    return human(mechanism)


def human(key: str) -> str:
    """A config key or column name as words: underscores become spaces."""
    return str(key).replace("_", " ")


def mechanism_title(mechanism: str, method: str | None, epsilon: str = EPSILON_TEXT) -> str:
    """``Truncated PG (certified)``, from a mechanism and calibration method (``epsilon``:
    how the medium writes the symbol)."""
    if mechanism in registry.baselines():
        return registry.baseline(mechanism).title.capitalize()
    own = registry.family(mechanism).method_titles if mechanism in registry.names() else {}
    # md: Quick (2021), eq 5: paper and certified are one calibration, its exact alpha
    words = own.get(method) or METHOD_WORDS.get(method, human(str(method))).format(epsilon=epsilon)
    return f"{mechanism_name(mechanism)} ({words})"


def arm_title(arm: Arm, epsilon: str = EPSILON_TEXT) -> str:
    """An arm's label, the same in every figure, caption and table (``epsilon``: how the
    medium writes the symbol): its config ``title`` where it has one; else its mechanism
    and method (``Truncated PG (certified)``); an arm the config named otherwise without a
    title reads as its name in words, then what it is (``untruncated: PG (paper
    calibration, nominal ε)``), so no label is a config key."""
    if arm.title != arm.name:
        return arm.title
    what = mechanism_title(arm.mechanism, arm.method, epsilon)
    if arm.baseline or arm.name == Arm(arm.mechanism, arm.method).name:
        return what
    return f"{human(arm.name)}: {what}"
