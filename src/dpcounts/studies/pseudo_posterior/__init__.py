"""Vector-weighted pseudo-posterior synthesizers (Hu, Savitsky and Williams 2020).

Each record's log-likelihood is multiplied by a weight alpha_i in [0, 1]; the weighted
pseudo posterior is drawn exactly where it is conjugate (Poisson with a gamma prior) and
by MCMC (NumPyro NUTS) otherwise, and synthetic data are drawn from its posterior
predictive. The overall Lipschitz bound Delta of the weighted log-likelihood gives
an (eps = 2 Delta)-DP guarantee local to the data.

Modules, one idea each:

- ``models``: the weighted Poisson and negative binomial models and their record-level
  log-likelihoods.
- ``conjugate``: exact draws of the weighted Poisson pseudo posterior, Gamma(a + sum w y,
  b + sum w), and the prior (a, b) the Poisson model shares with them.
- ``nuts``: NUTS compiled once per model and settings, reused by every fit.
- ``fitting``: one fit (exact or NUTS, explicit seed) and its convergence check.
- ``lipschitz``: record-level and overall Lipschitz bounds of a fit.
- ``weights``: the LW (Algorithm 1), CW (Algorithm 2) and SW weights.
- ``equal_privacy``: scaling weights until a fit's Delta matches a target.
- ``reweighting``: Algorithm 3, raising weights below the maximum bound.
- ``synthesis``: posterior-predictive synthetic data and their utility statistics, as
  the tables the workflow saves.
- ``simulate``: the two simulated data sets of the study.
- ``names``: the synthesizers' names and the data's label (what the figures need).
- ``study``: the synthesizers of the study, fitted in the order they depend on each other.
- ``tables``: the tables the workflow saves, the summary and checks, and every data set's
  tables gathered into one of each.
"""
