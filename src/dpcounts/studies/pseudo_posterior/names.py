"""The study's names: its synthesizers, in the order they are fitted and drawn, and the
label of the confidential data in the utility and synthetic tables. Their own module, so
that what only draws the tables (the figures) imports no sampler."""

SYNTHESIZERS = ("unweighted", "LW", "CW", "SW", "LW_final", "CW_final")
DATA = "data"  # label of the confidential data in utility and synthetic tables
