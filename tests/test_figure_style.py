"""Every figure family drawn through the library's plot functions from small synthetic
inputs, then read back as a reviewer would (issue #28, the figures): log-axis tick labels
that do not run into each other (their rendered boxes), a y label on every data axes that
shows y tick labels, titles in words (no config key's underscore outside mathtext), one
colour map for rates, and whole-number distributions drawn as steps, not violins."""

from __future__ import annotations

import re
from pathlib import Path

import geopandas as gpd
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from shapely.geometry import box

from dpcounts.arms import Arm
from dpcounts.plots import pseudo_posterior, study, study1, study2
from dpcounts.plots.maps import county_choropleth
from dpcounts.plots.truth import truth_map
from dpcounts.studies.stage.guide import verdict_text
from dpcounts.studies.stage.measures import DISPARITY, KINDS, MEASURES, Measure

REPO = Path(__file__).resolve().parents[1]
#: The colour map every rate is drawn in (dpcounts.plots.style.RATE_CMAP).
RATE_CMAP = "viridis"
#: The default run's grids: where the old figures' labels collided.
STUDY_EPSILONS = np.geomspace(0.01, 100, 25)
STUDY2_EPSILONS = np.geomspace(0.01, 4, 20)
STUDY2_ARMS = [
    Arm("pg", "paper", name="untruncated", title="Untruncated PG (paper eq 6)"),
    Arm("truncated", "paper", name="truncated_paper", title="Truncated PG, paper eq 13"),
    Arm("truncated", "certified", name="truncated_certified", title="Truncated PG, certified"),
]
RNG_SEED = 28


# ---- what a reviewer checks -----------------------------------------------------------------
def _overlaps(boxes) -> list[tuple[int, int]]:
    return [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
            if boxes[i].overlaps(boxes[j])]  # fmt: skip


def tick_label_boxes(axis, renderer):
    """The rendered boxes and texts of an axis's visible, non-empty tick labels (major and
    minor) within its view."""
    lo, hi = sorted(axis.get_view_interval())
    found = []
    for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
        label = tick.label1
        if not (tick.get_visible() and label.get_visible() and label.get_text()):
            continue
        if not lo * (1 - 1e-9) <= tick.get_loc() <= hi * (1 + 1e-9):
            continue
        found.append((label.get_window_extent(renderer), label.get_text()))
    return found


def is_data_axes(ax) -> bool:
    """A plotting axes: visible, with ticks, not a colour bar or a map (no frame)."""
    if not ax.get_visible() or ax.get_label() == "<colorbar>" or not ax.axison:
        return False
    return bool(len(ax.get_xticks()) and len(ax.get_yticks()))


def unmath(text: str) -> str:
    """``text`` without its mathtext ($...$) parts."""
    return re.sub(r"\$[^$]*\$", "", text)


def problems(fig) -> list[str]:
    """What a reviewer would flag in ``fig``, drawn."""
    if not hasattr(fig.canvas, "get_renderer"):  # a Figure built without pyplot
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = []
    texts = [fig._suptitle.get_text() if fig._suptitle else ""]
    for k, ax in enumerate(fig.axes):
        texts += [ax.get_title(loc) for loc in ("left", "center", "right")]
        if not is_data_axes(ax):
            continue
        for axis in (ax.xaxis, ax.yaxis):
            labelled = tick_label_boxes(axis, renderer)
            boxes = [b for b, _ in labelled]
            for i, j in _overlaps(boxes):
                found.append(f"axes {k} ({ax.get_title()!r}): {axis.axis_name} tick labels "
                             f"{labelled[i][1]!r} and {labelled[j][1]!r} overlap")  # fmt: skip
            if axis.get_scale() == "log":
                powers = [text for _, text in labelled if re.search(r"10\^", text)]
                for _, text in labelled:
                    # matplotlib's own labels; a power of ten below a million on an axis
                    # that does not reach one (one style per axis: all plain numbers, or
                    # all powers of ten where the axis reaches a million)
                    if "\\mathdefault" in text or (
                        re.search(r"10\^\{?(-|[0-5](?!\d))", text)
                        and not any(re.search(r"10\^\{?([6-9]|\d\d)", p) for p in powers)
                    ):
                        found.append(f"axes {k}: log tick label {text!r} is no plain number")
                if powers and len(powers) != len(labelled):
                    found.append(f"axes {k}: {axis.axis_name} tick labels mix plain numbers "
                                 f"and powers of ten: {[t for _, t in labelled]}")  # fmt: skip
        if tick_label_boxes(ax.yaxis, renderer) and not ax.get_ylabel().strip():
            found.append(f"axes {k} ({ax.get_title()!r}) shows y values but has no y label")
    title = fig._suptitle.get_window_extent(renderer) if fig._suptitle else None
    for legend in fig.legends:  # a figure's legend covers neither the title nor a panel
        where = legend.get_window_extent(renderer)
        if title is not None and where.overlaps(title):
            found.append("the figure's legend covers its title")
        for k, ax in enumerate(fig.axes):
            if is_data_axes(ax) and where.overlaps(ax.get_window_extent(renderer)):
                found.append(f"the figure's legend covers axes {k} ({ax.get_title()!r})")
    for text in texts:
        if "_" in unmath(text):
            found.append(f"title {text!r} holds an underscore (a config key, not words)")
        if re.search(r"\beps\b|\bDelta\b|exp\(\+-", unmath(text)):
            found.append(f"title {text!r} writes a symbol in plain text")
    return found


def rate_colour_maps(fig) -> set[str]:
    """The colour maps of every mapped artist (maps, colour bars) of ``fig``."""
    names = set()
    for ax in fig.axes:
        for artist in [*ax.collections, *ax.images]:
            cmap = getattr(artist, "cmap", None)
            if cmap is not None and artist.get_array() is not None:
                names.add(cmap.name)
    return names


def assert_clean(fig):
    try:
        found = problems(fig)
        assert not found, "\n".join(found)
    finally:
        plt.close(fig)


# ---- small synthetic inputs -------------------------------------------------------------------
def band_rows(rng, arms, metrics, epsilons, centre=1.2, **extra) -> pd.DataFrame:
    rows = []
    for arm in arms:
        for metric in metrics:
            for eps in epsilons:
                spread = 0.3 / (1 + eps)
                median = centre * (1 + rng.normal(0, 0.02))
                rows.append(dict(arm=arm, metric=metric, epsilon=eps, median=median,
                                 lower=median - spread, upper=median + spread,
                                 truth=centre, prior=centre * 0.9, **extra))  # fmt: skip
    return pd.DataFrame(rows)


def measure_list():
    ratio = Measure(DISPARITY + "urban_rural", "Urban / rural counties", "rate ratio",
                    KINDS["ratio"], lambda *a: None)  # fmt: skip
    return (*MEASURES, ratio)


def study_inputs(rng):
    arms = [Arm("md", "paper"), Arm("pg", "paper", "untruncated"), Arm("truncated", "certified")]
    measures = measure_list()
    frames = []
    for m in measures:
        centre = {"rmse": 300.0, "relative_error": 0.2, "rank_correlation": 0.6}.get(m.name, 1.3)
        frame = band_rows(rng, [a.name for a in arms], [m.name], STUDY_EPSILONS, centre)
        if m.name == "rmse":  # errors span decades
            scale = 1 + 3000 / STUDY_EPSILONS[np.arange(len(frame)) % len(STUDY_EPSILONS)]
            frame[["median", "lower", "upper"]] *= scale[:, None]
        frames.append(frame)
    summary = pd.concat(frames, ignore_index=True)
    by_name = {a.name: a for a in arms}
    summary["mechanism"] = summary["arm"].map(lambda n: by_name[n].mechanism)
    summary["method"] = summary["arm"].map(lambda n: by_name[n].method)
    summary["reference"] = summary["truth"] * 1.02
    summary["truth_in_bounds"] = summary["truth"]
    # the guide's words as guide.csv has them, the longest among them
    guide = pd.DataFrame([
        dict(study="s", arm=a.name, measure=m.name, verdict=verdict, epsilon=eps,
             verdict_text=verdict_text(verdict, eps, 20, 180.0),
             epsilon_privacy=eps, epsilon_prior=0.5, tolerance=0.05, within_low=0.9,
             within_high=1.5, outside_bounds_share=0.01 if a.mechanism == "truncated" else 0.0)
        for a in arms for m, (verdict, eps) in zip(
            measures, [("met", 2.0), ("synthesis_loses", np.nan), ("truncation_stalls", np.nan),
                       ("more_sets", 0.3)],
            strict=True)
    ])  # fmt: skip
    return summary, guide, measures, arms


def study1_summary(rng, age_group=None) -> pd.DataFrame:
    arms = ["md", "pg_national", "pg_state", "pg_state_certified"]
    frames = [band_rows(rng, arms, ["rmse"], STUDY_EPSILONS, 0.0).assign(scenario=s)
              for s in (1, 2, 3, 4)]  # fmt: skip
    for frame in frames:
        frame[["median", "lower", "upper"]] = 50 / np.sqrt(frame[["epsilon"]].to_numpy()) * [
            1, 0.8, 1.25]  # fmt: skip
    metrics = ["rate_urban", "rate_rural", "rate_nm", "rate_ny"]
    frames.append(band_rows(rng, arms, metrics, STUDY_EPSILONS, 45.0).assign(scenario=4))
    frames.append(band_rows(rng, ["truth"], metrics, [np.nan], 45.0).assign(scenario=4))
    summary = pd.concat(frames, ignore_index=True)
    return summary if age_group is None else summary.assign(age_group=age_group)


def study2_summary(rng) -> pd.DataFrame:
    names = [a.name for a in STUDY2_ARMS]
    ratios = band_rows(rng, names, ["disparity:a", "disparity:b"], STUDY2_EPSILONS, 1.3)
    shapes = band_rows(rng, names, ["gamma_shape", "gamma_shape_max"], STUDY2_EPSILONS, 1.0)
    scale = 5000 / np.expm1(shapes["epsilon"].to_numpy())
    shapes[["median", "upper"]] *= scale[:, None]
    shapes["lower"] = 1e-3
    return pd.concat([ratios, shapes], ignore_index=True)


def squares(key: str, codes, crs="EPSG:4326") -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame({key: list(codes), "state": ["A", "B"] * (len(codes) // 2)},
                            geometry=[box(-100 + k, 35, -99 + k, 36) for k in range(len(codes))],
                            crs=crs)  # fmt: skip


def pseudo_posterior_tables(rng) -> dict[str, pd.DataFrame]:
    names = ["unweighted", "LW", "CW", "SW", "LW_final", "CW_final"]
    records = pd.concat([
        pd.DataFrame({"synthesizer": n, "lipschitz": rng.gamma(2, 1, 200),
                      "weight": np.full(200, 0.39) if n == "SW" else rng.beta(5, 1, 200)})
        for n in names])  # fmt: skip
    summary = pd.DataFrame({"synthesizer": names, "delta": [9.0, 3.5, 3.5, 3.6, 3.5, 3.5]})
    centres = {"q15": 4, "q90": 60, "mean": 30, "median": 25}
    utility = pd.concat([pd.DataFrame({"synthesizer": n, **{
        s: rng.poisson(lam, 20).astype(float) for s, lam in centres.items()}})
        for n in ["data", *names]])  # fmt: skip
    posterior = pd.concat([pd.DataFrame({"synthesizer": n, "mu": rng.normal(100, 2, 300)})
                           for n in names])  # fmt: skip
    synthetic = pd.concat([pd.DataFrame({"synthesizer": n, "value": rng.poisson(100, 200)})
                           for n in ["data", *names]])  # fmt: skip
    tables = dict(records=records, summary=summary, utility=utility, posterior=posterior,
                  synthetic=synthetic)  # fmt: skip
    return {k: v.assign(dataset="poisson") for k, v in tables.items()}


# ---- each family ---------------------------------------------------------------------------
@pytest.mark.slow
def test_the_study_stage_figures():
    rng = np.random.default_rng(RNG_SEED)
    summary, guide, measures, arms = study_inputs(rng)
    assert_clean(study.figure_measures(summary, guide, measures, arms, "s", adjusted=True))
    assert_clean(study.figure_guide(guide, measures, arms, STUDY_EPSILONS, "s"))


@pytest.mark.slow
def test_study1_figures():
    rng = np.random.default_rng(RNG_SEED)
    assert_clean(study1.figure_rmse(study1_summary(rng)))
    fig = study1.figure_disparities(study1_summary(rng), arms=["md", "pg_state"])
    letters = [re.match(r"\((\w)\)", ax.get_title()).group(1) for ax in fig.axes]
    assert len(set(letters)) == len(letters), f"panel letters repeat: {letters}"
    assert_clean(fig)
    older = pd.concat([study1_summary(rng, g) for g in ("45-54", "85+")], ignore_index=True)
    assert_clean(study1.figure_appendix_rmse(older))
    assert_clean(study1.figure_appendix_disparities(older))


@pytest.mark.slow
def test_study2_figures():
    rng = np.random.default_rng(RNG_SEED)
    summary = study2_summary(rng)
    fig = study2.figure_disparities(summary, ["disparity:a", "disparity:b"], ["(a) a", "(b) b"],
                                    STUDY2_ARMS, STUDY2_ARMS[1], "a study", "prior: public",
                                    "Disparities")  # fmt: skip
    assert_clean(fig)
    fig = study2.figure_shapes(summary, 5000, STUDY2_ARMS, "a study")
    legend = fig.legends[0].get_window_extent(fig.canvas.get_renderer())
    for ax in fig.axes:  # the legend covers no panel
        assert not legend.overlaps(ax.get_window_extent(fig.canvas.get_renderer()))
    assert_clean(fig)
    strata = pd.DataFrame({"sex": ["f", "m"] * 20, "age": np.repeat(range(20), 2),
                           "cases": rng.poisson(30, 40), "population": rng.integers(1e4, 1e6, 40),
                           "prior_rate": rng.uniform(1e-5, 1e-3, 40)})  # fmt: skip
    assert_clean(study2.figure_prior(strata, ["sex", "age"], "a study", "prior: public"))
    areas = [f"c{k}" for k in range(12)]
    truth = rng.uniform(40, 90, len(areas))
    area_rates = pd.concat([
        pd.DataFrame({"arm": "truth", "epsilon": np.nan, "area": areas, "rate": truth}),
        pd.DataFrame({"arm": "prior", "epsilon": np.nan, "area": areas, "rate": truth * 0.9}),
        *[pd.DataFrame({"arm": a.name, "epsilon": eps, "area": areas,
                        "rate": truth * rng.uniform(0.8, 1.2, len(areas))})
          for a in STUDY2_ARMS for eps in (1.0, 4.0)]])  # fmt: skip
    assert_clean(study2.figure_county_rates(area_rates, [1.0, 4.0], STUDY2_ARMS, STUDY2_ARMS[1],
                                            "a study"))  # fmt: skip
    fig = study2.figure_maps(squares("county", areas), area_rates, 1.0, STUDY2_ARMS[1], "a study")
    assert rate_colour_maps(fig) == {RATE_CMAP}
    assert_clean(fig)


def test_the_toy_writes_symbols_and_plain_ratios():
    arms = [*STUDY2_ARMS, Arm("truncated", "exact", title="Truncated PG, exact bivariate")]
    fig = study2.figure_toy(100, (15, 85), 1.0, 10, 1e-4, arms)
    ratio_axis = fig.axes[0].yaxis
    assert ratio_axis.get_scale() == "log"
    assert "$" in fig.axes[0].get_title() and "$" in fig._suptitle.get_text()
    assert_clean(fig)


@pytest.mark.parametrize("kind", sorted(pseudo_posterior.FIGURES))
def test_pseudo_posterior_figures(kind):
    fig = pseudo_posterior.dataset_figure(kind, pseudo_posterior_tables(np.random.default_rng(1)),
                                          "poisson")  # fmt: skip
    filled = [c for ax in fig.axes for c in ax.collections if isinstance(c, PolyCollection)]
    assert not filled, "a distribution is drawn as a violin (a smoothed density)"
    assert_clean(fig)


def test_whole_numbers_are_drawn_as_steps_at_whole_numbers_and_one_value_as_one_step():
    tables = pseudo_posterior_tables(np.random.default_rng(1))
    fig = pseudo_posterior.dataset_figure("synthetic", tables, "poisson")
    steps = [line for line in fig.axes[0].get_lines() if line.get_drawstyle().startswith("steps")]
    assert len(steps) == 7  # the data and six synthesizers
    for line in steps:
        x = np.asarray(line.get_xdata(), dtype=float)
        x = x[np.isfinite(x)]
        assert np.array_equal(x, np.round(x)), f"{line.get_label()}: a step between whole numbers"
    plt.close(fig)
    fig = pseudo_posterior.dataset_figure("weights", tables, "poisson")
    (sw,) = [line for line in fig.axes[0].get_lines() if line.get_label().startswith("SW")]
    y = np.asarray(sw.get_ydata(), dtype=float)
    assert np.nanmin(y) == 0 and np.nanmax(y) == 1, "SW's single weight collapses to nothing"
    plt.close(fig)


@pytest.mark.slow
def test_maps_of_rates_use_one_colour_map():
    rng = np.random.default_rng(RNG_SEED)
    codes = [f"{k:05d}" for k in range(1, 9)]
    truth = pd.DataFrame({"fips": codes, "rate_per_100k": rng.uniform(10, 90, len(codes))})
    fig = truth_map(squares("fips", codes), truth, "model")
    assert rate_colour_maps(fig) == {RATE_CMAP}
    assert_clean(fig)
    frame = squares("fips", codes).assign(rate=rng.uniform(10, 90, len(codes)))
    fig = county_choropleth(frame, "rate", legend_label="cases per 100,000")
    assert rate_colour_maps(fig) == {RATE_CMAP}
    plt.close(fig)
    arms = [Arm("md", "paper"), Arm("truncated", "certified")]
    rates = [("truth", np.nan, c, r) for c, r in zip(codes, truth["rate_per_100k"], strict=True)]
    rates += [(a.name, e, c, rng.uniform(10, 90)) for a in arms for e in (1.0, 10.0) for c in codes]
    area_rates = pd.DataFrame(rates, columns=["arm", "epsilon", "area", "rate"])
    fig = study.figure_maps(squares("code", codes), "code", area_rates, arms, [1.0, 10.0], "s",
                            outline="state")  # fmt: skip
    assert rate_colour_maps(fig) == {RATE_CMAP}
    assert_clean(fig)


def test_no_plot_module_or_script_names_another_colour_map():
    """Colour maps are named only in the style module: every other plot module and script
    takes the rate colour map from it."""
    named = re.compile(r"cmap\s*=\s*[\"']|plt\.cm\.(?!ScalarMappable|tab10)\w+")
    files = [*(REPO / "src/dpcounts/plots").glob("*.py"), *(REPO / "workflow/scripts").glob("*.py")]
    offenders = [f"{path.name}: {match.group(0)}" for path in files if path.name != "style.py"
                 for match in named.finditer(path.read_text())]  # fmt: skip
    assert not offenders, offenders


def test_the_style_module_is_the_only_log_tick_formatter():
    """One implementation of log-axis ticks: no plot module writes its own formatter."""
    own = re.compile(r"FuncFormatter|LogFormatter|set_(major|minor)_formatter")
    files = [p for p in (REPO / "src/dpcounts/plots").glob("*.py") if p.name != "style.py"]
    offenders = [p.name for p in files if own.search(p.read_text())]
    assert not offenders, offenders


def release_utility(rng, mechanism: str, zero: bool):
    """A steward's utility report on a table of 40 counties x 4 ages x 2 sexes whose county
    totals span five decades (``zero``: the smallest counties have no events, so the axes
    are symlog)."""
    from types import SimpleNamespace

    from dpcounts.release.report.utility import utility_report

    ages, sexes = ["Under 40", "40-59", "60-69", "70+"], ["female", "male"]
    keys = pd.DataFrame([(f"c{c:02d}", a, s) for c in range(40) for a in ages for s in sexes],
                        columns=["county_code", "age_group", "sex"])  # fmt: skip
    population = np.repeat(np.geomspace(30 if zero else 3_000, 5e6, 40), 8)
    counts = rng.poisson(population * 2e-3)
    sets = rng.poisson(counts + 0.3, (4, counts.size))
    cal = SimpleNamespace(mechanism=mechanism, epsilon=0.1, truncated=False, lower=None,
                          upper=None, prior_rate=None)  # fmt: skip
    return utility_report(keys, counts, population, sets, cal, rng, area="county_code")


@pytest.mark.parametrize(
    "zero", [True, pytest.param(False, marks=pytest.mark.slow)], ids=["symlog", "log"]
)
def test_the_release_utility_figure(zero):
    """The steward's utility.png: plain numbers on its log (or symlog, totals of 0) axes,
    key names in words, epsilon as a symbol, every group's label inside its panel."""
    from dpcounts.release.report.utility import utility_figure

    rng = np.random.default_rng(RNG_SEED)
    fig = utility_figure(release_utility(rng, "truncated", zero))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    report = release_utility(np.random.default_rng(RNG_SEED), "truncated", zero)
    ecdf, county = fig.axes[0], fig.axes[1]
    # first the rMSE ECDFs (steps): sets and reference, each ending at its largest value
    steps = [line for line in ecdf.lines if len(line.get_xdata()) > 2]
    ends = sorted(float(np.max(line.get_xdata())) for line in steps)
    assert ends == pytest.approx(sorted([report.rmse.synthetic.max(), report.rmse.reference.max()]))
    assert "rMSE" in ecdf.get_xlabel() and "per 100,000" in ecdf.get_xlabel()
    assert county.get_xscale() == ("symlog" if zero else "log")
    labels = [t for _, t in tick_label_boxes(county.xaxis, renderer)]
    assert labels and all(re.fullmatch(r"[0-9.]+", t) for t in labels), labels
    assert "\N{GREEK SMALL LETTER EPSILON} = 0.1" in fig._suptitle.get_text()  # a symbol
    for ax in fig.axes[1:]:
        if not ax.get_visible():
            continue
        inside = ax.get_window_extent(renderer)
        for text in ax.texts:
            where = text.get_window_extent(renderer)
            assert inside.x0 <= where.x0 and where.x1 <= inside.x1, text.get_text()
            assert inside.y0 <= where.y0 and where.y1 <= inside.y1, text.get_text()
    assert_clean(fig)


def close_totals_report(rng, low: float, high: float):
    """A utility report whose keys' totals are big and close together: two sexes whose
    tables' totals lie from ``low`` to ``high`` (the release's "by sex" panel: 147,245 to
    148,963, where the tick labels 147250, 147500, ... ran into each other), beside four
    races far apart."""
    from dpcounts.release.report.utility import Compared, KeyTotals, Utility

    def key(name, truth, low, high):
        truth = np.asarray(truth, dtype=float)
        groups = np.array([str(g) for g in range(truth.size)])
        reference = np.repeat(np.linspace(low, high, 20)[:, None], truth.size, axis=1)
        sets = rng.uniform(low, high, (3, truth.size))
        return KeyTotals(name, groups, truth, np.round(sets), np.round(reference))

    sexes = key("sex", low + (high - low) * np.array([0.55, 0.45]), low, high)
    centre = (low + high) / 2
    total = 2 * centre
    races = key("race", total * np.array([0.76, 0.13, 0.06, 0.05]), total * 0.04, total * 0.77)
    return Utility(mechanism="truncated", epsilon=1.0, sets=3, reference_tables=20, strata=160,
                   total=int(total), overall_rate=800.0, totals=(races, sexes),
                   rmse=Compared(rng.uniform(3_800, 3_900, 3), rng.uniform(3_400, 4_700, 20)),
                   relative_error=Compared(rng.uniform(0.3, 0.4, 3), rng.uniform(0.2, 0.3, 20)),
                   area=None, area_rule="no area", rank_correlation=None, true_area_rates=None,
                   outside=None, prior={"rmse": 2_745.0})  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(("low", "high"), [(147_245, 148_963), (14_724, 14_896), (880, 920),
                                          (1_472_450, 1_489_630), (2_000_000, 2_900_000),
                                          (147_900, 148_300)])  # fmt: skip
def test_the_release_utility_figure_reads_big_totals_close_together(low, high, tmp_path):
    """Every panel of utility.png, saved as the release saves it (one draw, at the figure's
    own size), has tick labels that do not run into each other (a gap between neighbours),
    each the plain number of its tick on a linear axis (thousands separated, no offset, no
    power of ten), and every text inside the figure."""
    from dpcounts.release.report.utility import _write_figure, utility_figure

    report = close_totals_report(np.random.default_rng(RNG_SEED), low, high)
    _write_figure(report, tmp_path / "utility.png")  # the release's own save
    assert (tmp_path / "utility.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig = utility_figure(report)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown[1:]] == ["by race: 4 groups", "by sex: 2 groups"]
    for ax in shown:
        for axis in (ax.xaxis, ax.yaxis):
            labelled = tick_label_boxes(axis, renderer)
            assert len(labelled) >= 2, (ax.get_title(), axis.axis_name)
            # neighbours along the axis leave a visible gap: half a label's height at least
            ends = sorted(((box.x0, box.x1) if axis.axis_name == "x" else (box.y0, box.y1),
                           box.height, text) for box, text in labelled)  # fmt: skip
            for (first, height, left), (second, _, right) in zip(ends, ends[1:], strict=False):
                gap = second[0] - first[1]
                assert gap >= 0.5 * height, (ax.get_title(), axis.axis_name, left, right, gap)
    for ax in shown:  # a linear axis's labels: the plain numbers of their ticks
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() != "linear":
                continue
            for tick in axis.get_major_ticks():
                text = tick.label1.get_text()
                if not text or not tick.label1.get_visible():
                    continue
                assert re.fullmatch(r"\N{MINUS SIGN}?\d{1,3}(,\d{3})*(\.\d+)?", text), text
                value = float(text.replace(",", "").replace("\N{MINUS SIGN}", "-"))
                assert value == pytest.approx(tick.get_loc(), abs=1e-9), (text, tick.get_loc())
    # nothing cut off: the texts drawn (tick labels within the view) lie inside the figure
    drawn = [(fig._suptitle.get_window_extent(renderer), fig._suptitle.get_text())]
    for ax in shown:
        texts = [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts, *ax.get_legend().texts]
        drawn += [(t.get_window_extent(renderer), t.get_text()) for t in texts if t.get_text()]
        drawn += [*tick_label_boxes(ax.xaxis, renderer), *tick_label_boxes(ax.yaxis, renderer)]
    page = fig.bbox
    for where, text in drawn:
        assert page.x0 <= where.x0 and where.x1 <= page.x1, text
        assert page.y0 <= where.y0 and where.y1 <= page.y1, text
    assert_clean(fig)


@pytest.mark.parametrize(
    ("value", "label"),
    [(0.01, "0.01"), (2, "2"), (1.15, "1.15"), (100_000, "100000"), (1e6, "$10^{6}$"),
     (2e7, r"$2 \times 10^{7}$"), (-1e6, "$-10^{6}$"), (0, "0")],
)  # fmt: skip
def test_tick_values_are_plain_below_a_million_and_powers_of_ten_from_it(value, label):
    """Never ``1e+06`` (the shapes figure's prior shapes reach a million) nor 3x10^0."""
    from dpcounts.plots.style import plain_number

    assert plain_number(value) == label


@pytest.mark.slow
def test_one_arm_has_one_colour_and_label_in_every_figure_module():
    """An arm's colour comes from what it is (dpcounts.plots.style.arm_style), never from
    its place in a figure's list: untruncated PG is the same blue in the study stage's,
    Study 1's and Study 2's figures, MD the same red in the study stage's and Study 1's,
    truncated PG (certified) the same in the study stage's and Study 2's; each arm's label
    is the vocabulary's (arm_title)."""
    import matplotlib.colors as mcolors

    from dpcounts.plots.style import arm_style, arm_title

    def hexed(colour) -> str:
        return mcolors.to_hex(colour)

    def line_colours(fig) -> dict[str, str]:
        return {line.get_label(): hexed(line.get_color())
                for ax in fig.axes for line in ax.get_lines()}  # fmt: skip

    rng = np.random.default_rng(RNG_SEED)
    seen: dict[tuple, set[str]] = {}  # an arm's fields: the colours it was drawn in

    def saw(arm, colour):
        seen.setdefault((arm.mechanism, arm.method, arm.prior), set()).add(colour)

    # the study stage: one column per arm, its median line in the arm's colour
    summary, guide, measures, arms = study_inputs(rng)
    fig = study.figure_measures(summary, guide, measures, arms, "s", adjusted=False)
    for c, arm in enumerate(arms):
        medians = [line for line in fig.axes[c].get_lines()
                   if line.get_label() == "median over the sets"]  # fmt: skip
        saw(arm, hexed(medians[0].get_color()))
        assert arm_title(arm) in fig.axes[c].get_title()
    plt.close(fig)
    # Study 1: each arm's line, labelled by the vocabulary
    fig = study1.figure_rmse(study1_summary(rng))
    colours = line_colours(fig)
    for arm in study1.ARMS:
        if arm_title(arm) in colours:
            saw(arm, colours[arm_title(arm)])
    assert "MD (exact alpha)" in colours  # MD reads as in every figure
    plt.close(fig)
    # Study 2: the disparities' medians and the toy's curves
    fig = study2.figure_disparities(study2_summary(rng), ["disparity:a"], ["(a) a"], STUDY2_ARMS,
                                    STUDY2_ARMS[1], "a study", "prior: x", "D")  # fmt: skip
    colours = line_colours(fig)
    for arm in STUDY2_ARMS:
        if f"{arm_title(arm)} (median)" in colours:
            saw(arm, colours[f"{arm_title(arm)} (median)"])
    plt.close(fig)
    toy_arms = [*STUDY2_ARMS, Arm("truncated", "exact", title="Truncated PG, exact bivariate")]
    fig = study2.figure_toy(100, (15, 85), 1.0, 10, 1e-4, toy_arms)
    for line in fig.axes[1].get_lines():
        for arm in toy_arms:
            if line.get_label() == arm_title(arm):
                saw(arm, hexed(line.get_color()))
    plt.close(fig)

    for fields, drawn in seen.items():
        assert len(drawn) == 1, f"arm {fields} drawn in {drawn}"
    untruncated = seen[("pg", "paper", None)] | seen[("pg", "paper", "national")]
    assert untruncated == {hexed(arm_style(Arm("pg", "paper"))["color"])}  # one blue
    assert seen[("md", "paper", None)] == {hexed("tab:red")}
    assert ("truncated", "certified", None) in seen
    # different arms in one figure differ in colour or line
    styles = {(s["color"], s["linestyle"]) for s in map(arm_style, [*study1.ARMS, *STUDY2_ARMS])}
    assert len(styles) == len({(a.mechanism, a.method, a.prior or "national")
                               for a in [*study1.ARMS, *STUDY2_ARMS]})  # fmt: skip


def test_an_axis_that_reaches_a_million_writes_every_tick_as_a_power_of_ten():
    """One tick style per axis (issue #35): never 100000 beside 10^6 on one axis."""
    from dpcounts.plots.style import log_axis

    fig, (low, high) = plt.subplots(1, 2, figsize=(8, 3))
    low.plot([1, 2], [10, 1e5])
    high.plot([1, 2], [10, 5e6])
    for ax in (low, high):
        log_axis(ax.yaxis)
    fig.canvas.draw()
    labels = {ax: [t.get_text() for t in ax.yaxis.get_ticklabels() if t.get_text()]
              for ax in (low, high)}  # fmt: skip
    assert labels[low] and not any("10^" in text for text in labels[low]), labels[low]
    assert "$10^{6}$" in labels[high] and all("10^" in text for text in labels[high]), labels[high]
    plt.close(fig)
