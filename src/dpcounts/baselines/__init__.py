"""The baselines the papers compare against, above the privacy layer: two-sided geometric
output perturbation (:mod:`~dpcounts.baselines.geometric`; Quick 2021, Section 4 and Quick
2022, Section 4) and MODIPS (:mod:`~dpcounts.baselines.modips`; Quick 2021, eq 18)."""
