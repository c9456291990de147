"""The studies: what each mechanism keeps, judged on simulated or real tables.

One wing of the library, above the mechanisms and samplers it judges:

- :mod:`.stage`: the study stage, a steward's own study from a config entry (its table,
  strata, arms, measures, epsilon guide and maps);
- :mod:`.study1`: Quick (2021), multinomial-Dirichlet against Poisson-gamma on four
  heterogeneity scenarios;
- :mod:`.study2`: Quick (2022), prior predictive truncation (the toy example and
  Pennsylvania);
- :mod:`.pseudo_posterior`: Hu, Savitsky and Williams (2020), the pseudo-posterior
  synthesizers;
- :mod:`.metrics`: the error measures the papers' studies share;
- :mod:`.intervals`: the standard no-privacy intervals of rates (exact Poisson) and of
  directly age-adjusted rates (Fay and Feuer's gamma interval, as R epitools'
  ``ageadjust.direct``), the reference an analyst's interval from a release is set against.

Nothing below this wing (mechanisms, sampling, the release) imports it, except the
release's report of a study it was given (``dpcounts synthesize --study``).
"""
