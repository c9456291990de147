"""Weighted Poisson and negative binomial synthesizers for a vector of counts.

The pseudo likelihood is prod_i p(y_i | theta)^alpha_i: record i's log-likelihood is
multiplied by its weight alpha_i (Hu et al. (2020), eq 2 and its Stan appendix). Both models have an
intercept only, as in the seed's simulations:

- Poisson: y_i ~ Poisson(mu), mu ~ Gamma(0.1, 3e-5) (shape, rate). The prior is conjugate,
  so the pseudo posterior is exactly Gamma(0.1 + sum_i alpha_i y_i, 3e-5 + sum_i alpha_i);
  ``conjugate`` draws it without MCMC and holds the prior's constants, which this model
  uses too, so the exact draws and NUTS target the same distribution. NUTS samples
  log mu, whose prior is the law of the log of that gamma variable (log mu has prior mean
  -0.01 and sd 10.07, matching the Normal(0, 10) on log mu this model had before).
- Negative binomial: y_i ~ NB(mean mu, size phi) (variance mu + mu^2 / phi),
  log mu ~ Normal(0, 10), log phi ~ Normal(0, 10). Not conjugate: sampled by NUTS.

The priors are weakly informative on the log scale; with 1,000 records the (weighted)
likelihood dominates them. ``dpcounts.studies.pseudo_posterior.likelihood`` evaluates the same
record-level log-likelihoods in NumPy.
"""

from __future__ import annotations

from dpcounts import extras

try:
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
except ModuleNotFoundError as error:  # the extra 'mcmc' (pip install 'dpcounts[mcmc]')
    extras.raise_missing("mcmc", __name__, error)

from dpcounts.studies.pseudo_posterior.conjugate import MU_PRIOR_RATE, MU_PRIOR_SHAPE

PRIOR_SCALE = 10.0


def log_gamma_prior() -> dist.Distribution:
    """The law of log mu when mu ~ Gamma(MU_PRIOR_SHAPE, MU_PRIOR_RATE)."""
    return dist.TransformedDistribution(
        dist.Gamma(MU_PRIOR_SHAPE, MU_PRIOR_RATE), dist.transforms.ExpTransform().inv
    )


def poisson_model(y, weights) -> None:
    """Weighted Poisson pseudo likelihood of ``y``; mu ~ Gamma (the conjugate prior)."""
    log_mu = numpyro.sample("log_mu", log_gamma_prior())
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
