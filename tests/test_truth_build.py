"""One age group's truth as the workflow saves it (dpcounts.data.truth.build), on a
hand-made lattice: which source is used, the rate per 100,000 column and the summary."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_truth import grid, morans_i_reference

from dpcounts.data.age_groups import age_group_frame
from dpcounts.data.truth.build import build_older_truth, build_truth
from dpcounts.data.truth.summary import truth_summary

MODEL = {"total_deaths": 500.0, "state_sd": 0.1, "spatial_sd": 0.2, "spatial_dependence": 0.9,
         "iid_sd": 0.1}  # fmt: skip


def inputs(side=6, seed=0):
    """Counties, queen edges and an age-group frame with two groups of different sizes."""
    counties, edges = grid(side)
    rng = np.random.default_rng(seed)
    young = rng.integers(1_000, 50_000, len(counties)).astype(float)
    old = rng.integers(1_000, 50_000, len(counties)).astype(float)
    ages = age_group_frame(counties["fips"], {"35-44": young, "45-54": old})
    return counties, edges, ages, young, old


def export(counties, young, seed=1):
    """A WONDER-like frame: the 35-44 rows hold ``young`` as populations, a second age
    group's rows other numbers (so selecting the wrong rows shows), one cell suppressed."""
    rng = np.random.default_rng(seed)
    rows = []
    for code, population in (("35-44", young), ("45-54", 3 * young)):
        deaths = rng.poisson(4e-4 * population)
        rows.append(
            pd.DataFrame(
                {
                    "county_code": counties["fips"],
                    "age_group_code": code,
                    "deaths": pd.array(deaths, dtype="Int64"),
                    "population": pd.array(population.astype(int), dtype="Int64"),
                    "suppressed": False,
                }
            )
        )
    frame = pd.concat(rows, ignore_index=True)
    frame.loc[0, ["deaths", "suppressed"]] = [pd.NA, True]
    return frame


def settings(source="model", **wonder):
    section = {"source": source, "model": dict(MODEL)}
    section["wonder"] = {"path": "export.txt", "age_group_code": "35-44", "prior": "state"}
    section["wonder"].update(wonder)
    return section


def check_saved_form(truth, summary, edges, head):
    """What every built truth holds: rates per 100,000, and ``head`` then its summary."""
    assert np.allclose(truth["rate_per_100k"], truth["rate"] * 1e5)
    assert list(summary)[: len(head)] == list(head)
    assert {key: summary[key] for key in head} == head
    rest = {key: value for key, value in summary.items() if key not in head}
    assert rest.keys() == {*truth_summary(truth), "morans_i_log_rate"}
    assert rest["counties"] == len(truth)
    assert rest["expected_deaths"] == pytest.approx(truth["expected"].sum())
    counties = pd.DataFrame({"fips": truth["fips"]})
    expected = morans_i_reference(np.log(truth["rate"]), counties, edges)
    assert rest["morans_i_log_rate"] == pytest.approx(expected)


def test_modelled_truth_uses_the_age_groups_populations_and_the_configured_total():
    counties, edges, ages, young, _ = inputs()
    truth, summary = build_truth(
        counties, edges, ages, settings(), "35-44", np.random.default_rng(3)
    )
    assert list(truth["fips"]) == list(counties["fips"])
    assert np.array_equal(truth["population"], young)
    assert truth["expected"].sum() == pytest.approx(MODEL["total_deaths"])
    check_saved_form(truth, summary, edges, {"source": "model", "age_group": "35-44"})


def test_modelled_truth_draws_from_the_generator_it_is_given():
    counties, edges, ages, _, _ = inputs()
    first, _ = build_truth(counties, edges, ages, settings(), "35-44", np.random.default_rng(3))
    again, _ = build_truth(counties, edges, ages, settings(), "35-44", np.random.default_rng(3))
    other, _ = build_truth(counties, edges, ages, settings(), "35-44", np.random.default_rng(4))
    assert np.array_equal(first["rate"], again["rate"])
    assert not np.allclose(first["rate"], other["rate"])


def test_wonder_truth_smooths_the_configured_age_group_and_draws_nothing():
    counties, edges, ages, young, _ = inputs()
    frame = export(counties, young)
    rng = np.random.default_rng(3)
    state = rng.bit_generator.state
    truth, summary = build_truth(
        counties, edges, ages, settings("wonder"), "35-44", rng, wonder=frame
    )
    assert rng.bit_generator.state == state
    assert np.array_equal(truth["population"], young)
    assert truth["rate"].between(0, 1).all()
    check_saved_form(truth, summary, edges, {"source": "wonder", "age_group": "35-44"})
    # the configured prior is used: national shrinkage gives other rates than state's
    national, _ = build_truth(
        counties, edges, ages, settings("wonder", prior="national"), "35-44", rng, wonder=frame
    )
    assert not np.allclose(national["rate"], truth["rate"])


def test_wonder_source_without_an_export_or_an_unknown_source_is_an_error():
    counties, edges, ages, _, _ = inputs()
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"truth\.wonder\.path.*export\.txt"):
        build_truth(counties, edges, ages, settings("wonder"), "35-44", rng)
    with pytest.raises(ValueError, match=r"truth\.source must be one of"):
        build_truth(counties, edges, ages, settings("survey"), "35-44", rng)


@pytest.mark.parametrize("reference_source", ["model", "wonder"])
def test_older_truth_models_its_total_and_follows_the_reference(reference_source):
    counties, edges, ages, _, old = inputs()
    reference, _ = build_truth(counties, edges, ages, settings(), "35-44", np.random.default_rng(3))
    section = settings(reference_source)
    truth, summary = build_older_truth(
        counties, edges, ages, reference, section, "45-54", 400.0, 1.0, np.random.default_rng(5)
    )
    total = round(400.0 * 1e-5 * old.sum())
    assert np.array_equal(truth["population"], old)
    assert truth["expected"].sum() == pytest.approx(total)
    # correlation 1: the older group's rates are the reference's, rescaled
    ratio = truth["rate"] / reference["rate"]
    assert np.allclose(ratio, ratio.iloc[0])
    head = {
        "source": "model",
        "age_group": "45-54",
        "modelled_total_deaths": total,
        "national_rate_per_100k_assumed": 400.0,
        "correlation_with_35_44": 1.0,
        "reference_source": reference_source,
    }
    check_saved_form(truth, summary, edges, head)
    assert isinstance(summary["modelled_total_deaths"], int)
