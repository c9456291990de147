"""The mechanism families and their public pieces, below the privacy layer: the
multinomial-Dirichlet (Quick 2021, eqs 2-5), the Poisson-gamma (Quick 2021, eqs 6-8) and
the truncation bounds of its truncated variant (Quick 2022, eq 8). Their calibrations to an
epsilon live in :mod:`dpcounts.privacy`, the baselines in :mod:`dpcounts.baselines`."""
