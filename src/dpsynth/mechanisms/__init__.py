"""Mechanism families, one module each (multinomial-Dirichlet, Poisson-gamma, baselines)."""
