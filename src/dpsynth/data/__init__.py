"""Inputs: the 1980 county frame, modelled age groups, Pennsylvania strata, CDC WONDER."""
