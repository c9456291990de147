"""The pseudo-posterior study's steps as the workflow runs them, on small hand-made inputs:
all synthesizers fitted in order, synthetic data of every fit, every data set gathered."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from dpcounts.studies.pseudo_posterior.fitting import ConvergenceThresholds, MCMCSettings
from dpcounts.studies.pseudo_posterior.posterior import PosteriorFit
from dpcounts.studies.pseudo_posterior.study import SYNTHESIZERS, StudySettings, fit_synthesizers
from dpcounts.studies.pseudo_posterior.synthesis import (
    DATA,
    STATISTICS,
    synthetic_datasets,
    synthetic_tables,
    utility_statistics,
)
from dpcounts.studies.pseudo_posterior.tables import (
    GATHERED,
    DatasetTables,
    gather_datasets,
    study_checks,
    summary_table,
)

SMALL = MCMCSettings(chains=2, warmup=10, samples=200)


def poisson_settings(min_ess=100.0):
    return StudySettings(
        family="poisson",
        lipschitz_quantile=0.95,
        mcmc=SMALL,
        checks=ConvergenceThresholds(max_rhat=1.05, min_ess=min_ess),
    )


def test_every_synthesizer_is_fitted_in_order_from_one_generator():
    y = np.random.default_rng(1).poisson(20, size=60)
    fits = fit_synthesizers(y, poisson_settings(), np.random.default_rng(2))
    assert list(fits) == list(SYNTHESIZERS)
    assert [fit.name for fit in fits.values()] == list(SYNTHESIZERS)
    assert all(np.array_equal(fit.fit.y, y) for fit in fits.values())
    # the weighted synthesizers are scaled to LW's Delta
    for name in ("CW", "SW"):
        assert fits[name].target_delta == fits["LW"].bounds.delta
    again = fit_synthesizers(y, poisson_settings(), np.random.default_rng(2))
    assert all(
        np.array_equal(again[name].fit.draws["mu"], fits[name].fit.draws["mu"]) for name in fits
    )


def test_a_failed_fit_is_logged_and_raised(caplog):
    y = np.random.default_rng(1).poisson(20, size=30)
    with caplog.at_level(logging.ERROR), pytest.raises(Exception, match="min_ess"):
        fit_synthesizers(y, poisson_settings(min_ess=1e9), np.random.default_rng(2))
    assert "fitting unweighted failed" in caplog.text


def poisson_fit(y, weights, mu):
    return PosteriorFit.from_draws(y, weights, {"mu": mu}, "poisson", 1, sampler="exact")


def test_synthetic_tables_hold_the_data_then_every_fit_in_order():
    y = np.array([3, 7, 1, 12, 5])
    fits = {
        "unweighted": poisson_fit(y, np.ones(5), np.linspace(4, 6, 50)),
        "LW": poisson_fit(y, np.full(5, 0.5), np.linspace(20, 30, 50)),
    }
    utility, synthetic = synthetic_tables(fits, 4, np.random.default_rng(7))
    assert list(utility["synthesizer"]) == [DATA] + ["unweighted"] * 4 + ["LW"] * 4
    assert list(utility["replicate"]) == [0] + [0, 1, 2, 3] * 2
    data_row = utility.iloc[0]
    assert [data_row[s] for s in STATISTICS] == [
        np.quantile(y, 0.15),
        np.quantile(y, 0.90),
        y.mean(),
        np.median(y),
    ]
    assert list(synthetic["synthesizer"]) == [DATA] * 5 + ["unweighted"] * 5 + ["LW"] * 5
    assert list(synthetic["record"]) == list(range(5)) * 3
    assert np.array_equal(synthetic["value"].iloc[:5], y)
    # one generator, the fits in order: the same stream as drawing them one by one
    rng = np.random.default_rng(7)
    for name, fit in fits.items():
        sets = synthetic_datasets(fit, 4, rng)
        own = utility[utility["synthesizer"] == name][list(STATISTICS)].reset_index(drop=True)
        pd.testing.assert_frame_equal(own, utility_statistics(sets))
        values = synthetic.loc[synthetic["synthesizer"] == name, "value"].to_numpy()
        assert np.array_equal(values, sets[0])
    with pytest.raises(ValueError, match="at least one fit"):
        synthetic_tables({}, 4, np.random.default_rng(7))


def saved(y, shift, cw_delta):
    """One data set's saved tables in the workflow's layout: unweighted, LW, and CW tuned
    to LW's Delta = 2 with the result ``cw_delta`` (the checks see whether it matches)."""
    names = ["unweighted", "LW", "CW"]
    weights = {
        "unweighted": np.ones(y.size),
        "LW": np.linspace(0.2, 1.0, y.size),
        "CW": np.linspace(0.1, 0.9, y.size),
    }
    records = pd.concat(
        [
            pd.DataFrame(
                {
                    "synthesizer": name,
                    "record": np.arange(y.size),
                    "y": y,
                    "weight": weights[name],
                    "lipschitz": np.linspace(0.1, 1.0, y.size) * (i + 1),
                }
            )
            for i, name in enumerate(names)
        ],
        ignore_index=True,
    )
    draws = pd.concat(
        [
            pd.DataFrame(
                {
                    "synthesizer": name,
                    "chain": 0,
                    "draw": np.arange(20),
                    "mu": shift + np.linspace(-1, 1, 20) * (i + 1),
                }
            )
            for i, name in enumerate(names)
        ],
        ignore_index=True,
    )
    deltas = {"unweighted": 3.0, "LW": 2.0, "CW": cw_delta}
    metadata = {
        name: {
            "delta": deltas[name],
            "epsilon": 2 * deltas[name],
            "target_delta": 2.0 if name == "CW" else None,
            "constant": 0.5 if name == "CW" else None,
            "history": [{"constant": 0.5}] if name == "CW" else [],
            "sampler": "exact",
            "rhat": {"mu": 1.0},
            "ess": {"mu": 20.0},
        }
        for name in names
    }
    utility = pd.DataFrame(
        {
            "synthesizer": [DATA, *np.repeat(names, 2)],
            "replicate": [0, *[0, 1] * len(names)],
            **{stat: shift + np.arange(7.0) for stat in STATISTICS},
        }
    )
    synthetic = pd.DataFrame({"synthesizer": DATA, "record": np.arange(y.size), "value": y})
    return DatasetTables(records, draws, metadata, utility, synthetic)


def test_gathering_keeps_every_data_set_in_order_with_its_name_first():
    datasets = {
        "second": saved(np.arange(6), 10.0, cw_delta=2.01),
        "first": saved(np.arange(4), 20.0, cw_delta=2.5),
    }
    tables, checks = gather_datasets(datasets, 0.03)
    assert list(tables) == list(GATHERED)
    own = {
        "records": lambda s: s.records[["synthesizer", "record", "weight", "lipschitz"]],
        "summary": lambda s: summary_table(s.records, s.draws, s.metadata, s.utility),
        "posterior": lambda s: s.draws[["synthesizer", "draw", "mu"]],
        "utility": lambda s: s.utility,
        "synthetic": lambda s: s.synthetic,
    }
    for key, frame in tables.items():
        assert frame.columns[0] == "dataset"
        assert frame.index.equals(pd.RangeIndex(len(frame)))
        for name, tables_of in datasets.items():
            expected = own[key](tables_of).reset_index(drop=True)
            rows = frame[frame["dataset"] == name].drop(columns="dataset")
            pd.testing.assert_frame_equal(rows.reset_index(drop=True), expected)
        sizes = [len(own[key](tables_of)) for tables_of in datasets.values()]
        assert list(frame["dataset"]) == ["second"] * sizes[0] + ["first"] * sizes[1]
    columns = ["dataset", "synthesizer", "record", "weight", "lipschitz"]
    assert list(tables["records"].columns) == columns
    assert list(tables["posterior"].columns) == ["dataset", "synthesizer", "draw", "mu"]
    assert list(checks) == ["second", "first"]
    verdicts = {name: {c["check"]: c["passed"] for c in checks[name]} for name in checks}
    assert verdicts["second"]["CW_delta_matches_target"]
    assert not verdicts["first"]["CW_delta_matches_target"]
    for name, tables_of in datasets.items():
        summary = own["summary"](tables_of)
        assert checks[name] == study_checks(summary, 0.03)
    with pytest.raises(ValueError, match="at least one data set"):
        gather_datasets({}, 0.03)
