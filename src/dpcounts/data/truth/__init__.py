"""Study 1's true county death rates (Quick (2021), section 3.1).

The paper's truth is the posterior median of a spatial Poisson model fitted to 1980
heart-disease deaths from CDC WONDER; those counts cannot be had here. Two sources:

- :mod:`dpcounts.data.truth.model`: the modelled truth, 35-44 and the older age groups;
- :mod:`dpcounts.data.truth.observed`: smoothed observed rates of a CDC WONDER export;
- :mod:`dpcounts.data.truth.summary`: plain-number summaries of a truth (Moran's I);
- :mod:`dpcounts.data.truth.build`: one age group's truth and summary from the config, as
  the workflow saves them.
"""
