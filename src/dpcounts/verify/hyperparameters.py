"""Topic ``hyperparameters``: the published shapes, bounds and prior rates, and the prior
they follow from: the overall rate, a public prior's groups and declared source, or a
sanitised prior's rates from its noisy totals."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpcounts.mechanisms import registry
from dpcounts.verify.checks import (
    ARITHMETIC_RTOL,
    FAIL,
    OK,
    VALUE_RTOL,
    WARNING,
    Check,
    CheckSpec,
    _check,
    _e,
    register,
)
from dpcounts.verify.readers import _floats, _Release, attributes
from dpcounts.verify.words import _g, shown

register(
    CheckSpec("hyperparameters", "hyperparameters",
              "The hyperparameters could be read within the bounds; a table they refuse, or "
              "a field they cannot read, fails here, with the reason."),
    CheckSpec("hyperparameters", "columns",
              "`hyperparameters.*` has one row per stratum and the columns of the keys, the "
              "`attributes` (a release before that field: a sanitised prior's group columns "
              "that are not keys) and the mechanism's (md: `a`, `population`; pg "
              "adds `b`, `prior_rate`; truncated `lower`, `upper`), every `a` finite and > 0, "
              "every attribute a value in every stratum."),
    CheckSpec("hyperparameters", "b = a / prior_rate",
              f"pg and truncated: each stratum's `b` is `a / prior_rate` (relative tolerance "
              f"{_e(VALUE_RTOL)}), so the prior is the one the shapes were calibrated with."),
    CheckSpec("hyperparameters", "bounds",
              "truncated: whole bounds 0 <= `lower` <= `upper`, and the sum of `lower` <= "
              "`total` <= the sum of `upper`, so a set summing to the total fits them."),
    CheckSpec("hyperparameters", "prior (overall rate)",
              "`prior.kind` `total`: `prior_rate` is `total` over the sum of the populations, "
              "the one rate the public total gives."),
    CheckSpec("hyperparameters", "prior (groups)",
              "A public prior with `prior.groups`: `prior_rate` is constant within groups of "
              "two or more strata of those key columns, so it is no stratum's own count."),
    CheckSpec("hyperparameters", "prior (source)",
              "A prior the steward brought (a file or a column, grouped or not): a failure "
              "without `prior.declared_source`; with one, a warning that shows the steward's "
              "declaration, which no check can confirm (taken on trust)."),
    CheckSpec("hyperparameters", "prior (count fit)",
              "A warning when the steward overrode the check that the prior rates do not fit "
              "the counts far better than chance (`prior.count_fit_check` `overridden`)."),
    CheckSpec("hyperparameters", "prior",
              "A sanitised prior: `prior.file` is the listed `files.prior`, with the columns "
              "of its groups, `population`, `noisy_total` and `prior_rate`, and a numeric "
              "`prior.floor`."),
    CheckSpec("hyperparameters", "prior group rates",
              "A sanitised prior: each group's rate in `prior.*` is max(`noisy_total`, "
              "`prior.floor`) / `population`, the noisy totals whole: the rates follow from "
              "the published noisy totals alone."),
    CheckSpec("hyperparameters", "strata rates",
              "A sanitised prior: each stratum has its group's rate, and each group's "
              "population is its strata's sum."),
)  # fmt: skip


def _text(frame: pd.DataFrame, columns) -> pd.DataFrame:
    """Key columns as text, so Parquet and CSV keys compare alike."""
    return frame[list(columns)].astype(str).reset_index(drop=True)


def _worst_relative(actual: np.ndarray, expected: np.ndarray) -> float:
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(actual - expected) / np.abs(expected)
    rel = np.where(actual == expected, 0.0, rel)
    return float(np.nanmax(np.where(np.isfinite(rel), rel, np.inf))) if rel.size else 0.0


def _hyper_checks(release: _Release):
    m = release.manifest
    keys, strata, mechanism = m["keys"], m["strata"], m["mechanism"]
    hyper = release.table("hyperparameters").reset_index(drop=True)
    name = shown(release.file("hyperparameters").name, 80)
    out = []
    family = registry.family(mechanism)  # the manifest's schema check passed: known
    expected = [*keys, *attributes(m), *family.hyperparameters]
    if list(hyper.columns) != expected or len(hyper) != strata:
        out.append(
            _check("hyperparameters", "columns", FAIL,
                  f"{name}: {len(hyper)} rows, columns {shown(list(hyper.columns))}; expected "
                  f"{strata} rows, columns {shown(expected)} ({mechanism})")
        )  # fmt: skip
        return out, True
    a = _floats(hyper, "a")
    good_a = bool(np.all(np.isfinite(a) & (a > 0)))
    repeats = release.key_runs()[1]
    published = attributes(m)
    empty = [c for c in published if hyper[c].isna().any()]  # one value per stratum
    out.append(
        _check("hyperparameters", "columns", OK if good_a and not repeats and not empty else FAIL,
              f"{name}: {strata} rows, keys"
              + (f", attributes {shown(published)}" if published else "")
              + f" and {list(family.hyperparameters)}; "
              + (f"a in [{_g(a.min())}, {_g(a.max())}], all > 0" if good_a
                 else "some a are not finite and > 0")
              + (f"; {repeats} row(s) repeat the keys of another: not one row per stratum"
                 if repeats else "")
              + (f"; attribute(s) {shown(empty)} empty in some stratum: expected one value "
                 "per stratum" if empty else ""))
    )  # fmt: skip
    if not family.uses_prior:
        return out, True
    b, rate = _floats(hyper, "b"), _floats(hyper, "prior_rate")
    worst = _worst_relative(b, a / rate)
    out.append(
        _check(
            "hyperparameters", "b = a / prior_rate", OK if worst <= VALUE_RTOL else FAIL,
            f"largest relative difference {worst:.2g} over {strata} strata "
            f"(tolerance {VALUE_RTOL:g})",
            {"worst_relative": worst},
        )
    )  # fmt: skip
    if family.bounded:
        lower, upper = _floats(hyper, "lower"), _floats(hyper, "upper")
        whole = np.all((lower == np.round(lower)) & (upper == np.round(upper)))
        ordered = np.all((0 <= lower) & (lower <= upper))
        feasible = lower.sum() <= m["total"] <= upper.sum()
        good = bool(whole and ordered and feasible)
        out.append(
            _check(
                "hyperparameters", "bounds", OK if good else FAIL,
                f"whole 0 <= lower <= upper: {bool(whole and ordered)}; sum lower "
                f"{_g(lower.sum())} <= total {m['total']} <= sum upper {_g(upper.sum())}",
            )
        )  # fmt: skip
    prior = m["prior"]
    if prior["kind"] == "total":
        rate_all = m["total"] / _floats(hyper, "population").sum()
        worst = _worst_relative(rate, np.full(strata, rate_all))
        out.append(
            _check(
                "hyperparameters", "prior (overall rate)",
                OK if worst <= VALUE_RTOL else FAIL,
                f"prior_rate = total / sum of populations = {_g(rate_all)}; largest relative "
                f"difference {worst:.2g}",
            )
        )  # fmt: skip
    elif prior["kind"] == "sanitised":
        out.extend(_sanitised_checks(release, hyper, rate))
    else:
        out.extend(_public_prior_checks(release, hyper, rate))
    return out, True


def _public_prior_checks(release: _Release, hyper: pd.DataFrame, rate: np.ndarray):
    """A prior declared public: its shape (constant within ``prior.groups``, two or more
    strata a group, or a declared source), and the count-fit check's fate."""
    from dpcounts.release.prior_source import grouping

    prior = release.manifest["prior"]
    groups, declared = prior["groups"], prior["declared_source"]
    out = []
    if groups is not None:
        absent = [c for c in groups if c not in release.manifest["keys"]]
        found = None if absent else grouping(hyper[list(groups)], rate)
        good = found is not None and set(found) <= set(groups)
        out.append(
            _check(
                "hyperparameters", "prior (groups)", OK if good else FAIL,
                f"prior_rate constant within the groups of {shown(groups)}, two or more strata "
                "each"
                if good else
                f"prior.groups {shown(groups)}: the published prior_rate is not constant within "
                "groups of two or more strata of these key columns",
            )
        )  # fmt: skip
    if declared is None:
        out.append(
            _check("hyperparameters", "prior (source)", FAIL,
                  "a prior the steward brought (a file or a column) and the manifest "
                  "declares no source (prior.declared_source): no release publishes one so")
        )  # fmt: skip
    else:
        out.append(
            _check("hyperparameters", "prior (source)", WARNING,
                  ("the prior is one rate per group of " + shown(groups) if groups else
                   "the prior is one rate for all strata" if groups == [] else
                   "the prior varies stratum by stratum")
                  + "; public only by the steward's declaration of its source, which no "
                  f"check can confirm (taken on trust): \"{shown(declared)}\"")
        )  # fmt: skip
    if prior["count_fit_check"] == "overridden":
        out.append(
            _check("hyperparameters", "prior (count fit)", WARNING,
                  "the check that the prior rates do not fit the counts far better than "
                  "chance was overridden by the steward (--prior-is-public-i-am-sure)")
        )  # fmt: skip
    return out


def _sanitised_checks(release: _Release, hyper: pd.DataFrame, rate: np.ndarray) -> list[Check]:
    m = release.manifest
    groups = m["prior"]["groups"] or []
    if m["prior"]["file"] is None or "prior" not in m["files"]:
        return [_check("hyperparameters", "prior", FAIL, "sanitised prior without a prior file")]
    if release.file("prior").name != m["prior"]["file"]:
        return [
            _check("hyperparameters", "prior", FAIL,
                  f"prior.file {shown(repr(m['prior']['file']), 80)} is not files.prior "
                  f"{shown(repr(release.file('prior').name), 80)}")
        ]  # fmt: skip
    table = release.table("prior").reset_index(drop=True)
    expected = [*groups, "population", "noisy_total", "prior_rate"]
    if not groups or list(table.columns) != expected:
        return [
            _check("hyperparameters", "prior", FAIL,
                  f"{shown(release.file('prior').name, 80)}: columns "
                  f"{shown(list(table.columns))}, expected {shown(expected)}")
        ]  # fmt: skip
    out = []
    floor = m["prior"]["floor"]
    if not isinstance(floor, int | float) or isinstance(floor, bool):
        return [_check("hyperparameters", "prior group rates", FAIL,
                      f"the manifest's prior.floor is {floor!r}, expected a number")]  # fmt: skip
    noisy = _floats(table, "noisy_total")
    group_pop = _floats(table, "population")
    group_rate = _floats(table, "prior_rate")
    expected_rate = np.maximum(noisy, floor) / group_pop
    worst = _worst_relative(group_rate, expected_rate)
    whole = bool(np.all(noisy == np.round(noisy)))
    out.append(
        _check(
            "hyperparameters", "prior group rates",
            OK if worst <= VALUE_RTOL and whole else FAIL,
            f"{len(table)} group(s) by {shown(groups)}: rate = max(noisy_total, {floor:g}) / "
            f"population (the manifest's prior.floor), largest relative difference {worst:.2g}"
            + ("" if whole else "; some noisy totals are not whole"),
            {"floor": floor, "worst_relative": worst},
        )
    )  # fmt: skip
    # each stratum's group, by the group columns of its keys (as text)
    labels = _text(table, groups).apply(tuple, axis=1)
    strata_labels = _text(hyper, groups).apply(tuple, axis=1)
    position = {label: i for i, label in enumerate(labels)}
    index = np.array([position.get(label, -1) for label in strata_labels])
    missing = int((index < 0).sum())
    same_groups = missing == 0 and len(position) == len(labels) == len(set(strata_labels))
    if not same_groups:
        out.append(
            _check("hyperparameters", "strata rates", FAIL,
                  f"the prior's {len(labels)} group(s) are not the strata's "
                  f"{len(set(strata_labels))} groups by {shown(groups)} ({missing} strata "
                  "without one)")
        )  # fmt: skip
        return out
    worst = _worst_relative(rate, group_rate[index])
    summed = np.bincount(index, weights=_floats(hyper, "population"), minlength=len(table))
    worst_pop = _worst_relative(group_pop, summed)
    good = worst <= VALUE_RTOL and worst_pop <= ARITHMETIC_RTOL
    out.append(
        _check(
            "hyperparameters", "strata rates", OK if good else FAIL,
            f"each of the {len(rate)} strata has its group's rate (largest relative difference "
            f"{worst:.2g}); group populations are their strata's sums (largest relative "
            f"difference {worst_pop:.2g})",
        )
    )  # fmt: skip
    return out
