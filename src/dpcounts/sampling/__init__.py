"""Exact samplers of the distributions whose privacy is analysed."""
