# Helpers shared by every stage: target paths, figure formats, Study 1's design.
import os

from snakemake.io import report as captioned

from dpsynth.design import chunk_labels, epsilon_grid


def figure_paths(stem):
    """One path per configured figure format, e.g. figures/x.png and figures/x.pdf."""
    return [f"figures/{stem}.{fmt}" for fmt in config["figure_formats"]]


def report_figures(stem, caption, category, subcategory=None):
    """figure_paths(stem), the PNG flagged for the HTML report with its caption
    (an .rst under workflow/report/, Jinja-templated with the run's config)."""
    caption_path = os.path.join(workflow.basedir, "workflow", "report", caption)
    return [
        (
            captioned(
                path, caption=caption_path, category=category, subcategory=subcategory
            )
            if path.endswith(".png")
            else path
        )
        for path in figure_paths(stem)
    ]


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
