"""One MCMC fit of a weighted synthesizer, and the convergence check it must pass.

The fit keeps the unweighted record-level log-likelihood of every draw (``loglik``, shape
(S, n)); ``weighted_loglik`` is ``weights * loglik``, the quantity whose bound is the
privacy guarantee. NUTS runs its chains vectorised in one process, seeded by a key drawn
from the caller's numpy Generator: nothing is seeded globally.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import numpy as np
from numpyro.diagnostics import effective_sample_size, split_gelman_rubin
from numpyro.infer import MCMC, NUTS

from dpsynth.pseudo_posterior.likelihood import check_family, parameter_names
from dpsynth.pseudo_posterior.models import MODELS
from dpsynth.pseudo_posterior.posterior import PosteriorFit


class ConvergenceError(RuntimeError):
    """The MCMC of a fit failed its R-hat or effective-sample-size check."""


@dataclass(frozen=True)
class MCMCSettings:
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


@functools.lru_cache(maxsize=4)
def _sampler(family: str, settings: MCMCSettings) -> MCMC:
    """One NUTS sampler per family and settings, reused so that a process compiles it once.

    ``jit_model_args`` makes the data and weights arguments of the compiled sampler, and
    ``run`` starts every fit afresh from its key (no state carries over between fits).
    """
    return MCMC(
        NUTS(MODELS[family], target_accept_prob=settings.target_accept),
        num_warmup=settings.warmup,
        num_samples=settings.samples,
        num_chains=settings.chains,
        chain_method="sequential",
        progress_bar=False,
        jit_model_args=True,
    )


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
    return {
        name: value + jitter * rng.standard_normal(chains)
        if chains > 1
        else np.asarray(value + jitter * rng.standard_normal())
        for name, value in values.items()
    }


def fit_weighted(
    y: np.ndarray,
    weights: np.ndarray,
    family: str,
    settings: MCMCSettings,
    rng: np.random.Generator,
) -> PosteriorFit:
    """Sample the weighted pseudo posterior of ``y`` with NUTS."""
    y = np.asarray(y)
    weights = np.asarray(weights, dtype=float)
    if y.ndim != 1 or y.size == 0 or np.any(y < 0) or not np.all(y == np.round(y)):
        raise ValueError("y must be a non-empty vector of non-negative integer counts")
    if weights.shape != y.shape or np.any((weights < 0) | (weights > 1)):
        raise ValueError(f"weights must be {y.shape[0]} values in [0, 1]")
    key = jax.random.PRNGKey(int(rng.integers(2**31)))
    mcmc = _sampler(check_family(family), settings)
    init = initial_values(y, weights, family, settings.chains, rng)
    mcmc.run(key, y=y.astype(np.int64), weights=weights, init_params=init)
    by_chain = {
        k: np.asarray(v, dtype=float) for k, v in mcmc.get_samples(group_by_chain=True).items()
    }
    names = parameter_names(family)
    rhat, ess = {}, {}
    for name in names:
        if settings.chains > 1:
            rhat[name] = float(split_gelman_rubin(by_chain[name]))
        else:
            rhat[name] = float("nan")
        ess[name] = float(effective_sample_size(by_chain[name]))
    draws = {name: by_chain[name].reshape(-1) for name in names}
    return PosteriorFit.from_draws(y, weights, draws, family, settings.chains, rhat, ess)


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
    if problems:
        raise ConvergenceError(
            f"MCMC of {label} did not converge: "
            + "; ".join(problems)
            + ". Raise pseudo_posterior.mcmc.warmup/samples or check the weights."
        )
