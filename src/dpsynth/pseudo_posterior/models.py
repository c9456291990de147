"""Weighted Poisson and negative binomial synthesizers for a vector of counts.

The pseudo likelihood is prod_i p(y_i | theta)^alpha_i: record i's log-likelihood is
multiplied by its weight alpha_i (seed 004 eq 2 and its Stan appendix). Both models have an
intercept only, as in the seed's simulations:

- Poisson: y_i ~ Poisson(mu), log mu ~ Normal(0, 10).
- Negative binomial: y_i ~ NB(mean mu, size phi) (variance mu + mu^2 / phi),
  log mu ~ Normal(0, 10), log phi ~ Normal(0, 10).

The priors are weakly informative on the log scale; with 1,000 records the (weighted)
likelihood dominates them. ``dpsynth.pseudo_posterior.likelihood`` evaluates the same
record-level log-likelihoods in NumPy.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

PRIOR_SCALE = 10.0


def poisson_model(y, weights) -> None:
    """Weighted Poisson pseudo likelihood of ``y``."""
    log_mu = numpyro.sample("log_mu", dist.Normal(0.0, PRIOR_SCALE))
    record = dist.Poisson(numpyro.deterministic("mu", jnp.exp(log_mu)))
    numpyro.factor("weighted_loglik", jnp.sum(weights * record.log_prob(y)))


def negbin_model(y, weights) -> None:
    """Weighted negative binomial pseudo likelihood of ``y`` (mean mu, size phi)."""
    log_mu = numpyro.sample("log_mu", dist.Normal(0.0, PRIOR_SCALE))
    log_phi = numpyro.sample("log_phi", dist.Normal(0.0, PRIOR_SCALE))
    mu = numpyro.deterministic("mu", jnp.exp(log_mu))
    phi = numpyro.deterministic("phi", jnp.exp(log_phi))
    record = dist.NegativeBinomial2(mean=mu, concentration=phi)
    numpyro.factor("weighted_loglik", jnp.sum(weights * record.log_prob(y)))


MODELS = {"poisson": poisson_model, "negbin": negbin_model}
