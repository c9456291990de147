"""Study 2's figures name and colour arms from the config (issue #16: arms are data): an
arm's legend is its ``title`` (default: its name), its colour the one every figure gives
it (dpcounts.plots.style.arm_style: by its mechanism, method and prior, never by its
place); the studies' titles head the figures."""

from __future__ import annotations

from pathlib import Path

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import pandas as pd
import pytest
import yaml
from workflow_helpers import filled_definition

from dpcounts.plots.study2 import figure_disparities, figure_shapes, figure_toy
from dpcounts.plots.style import arm_style, arm_title
from dpcounts.studies.stage.definition import config_arms

REPO = Path(__file__).resolve().parents[1]
ARMS = [
    {"name": "untruncated", "mechanism": "pg", "method": "paper", "title": "Plain PG"},
    {"name": "cut", "mechanism": "truncated", "method": "paper", "title": "Cut PG"},
    {"name": "cut_exact", "mechanism": "truncated", "method": "exact"},  # no title
]
EPSILONS = [0.5, 1.0, 2.0]


def summary(arms, metrics) -> pd.DataFrame:
    rows = [
        (arm.name, eps, metric, 2.0 + k, 1.5 + k, 2.5 + k, 1.2, 1.0)
        for k, arm in enumerate(arms)
        for eps in EPSILONS
        for metric in metrics
    ]
    columns = ["arm", "epsilon", "metric", "median", "lower", "upper", "truth", "prior"]
    return pd.DataFrame(rows, columns=columns)


def legend_colours(ax) -> dict[str, str]:
    return {line.get_label(): mcolors.to_hex(line.get_color()) for line in ax.get_lines()}


def test_the_config_titles_name_the_arms_and_their_fields_colour_them():
    arms = config_arms("study2.arms", ARMS)
    assert [arm.title for arm in arms] == ["Plain PG", "Cut PG", "cut_exact"]  # default: name
    metrics = ["gamma_shape", "gamma_shape_max"]
    fig = figure_shapes(summary(arms, metrics), 100, arms, "a study")
    # one panel per arm, titled by the arm's label (as in every figure) and in its colour
    assert [ax.get_title() for ax in fig.axes] == [arm_title(arm) for arm in arms]
    assert arm_title(arms[2]) == "cut exact: Truncated PG (exact bivariate)"
    for arm, ax in zip(arms, fig.axes, strict=True):
        colours = legend_colours(ax)
        for what in ("median of strata", "largest across strata"):
            assert colours[what] == mcolors.to_hex(arm_style(arm)["color"])
    assert fig.get_suptitle().endswith(": a study")
    plt.close(fig)


def test_the_disparity_figures_draw_the_truncated_arms_the_primary_with_its_band():
    arms = config_arms("study2.arms", ARMS)
    fig = figure_disparities(summary(arms, ["disparity:d"]), ["disparity:d"], ["(a) d"], arms,
                             arms[1], "a study", "prior: x", "Disparities")  # fmt: skip
    labels = [text.get_text() for text in fig.legends[0].get_texts()]
    exact = "cut exact: Truncated PG (exact bivariate)"  # no title: the vocabulary's label
    assert labels == ["Cut PG (median)", "Cut PG: 95% band over the sets",
                      f"{exact} (median)", "true data", "prior: x"]  # fmt: skip
    assert "Plain PG" not in " ".join(labels)  # the untruncated arm is left out, by its fields
    assert fig.get_suptitle() == "Disparities: a study"
    plt.close(fig)


def test_the_toy_draws_its_calibrations_as_the_arms_with_their_fields():
    arms = config_arms("study2.arms", ARMS)
    fig = figure_toy(100, [15, 85], 1.0, 10, 1e-4, arms)
    panel_b = legend_colours(fig.axes[1])
    assert mcolors.to_hex(arm_style(arms[0])["color"]) == panel_b["Plain PG"]
    assert mcolors.to_hex(arm_style(arms[2])["color"]) == panel_b[arm_title(arms[2])]
    assert "Cut PG" not in panel_b  # the toy has no paper-calibrated truncated curve
    plt.close(fig)
    with pytest.raises(ValueError, match="no arm with mechanism 'truncated' and method 'exact'"):
        figure_toy(100, [15, 85], 1.0, 10, 1e-4, arms[:2])


def test_a_study_is_titled_by_its_config_title_or_its_name(tmp_path):
    entry = {"table": "t.csv", "keys": ["k"], "count": "c", "population": "n",
             "arms": ARMS, "epsilons": [1.0], "sets": 1, "sets_per_job": 1,
             "epsilons_per_job": 1}  # fmt: skip
    assert filled_definition("s", entry).title == "s"
    assert filled_definition("s", entry | {"title": "Study S"}).title == "Study S"
    assert [a.title for a in filled_definition("s", entry).arms] == ["Plain PG", "Cut PG",
                                                                     "cut_exact"]  # fmt: skip


def test_the_study2_studies_run_the_arms_the_figures_name():
    """config/config.yaml: the studies pennlc and standin run study2.arms (the anchor), so
    every arm they run has its legend and colour."""
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for name in ("pennlc", "standin"):
        assert config["studies"][name]["arms"] == config["study2"]["arms"]
    arms = config_arms("study2.arms", config["study2"]["arms"])
    assert all(arm.title != arm.name for arm in arms)  # each has its own legend text
