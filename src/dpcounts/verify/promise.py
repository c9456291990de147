"""Topic ``promise``: the budget's numbers, their sums, the guarantee's words and status,
and the privacy bound recomputed from the published hyperparameters
(:func:`recomputed_epsilon`)."""

from __future__ import annotations

import math

import pandas as pd

from dpcounts.mechanisms import registry
from dpcounts.privacy.composition import compose
from dpcounts.release.manifest import status
from dpcounts.verify.checks import (
    ARITHMETIC_RTOL,
    FAIL,
    NOMINAL,
    OK,
    CheckSpec,
    _check,
    _e,
    register,
)
from dpcounts.verify.readers import _floats, _Release
from dpcounts.verify.words import _g, shown

register(
    CheckSpec("promise", "promise",
              "The promise's checks ran: a field or table they could not read fails here, "
              "with the reason."),
    CheckSpec("promise", "numbers",
              "Every number of the promise is finite and of its sign: epsilons and deltas > 0 "
              "(`epsilon_prior` >= 0, and > 0 exactly for a sanitised prior), deltas < 1, "
              "`sampler_tv_target` > 0."),
    CheckSpec("promise", "epsilon",
              "The budget adds up by basic composition: `epsilon_total` = `epsilon_prior` + "
              "`sets` x `epsilon_per_set`, `epsilon_synthesis` the difference, `budget.sets` "
              "= `sets`, `prior.epsilon` = `epsilon_prior`."),
    CheckSpec("promise", "delta",
              "`delta_total` = `sets` x `delta_per_set`, `delta.per_set` the same, and "
              "`delta.sampler_tv_target` = `delta_per_set` / (1 + e^`epsilon_per_set`)."),
    CheckSpec("promise", "statement",
              "The `guarantee` block (status, statement, proof) is the one "
              "`dpcounts.release.manifest.guarantee` writes for the mechanism, method and "
              "budget, so its statement says the numbers."),
    CheckSpec("promise", "status",
              "`guarantee.status` is `certified` exactly for the mechanism and method pairs "
              "this version certifies."),
    CheckSpec("promise", "bound",
              "Certified: the bound of docs/privacy.md recomputed from the published `a`, "
              "`lower`, `upper` and `total` (pg, truncated: the two largest kappa, Part 2, "
              "Step 4; md: log(1 + total / min alpha), Quick (2021), eq 5) is at most "
              f"`epsilon_per_set` (relative tolerance {_e(registry.BOUND_RTOL)}); nominal: "
              "said, no guarantee."),
)  # fmt: skip


def _close(a: float, b: float, rtol: float) -> bool:
    return math.isclose(a, b, rel_tol=rtol, abs_tol=0.0)


def recomputed_epsilon(mechanism: str, total: int, hyper: pd.DataFrame) -> tuple[float, str]:
    """The per-set epsilon the published hyperparameters prove (docs/privacy.md), and how:
    the family's privacy map (:attr:`dpcounts.mechanisms.registry.Family.privacy_map`).

    md: the smallest alpha gives ``log(1 + total / min alpha)`` (Quick (2021), eq 5:
    eps-DP iff ``min alpha >= total / (e^eps - 1)``). pg and truncated: the sum of the two
    largest kappa of :func:`dpcounts.privacy.certified.certified_epsilon` (untruncated:
    L = 0, U = total).
    """
    family = registry.family(mechanism)
    columns = {c: _floats(hyper, c) for c in family.hyperparameters}
    return family.privacy_map(total, columns)


def _signs(m: dict) -> list[str]:
    """What is wrong with the promise's numbers taken one by one (finite; epsilons and
    deltas of the right sign; a prior's epsilon exactly when the prior is sanitised)."""
    budget, delta, prior = m["budget"], m["delta"], m["prior"]
    numbers = {f"budget.{k}": budget[k] for k in (
        "epsilon_total", "epsilon_prior", "epsilon_synthesis", "epsilon_per_set",
        "delta_total", "delta_per_set")}  # fmt: skip
    numbers |= {"delta.per_set": delta["per_set"], "delta.sampler_tv_target":
                delta["sampler_tv_target"], "prior.epsilon": prior["epsilon"]}  # fmt: skip
    wrong = [
        f"{name} {shown(repr(value), 40)} is not a finite number"
        for name, value in numbers.items()
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
    ]
    if wrong:
        return wrong
    for name in ("epsilon_total", "epsilon_synthesis", "epsilon_per_set", "delta_total",
                 "delta_per_set"):  # fmt: skip
        if not budget[name] > 0:
            wrong.append(f"budget.{name} {_g(budget[name])} is not > 0")
    for name in ("delta_total", "delta_per_set"):
        if not budget[name] < 1:
            wrong.append(f"budget.{name} {_g(budget[name])} is not < 1")
    if not delta["sampler_tv_target"] > 0:
        wrong.append(f"delta.sampler_tv_target {_g(delta['sampler_tv_target'])} is not > 0")
    sanitised = prior["kind"] == "sanitised"
    eps_prior = budget["epsilon_prior"]
    if eps_prior < 0:
        wrong.append(f"budget.epsilon_prior {_g(eps_prior)} is negative")
    elif sanitised and not eps_prior > 0:
        wrong.append(f"a sanitised prior with budget.epsilon_prior {_g(eps_prior)}, not > 0")
    if not sanitised and eps_prior != 0:
        wrong.append(f"prior kind {shown(repr(prior['kind']), 40)} spends nothing, yet "
                     f"epsilon_prior is {_g(eps_prior)}")  # fmt: skip
    return wrong


def _promise_checks(release: _Release):
    from dpcounts.release.manifest import guarantee

    m = release.manifest
    budget, delta = m["budget"], m["delta"]
    out = []
    wrong = _signs(m)
    out.append(
        _check(
            "promise", "numbers", FAIL if wrong else OK,
            "; ".join(wrong) if wrong
            else "every epsilon and delta finite and > 0 (epsilon_prior >= 0, > 0 exactly "
                 "for a sanitised prior), deltas < 1",
            {"wrong": wrong},
        )
    )  # fmt: skip
    if wrong:
        return out, True
    sets = m["sets"]
    eps_total, eps_prior = budget["epsilon_total"], budget["epsilon_prior"]
    eps_set, eps_synth = budget["epsilon_per_set"], budget["epsilon_synthesis"]
    d_total, d_set = budget["delta_total"], budget["delta_per_set"]
    composed, composed_delta = compose(eps_prior, sets, eps_set, d_set)
    good = (
        _close(eps_total, composed, ARITHMETIC_RTOL)
        and _close(eps_synth, eps_total - eps_prior, ARITHMETIC_RTOL)
        and budget["sets"] == sets
        and _close(m["prior"]["epsilon"], eps_prior, ARITHMETIC_RTOL)
    )
    out.append(
        _check(
            "promise", "epsilon", OK if good else FAIL,
            f"total {_g(eps_total)} vs prior {_g(eps_prior)} + {sets} x {_g(eps_set)} = "
            f"{_g(composed)}; synthesis {_g(eps_synth)} vs {_g(eps_total - eps_prior)}; "
            f"budget.sets {budget['sets']}, sets {sets}; prior.epsilon "
            f"{_g(m['prior']['epsilon'])}",
            {"epsilon_total": eps_total, "composed": composed},
        )
    )  # fmt: skip
    tv = d_set / (1.0 + math.exp(eps_set)) if eps_set <= 700 else 0.0
    good = (
        _close(d_total, composed_delta, ARITHMETIC_RTOL)
        and delta["per_set"] == d_set
        and _close(delta["sampler_tv_target"], tv, ARITHMETIC_RTOL)
    )
    out.append(
        _check(
            "promise", "delta", OK if good else FAIL,
            f"total {_g(d_total)} vs {sets} x {_g(d_set)} = {_g(composed_delta)}; delta.per_set "
            f"{_g(delta['per_set'])}; sampler_tv_target {_g(delta['sampler_tv_target'])} vs "
            f"per_set / (1 + e^eps_per_set) = {_g(tv)}",
        )
    )  # fmt: skip
    regenerated = guarantee(m["mechanism"], m["method"], budget)
    same = regenerated == m["guarantee"]
    differ = [k for k in regenerated if regenerated[k] != m["guarantee"].get(k)]
    out.append(
        _check(
            "promise", "statement", OK if same else FAIL,
            "guarantee (status, statement, proof) as this library words it for these numbers"
            if same
            else f"guarantee.{', guarantee.'.join(differ) or 'keys'} not what this library "
                 "writes for the mechanism, method and budget: the words must say the numbers",
        )
    )  # fmt: skip
    pair = (m["mechanism"], m["method"])
    certified = status(*pair) == "certified"
    claimed = m["guarantee"]["status"]
    right = claimed == ("certified" if certified else "nominal")
    out.append(
        _check(
            "promise", "status", OK if right else FAIL,
            f"guarantee.status {claimed!r}; {pair[0]} / {pair[1]} is "
            f"{'certified' if certified else 'nominal'} in this version",
            {"status": claimed, "certified": certified},
        )
    )  # fmt: skip
    hyper = release.table("hyperparameters")
    bound, how = recomputed_epsilon(m["mechanism"], m["total"], hyper)
    values = {"epsilon": bound, "epsilon_per_set": eps_set, "how": how}
    if certified:
        holds = bound <= eps_set * (1 + registry.BOUND_RTOL)
        out.append(
            _check(
                "promise", "bound", OK if holds else FAIL,
                f"recomputed epsilon per set {bound:.12g} {'<=' if holds else '>'} "
                f"epsilon_per_set {_g(eps_set)} ({how}; docs/privacy.md)",
                values,
            )
        )  # fmt: skip
    elif not certified:
        out.append(
            _check(
                "promise", "bound", NOMINAL,
                f"nominal: no guarantee ({pair[0]} / {pair[1]} is not certified; the "
                f"certified bound of these shapes would be {_g(bound)} against "
                f"{_g(eps_set)} per set)",
                values,
            )
        )  # fmt: skip
    return out, True
