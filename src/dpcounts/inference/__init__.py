"""What an analyst can infer from synthetic sets: the combining rules for fully synthetic
data (:mod:`.combining`) and the noise-aware posterior of the true counts from the sets and
their public hyperparameters (:mod:`.posterior`). Both take arrays and a calibration, never
a file: ``dpcounts estimate`` (:mod:`dpcounts.release.estimate`) reads a release folder
and calls them, and a study's coverage (:mod:`dpcounts.studies.stage.coverage`) scores
them on its own draws.
"""
