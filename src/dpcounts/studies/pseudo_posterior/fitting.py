"""One fit of a weighted synthesizer, and the convergence check it must pass.

A fit draws the weighted pseudo posterior in one of two ways (``method``):

- ``"exact"``: the model is conjugate (Poisson with its gamma prior), so its pseudo
  posterior Gamma(a + sum w y, b + sum w) is drawn directly (``conjugate``): independent
  draws, no MCMC, no JAX.
- ``"nuts"``: NumPyro's NUTS (``nuts``), the chains vectorised in one process and the
  sampler compiled once per model and settings, seeded by a key drawn from the caller's
  numpy Generator.

``"auto"`` (the default) is exact where the model is conjugate and NUTS otherwise (negative
binomial). Either way the fit keeps the unweighted record-level log-likelihood of every
draw (``loglik``, shape (S, n)); ``weighted_loglik`` is ``weights * loglik``, the quantity
whose bound is the privacy guarantee. Nothing is seeded globally.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpcounts import extras
from dpcounts.studies.pseudo_posterior.conjugate import exact_fit, is_conjugate
from dpcounts.studies.pseudo_posterior.likelihood import check_family, parameter_names
from dpcounts.studies.pseudo_posterior.posterior import PosteriorFit

METHODS = ("auto", "exact", "nuts")


class ConvergenceError(RuntimeError):
    """A fit failed its R-hat or effective-sample-size check.

    For MCMC, the chains did not converge or mix well enough; for exact (independent) draws,
    whose R-hat is 1 and ESS their number, there are fewer draws than ``min_ess``.
    """


@dataclass(frozen=True)
class MCMCSettings:
    """Draws per fit, ``chains * samples``, for every model; ``warmup`` and
    ``target_accept`` are NUTS's (exact conjugate draws ignore them)."""

    chains: int = 4
    warmup: int = 1000
    samples: int = 1000
    target_accept: float = 0.8

    def __post_init__(self):
        for key in ("chains", "warmup", "samples"):
            value = getattr(self, key)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"mcmc.{key} must be a positive integer, got {value!r}")
        if not 0 < self.target_accept < 1:
            raise ValueError(f"mcmc.target_accept must lie in (0, 1), got {self.target_accept!r}")


@dataclass(frozen=True)
class ConvergenceThresholds:
    max_rhat: float = 1.05
    min_ess: float = 400.0


def initial_values(y, weights, family, chains, rng, jitter=0.1) -> dict[str, np.ndarray]:
    """Chains start near the weighted moment estimates, spread by ``jitter`` on the log scale.

    NUTS spends most of a short run crossing from its default start (uniform on [-2, 2]) to
    a posterior that is a few thousandths wide on the log scale; starting close avoids it.
    """
    total = max(weights.sum(), 1e-12)
    mean = float(np.sum(weights * y) / total) + 0.5
    variance = float(np.sum(weights * (y - mean) ** 2) / total)
    values = {"log_mu": np.log(mean)}
    if family == "negbin":
        values["log_phi"] = np.log(mean**2 / (variance - mean) if variance > 1.1 * mean else 100.0)
    return {name: value + jitter * rng.standard_normal(chains) for name, value in values.items()}


def fit_method(family: str, method: str = "auto") -> str:
    """``"exact"`` or ``"nuts"``: how ``fit_weighted`` draws the pseudo posterior of ``family``."""
    check_family(family)
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "auto":
        return "exact" if is_conjugate(family) else "nuts"
    if method == "exact" and not is_conjugate(family):
        raise ValueError(f"the {family} pseudo posterior is not conjugate: use method 'nuts'")
    return method


def fit_weighted(
    y: np.ndarray,
    weights: np.ndarray,
    family: str,
    settings: MCMCSettings,
    rng: np.random.Generator,
    method: str = "auto",
) -> PosteriorFit:
    """Draw the weighted pseudo posterior of ``y``: exactly if conjugate, else with NUTS.

    Both give ``settings.chains * settings.samples`` draws; exact draws ignore ``warmup``.
    """
    y = np.asarray(y)
    weights = np.asarray(weights, dtype=float)
    if y.ndim != 1 or y.size == 0 or np.any(y < 0) or not np.all(y == np.round(y)):
        raise ValueError("y must be a non-empty vector of non-negative integer counts")
    if weights.shape != y.shape or np.any((weights < 0) | (weights > 1)):
        raise ValueError(f"weights must be {y.shape[0]} values in [0, 1]")
    if fit_method(family, method) == "exact":
        return exact_fit(y, weights, family, settings.chains, settings.samples, rng)

    try:  # NUTS needs the extra 'mcmc' (pip install 'dpcounts[mcmc]')
        from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

        from dpcounts.studies.pseudo_posterior.nuts import nuts_draws  # imports JAX
    except ModuleNotFoundError as error:
        extras.raise_missing("mcmc", "NUTS (dpcounts.studies.pseudo_posterior.fitting)", error)

    seed = int(rng.integers(2**31))
    init = initial_values(y, weights, family, settings.chains, rng)
    # sum_i w_i log p(y_i | theta) = sum_k W_k log p(k | theta), W_k the weight total of the
    # records with count k: NUTS evaluates each distinct count once (a few hundred, not n).
    counts, index = np.unique(y, return_inverse=True)
    totals = np.bincount(index.reshape(-1), weights=weights, minlength=counts.size)
    by_chain = nuts_draws(
        counts,
        totals,
        family,
        settings.chains,
        settings.warmup,
        settings.samples,
        settings.target_accept,
        seed,
        init,
    )
    names = parameter_names(family)
    rhat, ess = {}, {}
    for name in names:
        if settings.chains > 1:
            rhat[name] = float(split_gelman_rubin(by_chain[name]))
        else:
            rhat[name] = float("nan")
        ess[name] = float(effective_sample_size(by_chain[name]))
    draws = {name: by_chain[name].reshape(-1) for name in names}
    return PosteriorFit.from_draws(
        y, weights, draws, family, settings.chains, rhat, ess, sampler="nuts"
    )


def check_convergence(fit: PosteriorFit, thresholds: ConvergenceThresholds, label: str) -> None:
    """Raise ``ConvergenceError`` naming the fit, parameter and threshold that failed."""
    problems = []
    for name, value in fit.rhat.items():
        if np.isfinite(value) and value > thresholds.max_rhat:
            problems.append(
                f"R-hat of {name} is {value:.3f} > mcmc_checks.max_rhat = {thresholds.max_rhat}"
            )
    for name, value in fit.ess.items():
        if not value >= thresholds.min_ess:
            problems.append(
                f"effective sample size of {name} is {value:.0f} < "
                f"mcmc_checks.min_ess = {thresholds.min_ess}"
            )
    if problems and fit.sampler == "exact":
        raise ConvergenceError(
            f"exact draws of {label} fail the checks: "
            + "; ".join(problems)
            + ". Independent draws have an effective sample size equal to their number, "
            "pseudo_posterior.mcmc.chains x samples: raise samples."
        )
    if problems:
        raise ConvergenceError(
            f"MCMC of {label} did not converge: "
            + "; ".join(problems)
            + ". Raise pseudo_posterior.mcmc.warmup/samples or check the weights."
        )
