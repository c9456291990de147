"""Calibrations (paper, certified, exact-optimised) and the exact privacy audit."""
