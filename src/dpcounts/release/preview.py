"""What a release would promise, computed before anything is drawn or spent.

``dpcounts calibrate`` (OpenDP users get the same from a measurement's privacy map): the
budget split, the guarantee, delta and the sampler's total-variation target, and the
calibration summarised over the strata. The calibration depends on epsilon, the public
total, the populations and the prior only; the counts are read for their total, which is
public. The ledger is read, never written: what the table (or its ``--dataset``) has
spent, what it would have spent after this release, and whether ``synthesize`` would
refuse it (budget, or a table bound to another dataset name). A sanitised group prior
exists only once a release draws it, so its calibration cannot be previewed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpcounts.release.folder import write_public_table
from dpcounts.release.report.summary import rounding_note
from dpcounts.release.request import NEIGHBOURS, ReleaseRequest


def _duration(seconds: float) -> str:
    """About how long, in words a steward reads at a glance."""
    if seconds < 90:
        return f"about {max(seconds, 1):.0f} s"
    return f"about {seconds / 60:.0f} min"


def _size(size: float) -> str:
    return f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.0f} MiB"


def _spread(values: np.ndarray) -> dict:
    return {
        "min": float(np.min(values)),
        "median": float(np.median(values)),
        "max": float(np.max(values)),
    }


def preview(request: ReleaseRequest, hyperparameters: Path | None = None) -> dict:
    """The promise and the calibration of a release of ``request``: its plan
    (:func:`.plan.plan_release`, the forecast measured on this machine), the count-fit check
    a release makes, and the ledger's assessment of the plan's charge (read, never
    written); optionally write the per-stratum calibration to ``hyperparameters`` (CSV or
    Parquet)."""
    from dpcounts.release.inputs import check_count_fit
    from dpcounts.release.plan import plan_release

    plan = plan_release(request, releasing=False, measure=True)
    check_count_fit(request, plan.strata)
    strata, design, budget = plan.strata, plan.design, plan.budget
    epsilon, delta = plan.privacy_map()
    info = {
        "strata": int(strata.counts.size),
        "total": strata.total,
        "mechanism": request.mechanism,
        "method": request.method,
        "budget": budget.as_dict(),
        "guarantee": design.guarantee(),
        "privacy_map": {"epsilon": epsilon, "delta": delta},
        "sampler_tv_target": design.tv_target,
        "neighbouring_relation": NEIGHBOURS,
        "calibration": None,
        "rounding": rounding_note(request.rounding, strata.rounding),
    }
    info["ledger"] = plan.assess()
    cal = plan.calibration
    if cal is None:  # a sanitised prior: drawn only by a release
        info["calibration_note"] = (
            "the prior is sanitised (noisy group totals drawn by the release), so the "
            "calibration is known only after the release draws it"
        )
        return info
    calibration = {"a": _spread(cal.a), "prior": plan.prior.block["kind"]}
    if cal.truncated:
        calibration["lower"] = _spread(cal.lower)
        calibration["upper"] = _spread(cal.upper)
        calibration["tail"] = cal.tail
    info["calibration"] = calibration
    info["sampler_estimate"] = plan.forecast | {"rounding_floor": plan.floor}
    if hyperparameters is not None:
        table = strata.keys.reset_index(drop=True).join(cal.hyperparameter_frame())
        hyperparameters = Path(hyperparameters)
        write_public_table(table, hyperparameters)
        info["hyperparameters"] = str(hyperparameters)
    return info


def _account_lines(account: dict, epsilon: float) -> list[str]:
    """The ledger's account in words: spent so far, after this release, and the verdict."""
    if account is None:
        return ["ledger: not read (no --dataset NAME, which synthesize requires)"]
    spent, after = account["spent"], account["after"]
    whose = (
        f"this table ({account['table'][:12]})"
        if account["dataset"] == account["table"]
        else f"dataset {account['dataset']} (every table released under it)"
    )
    lines = [
        f"ledger ({account['path']}): {whose} has spent epsilon {spent['epsilon']:g}, delta "
        f"{spent['delta']:g} in {spent['releases']} release(s); with this one: epsilon "
        f"{after['epsilon']:g}, delta {after['delta']:g}"
        + (
            " (a nominal release is among them: the total bounds nothing)"
            if account["nominal"]
            else ""
        )
    ]
    if account["refusal"] is not None:
        # the ledger's refusal, as synthesize would print it; here nothing is ever recorded
        refusal = account["refusal"].replace("Nothing was recorded.", "").strip()
        lines.append("  synthesize would refuse this release: " + refusal.replace("\n", "\n    "))
    elif account["budget"] is not None:
        left = account["budget"] - after["epsilon"]
        which = "stored budget" if account["stored_budget"] is not None else "--budget"
        lines.append(
            f"  within the {which} {account['budget']:g} (epsilon {epsilon:g} now, "
            f"{max(left, 0):g} left after it)"
        )
    return lines


def _map_line(info: dict) -> str:
    """The plan's privacy map in words: what its calibration proves, or only claims."""
    how = "the sets are calibrated for" if info["calibration"] is None else "the calibration proves"
    if info["guarantee"]["status"] != "certified":
        how = "nominal: the sets claim (no proof)"
    epsilon, delta = info["privacy_map"]["epsilon"], info["privacy_map"]["delta"]
    return f"privacy map: {how} epsilon {epsilon:.6g}, delta {delta:g} for the whole release"


def format_preview(info: dict) -> str:
    """The preview as plain text."""
    budget = info["budget"]
    lines = [
        f"{info['mechanism']} / {info['method']} on {info['strata']} strata, total "
        f"{info['total']} (public)",
        f"counts (private: depends on the confidential counts, do not publish this line): "
        f"{info['rounding']}",
        f"guarantee: {info['guarantee']['status']}: {info['guarantee']['statement']}",
        f"budget: epsilon {budget['epsilon_total']:g} = prior {budget['epsilon_prior']:g} + "
        f"{budget['sets']} set(s) x {budget['epsilon_per_set']:g}; delta "
        f"{budget['delta_total']:g} = {budget['sets']} x {budget['delta_per_set']:g}",
        _map_line(info),
        f"sampler total-variation target per set: {info['sampler_tv_target']:.3g}",
        f"unit of privacy: {info['neighbouring_relation']}",
        *_account_lines(info["ledger"], budget["epsilon_total"]),
    ]
    cal = info["calibration"]
    if cal is None:
        lines.append(f"calibration: {info['calibration_note']}")
    else:
        a = cal["a"]
        lines.append(
            f"calibration (prior: {cal['prior']}): a from {a['min']:.4g} (median "
            f"{a['median']:.4g}) to {a['max']:.4g}"
        )
        if "lower" in cal:
            lo, up = cal["lower"], cal["upper"]
            lines.append(
                f"  truncation (tail {cal['tail']:.3g}): L from {lo['min']:g} to {lo['max']:g}, "
                f"U from {up['min']:g} to {up['max']:g}"
            )
        estimate = info["sampler_estimate"]
        lines.append(
            f"  forecast: {_duration(estimate['seconds'])} on this machine, "
            f"{_size(estimate['bytes'])} ({estimate['multiply_adds']:.2g} multiply-adds); "
            f"sampler's floating-point error at most {estimate['rounding_floor']:.3g} (the "
            "target must be at least twice it)"
        )
        if "hyperparameters" in info:
            lines.append(f"  per-stratum calibration written to {info['hyperparameters']}")
    return "\n".join(lines)
