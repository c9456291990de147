"""Study 2 (Quick 2022, "prior predictive truncation"): what is particular to it.

Study 2 is two configured studies of :mod:`dpcounts.studies.stage` (config ``studies.pennlc`` and
``studies.standin``): the generic stage calibrates, draws and measures them. Two modules:

- :mod:`dpcounts.studies.study2.tables`: their input tables (Section 3);
- :mod:`dpcounts.studies.study2.toy`: the toy example (Section 2.3, Figure 1).
"""
