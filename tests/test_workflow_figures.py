"""The figures the workflow's thin scripts ask the library for: the truth map and the
pseudo-posterior figure of a data set by kind."""

from __future__ import annotations

import re

import geopandas as gpd
import matplotlib.pyplot as plt
import pandas as pd
import pytest
from shapely.geometry import box
from workflow_helpers import REPO

from dpcounts.data.truth.build import SOURCES
from dpcounts.plots import pseudo_posterior
from dpcounts.plots.truth import SOURCE_LABELS, truth_map
from dpcounts.studies.pseudo_posterior.tables import GATHERED


def counties(codes=("01001", "01003", "01005")) -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame(
        {"fips": list(codes)},
        geometry=[box(-100 + k, 35, -99 + k, 36) for k in range(len(codes))],
        crs="EPSG:4326",
    )


@pytest.mark.parametrize(("source", "rates"), [("model", [5.0, 80.0]), ("wonder", [5.0, 80.0]),
                                               ("model", [20.0, 80.0])])  # fmt: skip
def test_truth_map_names_its_source_and_shows_plain_numbers(source, rates):
    """Rates spanning more than a decade are drawn in log colours (every map's rule,
    dpcounts.plots.maps.rate_scale), others in linear ones: plain numbers either way."""
    truth = pd.DataFrame({"fips": ["01001", "01005"], "rate_per_100k": rates})
    fig = truth_map(counties(), truth, source)
    try:
        assert SOURCE_LABELS[source] in fig.axes[0].get_title()
        colour_bar = fig.axes[-1].yaxis
        assert colour_bar.get_scale() == ("log" if rates[1] / rates[0] >= 10 else "linear")
        if colour_bar.get_scale() == "log":
            assert colour_bar.get_major_formatter()(30.0, 0) == "30"
        fig.canvas.draw()  # the labels drawn: plain numbers, minor ticks unlabelled
        labels = [t.get_text() for t in colour_bar.get_ticklabels()]
        # (a linear bar's labels are mathtext in the body font: $\mathdefault{30}$ reads 30)
        plain = [re.sub(r"^\$\\mathdefault\{(.*)\}\$$", r"\1", text) for text in labels]
        assert labels and all(re.fullmatch(r"[0-9.]+", text) for text in plain), labels
        assert not any(t.get_text() for t in colour_bar.get_ticklabels(minor=True))
    finally:
        plt.close(fig)


def test_truth_map_rejects_an_unknown_source_and_repeated_counties():
    assert list(SOURCE_LABELS) == list(SOURCES)  # a label for every truth.source
    truth = pd.DataFrame({"fips": ["01001", "01001"], "rate_per_100k": [20.0, 80.0]})
    with pytest.raises(ValueError, match=r"truth\.source must be one of"):
        truth_map(counties(), truth.iloc[:1], "survey")
    with pytest.raises(pd.errors.MergeError):
        truth_map(counties(), truth, "model")


def test_each_pseudo_posterior_figure_draws_its_own_table(monkeypatch):
    # kind: (the plotting function, the table it draws besides the summary)
    expected = {
        "lipschitz": ("lipschitz_violins", "records"),
        "weights": ("weight_violins", "records"),
        "utility_quantiles": ("utility_violins", "utility"),
        "utility_centre": ("utility_violins", "utility"),
        "posterior_mu": ("posterior_density", "posterior"),
        "reweighting": ("reweighting_scatter", "records"),
        "synthetic": ("synthetic_violins", "synthetic"),
    }
    for function, _ in expected.values():
        monkeypatch.setattr(pseudo_posterior, function, lambda *args, name=function: (name, args))
    tables = {key: pd.DataFrame({"table": [key]}) for key in GATHERED}
    assert list(pseudo_posterior.FIGURES) == list(expected)
    for kind, (function, table) in expected.items():
        name, args = pseudo_posterior.dataset_figure(kind, tables, "d")
        assert name == function
        assert args[0] is tables[table] and args[1] is tables["summary"] and args[2] == "d"
    assert pseudo_posterior.dataset_figure("utility_quantiles", tables, "d")[1][3] == (
        "q15",
        "q90",
    )
    assert pseudo_posterior.dataset_figure("utility_centre", tables, "d")[1][3] == (
        "mean",
        "median",
    )
    with pytest.raises(ValueError, match="figure must be one of"):
        pseudo_posterior.dataset_figure("histogram", tables, "d")


def test_the_workflow_asks_for_every_pseudo_posterior_figure():
    rules = (REPO / "workflow" / "rules" / "pseudo_posterior.smk").read_text()
    listed = re.search(r"PP_FIGURES = \[(.*?)\]", rules, re.DOTALL).group(1)
    assert re.findall(r'"(\w+)"', listed) == list(pseudo_posterior.FIGURES)
