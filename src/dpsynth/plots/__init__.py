"""Figures and maps (matplotlib/seaborn/geopandas); every function returns a Figure."""
