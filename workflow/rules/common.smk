# Helpers shared by every stage: target paths, figure formats, Study 1's design.
from dpsynth.design import chunk_labels, epsilon_grid


def figure_paths(stem):
    """One path per configured figure format, e.g. figures/x.png and figures/x.pdf."""
    return [f"figures/{stem}.{fmt}" for fmt in config["figure_formats"]]


def all_targets():
    """Everything `make` builds: the figures of each enabled stage."""
    targets = []
    targets += data_figures()
    targets += truth_figures()
    targets += study1_figures()
    targets += study2_figures()
    targets += pseudo_posterior_figures()
    return targets


def study1_epsilons():
    """Study 1's epsilon grid: the log-spaced grid plus the map epsilons."""
    grid = config["study1"]["epsilons"]
    extra = config["study1"]["map_epsilons"]
    return epsilon_grid(grid["start"], grid["stop"], grid["num"], extra)


def study1_chunks():
    """Labels of Study 1's scoring jobs within one scenario x mechanism."""
    s1 = config["study1"]
    return chunk_labels(
        len(study1_epsilons()),
        s1["epsilons_per_job"],
        s1["datasets"],
        s1["datasets_per_job"],
    )
