"""Figures and maps (matplotlib/geopandas); every function returns a Figure, styled by
:mod:`dpcounts.plots.style`."""
