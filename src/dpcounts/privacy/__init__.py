"""Calibrations (paper, certified, exact-optimised), the exact privacy audits, the exact
discrete Laplace (the geometric noise) and the sanitised prior (Quick 2021, eq 19)."""
