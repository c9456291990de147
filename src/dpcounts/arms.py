"""The studies' vocabulary, written once: mechanism, calibration method, prior, arm.

- A **mechanism** draws synthetic counts given their total: ``md``
  (multinomial-Dirichlet, Quick (2021), Section 2.1), ``pg`` (Poisson-gamma, Quick (2021),
  Section 2.2) or ``truncated`` (truncated PG, Quick (2022), Section 2.3); the one list is
  :data:`dpcounts.calibration.MECHANISMS`.
- A **calibration method** chooses a mechanism's hyperparameters for an epsilon:
  ``paper``, ``exact`` or ``certified`` (:data:`dpcounts.calibration.METHODS`).
- A **baseline** perturbs the counts themselves and has no calibration: ``geometric``
  (two-sided geometric output perturbation, the baseline Study 1 adds to Quick (2021)'s
  Section 3).
- A **prior** says where a PG arm's prior rates come from (:data:`PRIORS`); ``None`` is
  the study's own (``studies.<name>.prior`` in the config).
- An **arm** (:class:`Arm`) is one line of a study's figures, the thing a legend names: a
  mechanism or baseline, a method, a prior, and its name. A study's arms are a table of
  :class:`Arm` values (Study 1's: :data:`dpcounts.studies.study1.ARMS`; the study stage's: the
  config's ``arms``), and every computation dispatches on an arm's fields, never on its
  name.
- A **dataset** is one draw of confidential counts; a **scenario** (Study 1, Quick (2021),
  Section 3) or a **study** (the study stage, :mod:`dpcounts.studies.stage`) is the public setting
  (strata, populations, true rates) the datasets are drawn in.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpcounts.calibration import MECHANISMS, METHODS

#: Arms that perturb the counts and have no calibration (no method).
BASELINES = ("geometric",)
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
        if self.mechanism in BASELINES:
            if self.method is not None:
                raise ValueError(f"baseline {self.mechanism!r} has no calibration method")
        elif self.mechanism not in MECHANISMS:
            raise ValueError(
                f"mechanism must be one of {MECHANISMS} or a baseline {BASELINES}, got "
                f"{self.mechanism!r}"
            )
        elif self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")
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
        return self.mechanism in BASELINES


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
MECHANISM_NAMES = {"md": "MD", "pg": "PG", "truncated": "Truncated PG"}
#: Each calibration method in words; ``{epsilon}`` stands for the symbol as the medium
#: writes it (:data:`EPSILON_TEXT` in tables, mathtext in figures).
METHOD_WORDS = {"paper": "paper calibration, nominal {epsilon}", "exact": "exact bivariate",
                "certified": "certified"}  # fmt: skip
BASELINE_NAMES = {"geometric": "geometric output perturbation"}


def human(key: str) -> str:
    """A config key or column name as words: underscores become spaces."""
    return str(key).replace("_", " ")


def mechanism_title(mechanism: str, method: str | None, epsilon: str = EPSILON_TEXT) -> str:
    """``Truncated PG (certified)``, from a mechanism and calibration method (``epsilon``:
    how the medium writes the symbol)."""
    if mechanism in BASELINE_NAMES:
        return BASELINE_NAMES[mechanism].capitalize()
    if mechanism == "md":
        return "MD (exact alpha)"  # Quick (2021), eq 5: paper and certified are one calibration
    words = METHOD_WORDS[method].format(epsilon=epsilon)
    return f"{MECHANISM_NAMES.get(mechanism, human(mechanism))} ({words})"


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
