"""Basic sequential composition of a release, the one formula of its whole promise.

A release spends ``epsilon_prior`` on a sanitised prior (pure DP: discrete Laplace noise)
and draws ``sets`` independent sets, each (``epsilon_per_set``, ``delta_per_set``)-DP; by
basic composition the whole release is (epsilon_prior + sets x epsilon_per_set, sets x
delta_per_set)-DP (docs/privacy.md). The release's plan (``Plan.privacy_map``) and
``dpcounts verify`` (the promise's epsilon and delta) both compute it here.
"""

from __future__ import annotations


def compose(
    epsilon_prior: float, sets: int, epsilon_per_set: float, delta_per_set: float
) -> tuple[float, float]:
    """(epsilon, delta) of a release: the prior's pure epsilon_prior-DP noise, then ``sets``
    sets of (epsilon_per_set, delta_per_set) each."""
    return epsilon_prior + sets * epsilon_per_set, sets * delta_per_set
