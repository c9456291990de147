# Helpers shared by every stage: target paths, figure formats.


def figure_paths(stem):
    """One path per configured figure format, e.g. figures/x.png and figures/x.pdf."""
    return [f"figures/{stem}.{fmt}" for fmt in config["figure_formats"]]


def all_targets():
    """Everything `make` builds: the figures of each enabled stage."""
    targets = []
    targets += data_figures()
    return targets
