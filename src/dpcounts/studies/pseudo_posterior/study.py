"""The synthesizers of Hu et al. (2020)'s study, each fitted from the fits it depends on.

``unweighted`` comes first; LW's weights come from its record bounds (Algorithm 1) and
LW's Delta is the privacy target; CW (Algorithm 2) and SW are scaled to that Delta; the
re-weighted LW_final and CW_final (Algorithm 3) keep the Delta of LW and CW.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from dpcounts.studies.pseudo_posterior.equal_privacy import (
    EqualDeltaSettings,
    fit_at_delta,
    reweighted_rule,
    scaled_weights_rule,
)
from dpcounts.studies.pseudo_posterior.fitting import fit_method
from dpcounts.studies.pseudo_posterior.likelihood import check_family
from dpcounts.studies.pseudo_posterior.lipschitz import (
    LipschitzBounds,
    check_quantile,
    lipschitz_bounds,
)
from dpcounts.studies.pseudo_posterior.names import SYNTHESIZERS
from dpcounts.studies.pseudo_posterior.posterior import PosteriorFit
from dpcounts.studies.pseudo_posterior.weights import cw_weights, lw_weights

logger = logging.getLogger(__name__)

REFERENCES = {
    "unweighted": (),
    "LW": ("unweighted",),
    "CW": ("unweighted", "LW"),
    "SW": ("unweighted", "LW"),
    "LW_final": ("LW",),
    "CW_final": ("CW",),
}


@dataclass(frozen=True)
class StudySettings:
    """Everything a synthesizer's fit needs besides the data (config ``pseudo_posterior``)."""

    family: str
    lipschitz_quantile: float
    lw: Mapping = field(default_factory=lambda: {"c": 1.0, "g": 0.0})
    cw: Mapping = field(
        default_factory=lambda: {"radius": 0.1, "relative_radius": True, "c": 1.0, "g": 0.0}
    )
    mcmc: object = None  # fitting.MCMCSettings (draws per fit; NUTS settings)
    checks: object = None  # fitting.ConvergenceThresholds
    equal_delta: EqualDeltaSettings = field(default_factory=EqualDeltaSettings)
    method: str = "auto"  # fitting.fit_weighted: exact if conjugate, else NUTS

    def __post_init__(self):
        check_family(self.family)
        check_quantile(self.lipschitz_quantile)
        fit_method(self.family, self.method)

    @classmethod
    def from_config(cls, section: Mapping, dataset: str) -> StudySettings:
        from dpcounts.studies.pseudo_posterior.fitting import ConvergenceThresholds, MCMCSettings

        if dataset not in section["datasets"]:
            raise KeyError(
                f"pseudo_posterior.datasets has no data set {dataset!r}; "
                f"expected one of {sorted(section['datasets'])}"
            )
        return cls(
            family=section["datasets"][dataset]["model"],
            lipschitz_quantile=section["lipschitz_quantile"],
            lw=dict(section["lw"]),
            cw=dict(section["cw"]),
            mcmc=MCMCSettings(**section["mcmc"]),
            checks=ConvergenceThresholds(**section["mcmc_checks"]),
            equal_delta=EqualDeltaSettings(**section["equal_delta"]),
        )


@dataclass
class SynthesizerFit:
    """One synthesizer's fit, its Lipschitz bounds and how its weights were tuned."""

    name: str
    fit: PosteriorFit
    bounds: LipschitzBounds
    target_delta: float | None = None  # the Delta it was scaled to (None: not scaled)
    constant: float | None = None  # scale (CW, SW) or Algorithm 3's k (the finals)
    history: list[dict] = field(default_factory=list)

    @classmethod
    def from_fit(cls, name, fit, quantile, target_delta=None, constant=None, history=()):
        bounds = lipschitz_bounds(fit.weighted_loglik, quantile)
        return cls(name, fit, bounds, target_delta, constant, list(history))


def run_synthesizer(
    name: str,
    y: np.ndarray,
    settings: StudySettings,
    references: Mapping[str, SynthesizerFit],
    rng: np.random.Generator,
) -> SynthesizerFit:
    """Fit synthesizer ``name`` on ``y``; ``references`` holds the fits of REFERENCES[name]."""
    from dpcounts.studies.pseudo_posterior.fitting import check_convergence, fit_weighted

    if name not in SYNTHESIZERS:
        raise ValueError(f"synthesizer must be one of {SYNTHESIZERS}, got {name!r}")
    missing = [ref for ref in REFERENCES[name] if ref not in references]
    if missing:
        raise ValueError(f"synthesizer {name} needs the fits of {missing}")
    y = np.asarray(y)
    q = settings.lipschitz_quantile

    def fit_with(weights):
        return fit_weighted(y, weights, settings.family, settings.mcmc, rng, settings.method)

    if name in ("unweighted", "LW"):
        if name == "unweighted":
            weights = np.ones(y.size)
        else:
            unweighted = references["unweighted"].bounds.record
            weights = lw_weights(unweighted, settings.lw["c"], settings.lw["g"])
        result = SynthesizerFit.from_fit(name, fit_with(weights), q)
    else:
        if name in ("CW", "SW"):
            target = references["LW"].bounds.delta
            if name == "CW":
                cw = settings.cw
                base = cw_weights(y, cw["radius"], cw["relative_radius"], cw["c"], cw["g"])
            else:
                base = np.ones(y.size)
            rule = scaled_weights_rule(base, target, q)
            reference = references["unweighted"].fit
        else:
            before = references[name.removesuffix("_final")]
            target = before.bounds.delta
            rule = reweighted_rule(before.fit.weights, target, q)
            reference = before.fit
        tuned = fit_at_delta(rule, fit_with, reference, target, q, settings.equal_delta)
        result = SynthesizerFit(
            name, tuned.fit, tuned.bounds, target, tuned.constant, tuned.history
        )
    check_convergence(result.fit, settings.checks, label=name)
    return result


def fit_synthesizers(
    y: np.ndarray, settings: StudySettings, rng: np.random.Generator
) -> dict[str, SynthesizerFit]:
    """Every synthesizer of :data:`SYNTHESIZERS` fitted on ``y``, in that order (each
    after the fits it needs), all drawing from ``rng``; each fit is logged (a failure too,
    before it is raised)."""
    fits: dict[str, SynthesizerFit] = {}
    for name in SYNTHESIZERS:
        try:
            fits[name] = result = run_synthesizer(name, y, settings, fits, rng)
        except Exception:
            logger.exception("fitting %s failed", name)
            raise
        logger.info(
            "%s: Delta %.4f (target %s), constant %s, R-hat %s, ESS %s, %d fit(s)",
            name,
            result.bounds.delta,
            result.target_delta,
            result.constant,
            result.fit.rhat,
            result.fit.ess,
            max(1, len(result.history)),
        )
    return fits
