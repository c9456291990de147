"""The checks put into words: one line each, the closing summary, and JSON.

:func:`format_checks` prints the checks by topic, then :func:`summary`: passed or failed,
what a passing verification recomputed from the public files and what it takes on trust
(:func:`accounting`), and whether the folder is signed (:func:`signature_state`);
:func:`as_json` says the same for machines. Every field printed, from the manifest, a file
or a file's name, is passed through :func:`shown`: control characters escaped, not obeyed,
and cut to length.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from dpcounts.release.signature import SIGNATURE
from dpcounts.verify.checks import FAIL, NOMINAL, TOPICS, WARNING, Check, failed


def shown(text: object, limit: int = 200) -> str:
    """``text`` as a terminal may print it: control characters escaped, not obeyed, and
    at most ``limit`` characters (a manifest is written by whoever wrote the folder)."""
    text = str(text)
    cut = len(text) > limit
    text = "".join(
        ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
        for ch in text[:limit]
    )
    return text + ("..." if cut else "")


def _g(x: float) -> str:
    return f"{x:.10g}"


def accounting(manifest: dict) -> tuple[list[str], list[str]]:
    """What a passing verification recomputed from the public files, and what the promise
    takes on trust (no check can see it), each as a list of phrases: the sanitised prior's
    epsilon (its noise cannot be read from its noisy totals), a declared prior's source
    and the count-fit check's verdict (the steward's word that the prior is public), and
    always that the sets were drawn by this calibration."""
    b, prior = manifest["budget"], manifest["prior"]
    kind = prior["kind"]
    promise = f"({_g(b['epsilon_total'])}, {_g(b['delta_total'])})-DP"
    sets = (f"epsilon {_g(b['epsilon_synthesis'])} of the {manifest['sets']} synthetic "
            f"set(s) (the privacy bound of the hyperparameters, {_g(b['epsilon_per_set'])} "
            "per set)")  # fmt: skip
    if kind == "none":
        recomputed = [f"the stated {promise}: {sets}"]
    elif kind == "total":
        recomputed = [f"the stated {promise}: {sets}, the prior the overall rate of the "
                      "public total"]  # fmt: skip
    else:
        recomputed = [sets]
    trusted = []
    if kind == "sanitised":
        recomputed.append("the prior's rates from its noisy totals")
        trusted.append(f"the sanitised prior's epsilon_prior {_g(b['epsilon_prior'])} (its "
                       "noise cannot be read from its noisy totals)")  # fmt: skip
    declared = prior.get("declared_source")
    if isinstance(declared, str):
        trusted.append(f'the prior\'s declared source "{shown(declared, 80)}"')
    verdict = prior.get("count_fit_check")
    if verdict in ("passed", "overridden"):
        said = "passed" if verdict == "passed" else "overridden by the steward"
        trusted.append(f"the count-fit check's verdict ({said})")
    trusted.append("that the sets were drawn by this calibration")
    return recomputed, trusted


def signature_state(checks: list[Check]) -> tuple[str, str]:
    """(state, sentence): whether the folder is signed and the signature checked
    (``verified``), signed but not checked (``not checked``: no ``--key``), ``unsigned``,
    or a signature that does not hold (``failed``); ``not looked at`` when the
    verification stopped before (a manifest it does not read)."""
    found = next((c for c in checks if (c.topic, c.name) == ("files", "signature")), None)
    if found is None:  # the verification stopped before the signature
        return "not looked at", "The signature was not looked at."
    state = found.values.get("state", "failed")
    key = shown(found.values.get("key_id", ""), 40)
    if state == "verified":
        sentence = (f"Signed by the given key {key}: no public file or manifest field changed "
                    "since the steward signed.")  # fmt: skip
    elif state == "not checked":
        sentence = (f"Signed (key {key}) but not checked: give --key PUBLIC, the steward's "
                    "public key, to check that nothing changed since.")  # fmt: skip
    elif state == "unsigned":
        sentence = (f"Unsigned: no {SIGNATURE}, so nothing shows the folder is as its "
                    "steward published it.")  # fmt: skip
    else:
        sentence = "The signature does not hold (files/signature)."
    return state, sentence


def _and(phrases: list[str]) -> str:
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + " and " + phrases[-1]


def summary(checks: list[Check], manifest: dict | None = None) -> str:
    """The closing line: passed or failed; when passed, what was recomputed from the
    public files and what is taken on trust (:func:`accounting`); and whether the folder
    is signed (:func:`signature_state`)."""
    fails = [c for c in checks if c.status == FAIL]
    warnings = [c for c in checks if c.status == WARNING]
    nominal = [c for c in checks if c.status == NOMINAL]
    counted = f"{len(checks) - len(fails)} of {len(checks)} checks passed"
    if warnings:
        counted += f", {len(warnings)} warning(s)"
    signed = signature_state(checks)[1]
    if fails:
        names = ", ".join(f"{c.topic}/{shown(c.name, 60)}" for c in fails[:4])
        more = ", ..." if len(fails) > 4 else ""
        return (
            f"FAILED: {counted}; failed: {names}{more}. The release is not what its manifest "
            f"says, or its public numbers do not give its promise. {signed}"
        )
    if nominal:
        return (
            f"PASSED, NOMINAL: {counted}. The files are what the manifest says, but the "
            f"release is nominal: it promises nothing proven. {signed}"
        )
    # No check can tell sets drawn by the calibration from any other table of whole counts
    # with the total, the confidential table included, nor read a prior's noise from its
    # noisy totals: say what was recomputed and what is taken on trust, not more.
    try:
        recomputed, trusted = accounting(manifest)
    except (KeyError, TypeError):  # no manifest given, or not the one verified
        recomputed = ["the privacy bound of the hyperparameters"]
        trusted = ["that the sets were drawn by this calibration"]
    return (
        f"PASSED: {counted}. Recomputed from the public files: {_and(recomputed)}; taken on "
        f"trust, not checkable from the folder: {_and(trusted)}. {signed}"
    )


def format_checks(checks: list[Check], path: Path, manifest: dict | None = None) -> str:
    """The checks by topic, one line each, then :func:`summary`."""
    head = f"dpcounts verify {shown(path)}"
    if manifest is not None and isinstance(manifest.get("budget"), dict):
        try:
            head += (
                f": {shown(manifest['mechanism'], 20)} / {shown(manifest['method'], 20)}, "
                f"{shown(manifest['sets'], 20)} set(s) of {shown(manifest['strata'], 20)} strata, "
                f"total {shown(manifest['total'], 20)}"
            )
        except KeyError:
            pass
    lines = [head]
    for topic in TOPICS:
        found = [c for c in checks if c.topic == topic]
        if not found:
            continue
        lines.append(topic)
        for c in found:
            lines.append(f"  {shown(c.status, 8):<7} {shown(c.name, 60)}: {shown(c.detail, 400)}")
    lines.append(shown(summary(checks, manifest), 1000))
    return "\n".join(lines)


def as_json(checks: list[Check], path: Path, manifest: dict | None = None) -> str:
    return json.dumps(
        {
            "release": os.fspath(path),
            "passed": not failed(checks),
            "nominal": any(c.status == NOMINAL for c in checks),
            "summary": summary(checks, manifest),
            **_json_accounting(checks, manifest),
            "checks": [c.as_dict() for c in checks],
        },
        indent=2,
        default=float,
    )


def _json_accounting(checks: list[Check], manifest: dict | None) -> dict:
    """``recomputed`` and ``trusted`` (:func:`accounting`; null unless every check passed
    and the release is certified) and ``signature`` (:func:`signature_state`)."""
    recomputed = trusted = None
    if not failed(checks) and not any(c.status == NOMINAL for c in checks):
        try:
            recomputed, trusted = accounting(manifest)
        except (KeyError, TypeError):
            pass
    return {"recomputed": recomputed, "trusted": trusted, "signature": signature_state(checks)[0]}
