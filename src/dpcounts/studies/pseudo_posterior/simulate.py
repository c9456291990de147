"""The simulated data sets of Hu et al. (2020), Section 3: a Poisson and a skewed NB mixture.

A data set is a mixture of components, each Poisson (``dispersion`` null) or negative
binomial with mean ``mean`` and size ``dispersion`` (variance mean + mean^2 / dispersion).
One Poisson component with a large mean gives the nearly symmetric data of sec 3.1; two
NB components give the strongly skewed data of sec 3.2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def simulate_counts(
    size: int, components: Sequence[Mapping], rng: np.random.Generator
) -> np.ndarray:
    """``size`` counts from the mixture ``components`` (keys weight, mean, dispersion)."""
    if not isinstance(size, (int, np.integer)) or size < 2:
        raise ValueError(f"size must be an integer >= 2, got {size!r}")
    if not components:
        raise ValueError("components must list at least one mixture component")
    weights = np.array([float(c["weight"]) for c in components])
    if np.any(weights <= 0) or not np.isclose(weights.sum(), 1.0):
        raise ValueError(f"component weights must be positive and sum to 1, got {weights}")
    label = rng.choice(len(components), size=size, p=weights)
    counts = np.empty(size, dtype=np.int64)
    for k, component in enumerate(components):
        mean, dispersion = float(component["mean"]), component.get("dispersion")
        if not mean > 0:
            raise ValueError(f"component {k}: mean must be positive, got {mean!r}")
        n_k = int(np.sum(label == k))
        if dispersion is None:
            counts[label == k] = rng.poisson(mean, size=n_k)
        else:
            dispersion = float(dispersion)
            if not dispersion > 0:
                raise ValueError(f"component {k}: dispersion must be positive or null")
            counts[label == k] = rng.negative_binomial(
                dispersion, dispersion / (dispersion + mean), size=n_k
            )
    return counts
