"""One age group's truth as the workflow saves it, built from the config's ``truth`` section.

Each function takes the loaded inputs and returns ``(truth, summary)``: the truth frame
with a ``rate_per_100k`` column added, and its plain-number summary (what was built, then
:func:`~dpcounts.data.truth.summary.truth_summary` with Moran's I on the queen graph).

- :func:`build_truth`: ages 35-44, modelled (``truth.source: model``) or smoothed from a
  CDC WONDER export (``truth.source: wonder``);
- :func:`build_older_truth`: an older age group of Study 1's Appendix C, modelled and
  related to the 35-44 truth.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import pandas as pd

from dpcounts.data.age_groups import group_population
from dpcounts.data.counties import queen_adjacency
from dpcounts.data.truth.model import (
    TruthModel,
    model_truth,
    model_truth_related,
    modelled_total,
)
from dpcounts.data.truth.observed import truth_from_wonder
from dpcounts.data.truth.summary import truth_summary
from dpcounts.units import PER_100K

logger = logging.getLogger(__name__)

#: The values of the config's ``truth.source``.
SOURCES = ("model", "wonder")


def build_truth(
    counties: pd.DataFrame,
    edges: pd.DataFrame,
    ages: pd.DataFrame,
    settings: Mapping,
    age_group: str,
    rng: np.random.Generator,
    wonder: pd.DataFrame | None = None,
) -> tuple[pd.DataFrame, dict]:
    """The truth of ``age_group`` from the config's ``truth`` section (``settings``).

    ``source: model``: :func:`~dpcounts.data.truth.model.model_truth` on the group's
    populations of ``ages`` (:func:`~dpcounts.data.age_groups.load_age_groups`'s frame),
    with the parameters of ``settings["model"]``, drawn from ``rng``. ``source: wonder``:
    :func:`~dpcounts.data.truth.observed.truth_from_wonder` of ``wonder`` (the export
    read from ``settings["wonder"]["path"]``), selecting ``age_group_code`` and shrinking
    toward ``prior`` as configured; ``rng`` is not used. The summary starts with
    ``source`` and ``age_group``.
    """
    source = settings["source"]
    if source == "model":
        params = TruthModel.from_config(settings["model"])
        truth = model_truth(counties, edges, group_population(ages, age_group), params, rng)
        logger.info("modelled truth with %s", params)
    elif source == "wonder":
        path = settings["wonder"]["path"]
        if wonder is None:
            raise ValueError(
                "truth.source is 'wonder' but no export was given; "
                f"expected the frame read from truth.wonder.path ({path!r})"
            )
        truth = truth_from_wonder(
            wonder,
            counties,
            age_group_code=settings["wonder"]["age_group_code"],
            prior=settings["wonder"]["prior"],
            source=str(path),
        )
        logger.info("smoothed observed rates from %s", path)
    else:
        raise ValueError(f"truth.source must be one of {list(SOURCES)}, got {source!r}")
    return _with_summary(truth, edges, {"source": source, "age_group": age_group})


def build_older_truth(
    counties: pd.DataFrame,
    edges: pd.DataFrame,
    ages: pd.DataFrame,
    reference: pd.DataFrame,
    settings: Mapping,
    age_group: str,
    rate_per_100k: float,
    correlation: float,
    rng: np.random.Generator,
) -> tuple[pd.DataFrame, dict]:
    """The modelled truth of an older ``age_group`` (Study 1's Appendix C).

    Its total is :func:`~dpcounts.data.truth.model.modelled_total` of the national
    ``rate_per_100k`` on the group's populations of ``ages`` (in the order of
    ``counties``); its rates are :func:`~dpcounts.data.truth.model.model_truth_related`
    to ``reference`` (the 35-44 truth) with ``correlation``, the other parameters those of
    the config's ``truth`` section (``settings["model"]``), drawn from ``rng``. The
    summary starts with what was assumed: the modelled total, the national rate, the
    correlation and the source of the reference (``settings["source"]``).
    """
    population = group_population(ages, age_group, counties["fips"])
    total = modelled_total(rate_per_100k, population)
    params = replace(TruthModel.from_config(settings["model"]), total_deaths=float(total))
    truth = model_truth_related(counties, edges, population, reference, params, correlation, rng)
    logger.info("%s: modelled total %d deaths with %s", age_group, total, params)
    head = {
        "source": "model",
        "age_group": age_group,
        "modelled_total_deaths": total,
        "national_rate_per_100k_assumed": rate_per_100k,
        "correlation_with_35_44": correlation,
        "reference_source": settings["source"],
    }
    return _with_summary(truth, edges, head)


def _with_summary(
    truth: pd.DataFrame, edges: pd.DataFrame, head: dict
) -> tuple[pd.DataFrame, dict]:
    """The truth with ``rate_per_100k`` added, and ``head`` followed by its summary."""
    truth = truth.assign(rate_per_100k=truth["rate"] * PER_100K)
    summary = {**head, **truth_summary(truth, queen_adjacency(edges, truth["fips"]))}
    logger.info("summary: %s", summary)
    return truth, summary
