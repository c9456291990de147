"""The draws of one weighted fit and the record-level log-likelihoods they imply.

Kept free of JAX so that jobs which only read saved draws (synthesis, summaries, figures)
do not pay for importing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dpcounts.studies.pseudo_posterior.likelihood import parameter_names, record_loglik


@dataclass
class PosteriorFit:
    """Draws of one weighted fit. ``draws[name]`` has shape (chains * samples,).

    ``sampler`` says how they were drawn: ``"nuts"`` (MCMC; ``rhat`` and ``ess`` are its
    diagnostics) or ``"exact"`` (independent draws of a conjugate pseudo posterior; R-hat 1,
    ESS the number of draws).
    """

    family: str
    y: np.ndarray
    weights: np.ndarray
    draws: dict[str, np.ndarray]
    chains: int
    loglik: np.ndarray = field(repr=False)
    rhat: dict[str, float]
    ess: dict[str, float]
    sampler: str = "nuts"

    @property
    def weighted_loglik(self) -> np.ndarray:
        return self.weights[None, :] * self.loglik

    @classmethod
    def from_draws(
        cls, y, weights, draws, family, chains, rhat=None, ess=None, sampler="nuts"
    ) -> PosteriorFit:
        """Rebuild a fit from saved draws; the log-likelihoods are recomputed from them."""
        y = np.asarray(y)
        draws = {name: np.asarray(draws[name], dtype=float) for name in parameter_names(family)}
        return cls(
            family=family,
            y=y,
            weights=np.asarray(weights, dtype=float),
            draws=draws,
            chains=int(chains),
            loglik=record_loglik(y, draws, family),
            rhat=dict(rhat or {}),
            ess=dict(ess or {}),
            sampler=sampler,
        )
