"""The public manifest of a release: what it is, what it promises, and nothing else.

The manifest is built from parsed, whitelisted options and public quantities only; it
never copies the command line (an abbreviated ``--see 42`` once slipped a seed through
that way), the input's file name, its checksum or anything computed from the counts
except through a spent, recorded budget. Its schema is :data:`SCHEMA` (JSON Schema,
draft 2020-12), documented field by field in ``docs/manifest.md``; a test keeps the two
in step.
"""

from __future__ import annotations

import json
import math
from importlib import resources

from dpcounts.mechanisms import registry as _registry

#: Manifest format version; bump when a field changes meaning (1: before issue #12; 2:
#: before ``strata_list``; 3: ``strata_list.source`` "cross-product" was the unstated
#: default and claimed a list "not a function of the counts"; now the steward's declaration;
#: 4: before ``prior.declared_source`` and ``prior.count_fit_check``, when
#: ``prior.groups`` named only a sanitised prior's groups; 5: before every prior the
#: steward brings, grouped too, needed ``prior.declared_source``).
RELEASE_FORMAT = 6
#: The synthetic count column of the release (the input's count column is replaced).
SYNTHETIC_COUNT = "count"
#: What the manifest says of ``--rounding``, by mode. Whether any count was fractional
#: depends on the confidential counts: only the steward's private folder states it.
ROUNDING_STATEMENTS = {
    "refuse": "none: the counts were used as given (fractional counts are refused)",
    "nearest": (
        "the input's counts were rounded to whole numbers (nearest, half to even) before "
        "anything else: a fixed, public rule applied to the confidential counts, so the "
        "guarantee is about the rounded table; whether any count was fractional is not "
        "stated here"
    ),
}
#: What the manifest's ``denominator`` says, by kind (``--expected-column``,
#: ``studies.<name>.denominator``): the column ``population_column`` names holds these.
DENOMINATOR_STATEMENTS = {
    "population": (
        "populations (people or person-years): rates are count / population, every count "
        "at most its population"
    ),
    "expected": (
        "expected counts E_i (indirect standardisation: public populations times public "
        "standard rates), declared public by the data steward like populations: rates are "
        "SMRs (observed / expected, relative risks); counts are Poisson around E_i x "
        "relative risk, so no count is bounded by its E_i; every E_i is finite and > 0"
    ),
}
#: Purpose of a release, by whether its randomness came from a user seed.
PURPOSE = {False: "publication", True: "reproducible test, not for publication"}


def status(mechanism: str, method: str) -> str:
    """``certified`` when the registry's family proves the method
    (:attr:`dpcounts.mechanisms.registry.Family.certified`), else ``nominal``: the one
    place a release's status is decided (:attr:`.design.Design.status`, ``verify``)."""
    known = mechanism in _registry.names() and _registry.family(mechanism).is_certified(method)
    return "certified" if known else "nominal"


def certified_pairs() -> list[tuple[str, str]]:
    """Every (mechanism, method) pair the registry certifies, in its order."""
    return [(f.name, m) for f in map(_registry.family, _registry.names()) for m in f.certified]


def schema() -> dict:
    """:data:`SCHEMA` with the mechanisms and methods the registry knows today."""
    properties = {**SCHEMA["properties"], "mechanism": {"enum": list(_registry.names())},
                  "method": {"enum": list(_registry.methods())}}  # fmt: skip
    return {**SCHEMA, "properties": properties}


def check_method(request) -> None:
    """Refuse a nominal calibration without ``allow_nominal``; refuse misplaced options."""
    from dpcounts.release.request import ReleaseError

    if status(request.mechanism, request.method) == "nominal" and not request.allow_nominal:
        raise ReleaseError(
            f"--method {request.method} for {request.mechanism} is a nominal calibration, not "
            "a guarantee (the exact audit finds realised epsilon above the nominal one); use "
            "the default --method certified, or add --allow-nominal to publish a release "
            "whose manifest says 'nominal, not a guarantee'"
        )
    if not request.needs_prior and (
        request.prior_file is not None
        or request.sanitised_prior_by is not None
        or request.prior_epsilon is not None
    ):
        # md uses no prior: a sanitised prior's budget would be spent on nothing, and the
        # manifest's budget and prior blocks would disagree
        raise ReleaseError(
            "--prior, --sanitised-prior-by and --prior-epsilon apply to --mechanism pg and "
            f"truncated only; {request.mechanism!r} uses no prior"
        )
    bounded = _registry.family(request.mechanism).bounded
    if not bounded and (request.tail is not None or request.inflation != 1):
        raise ReleaseError(
            f"--tail and --inflation apply to --mechanism truncated only, not {request.mechanism!r}"
        )


def _proof(mechanism: str, method: str) -> str:
    return _registry.family(mechanism).certified[method]


def audited_ratios() -> dict:
    """Worst realised/nominal epsilon found by ``benchmarks/audit_sweep.py --write``."""
    text = resources.files("dpcounts.privacy").joinpath("audited_ratios.json").read_text()
    return json.loads(text)


def guarantee(mechanism: str, method: str, budget_dict: dict) -> dict:
    """The manifest's ``guarantee`` block for a calibration method."""
    eps, delta = budget_dict["epsilon_total"], budget_dict["delta_total"]
    if status(mechanism, method) == "certified":
        return {
            "status": "certified",
            "statement": (
                f"the whole release (every set, the hyperparameters, the prior, this "
                f"manifest) is ({eps:g}, {delta:g})-differentially private under the "
                "neighbouring relation stated here"
            ),
            "proof": _proof(mechanism, method) + "; composition and delta: docs/privacy.md",
            "audited_worst_ratio": None,
        }
    worst = audited_ratios()["ratios"][f"{mechanism}/{method}"]
    return {
        "status": "nominal",
        "statement": (
            f"nominal, not a guarantee: epsilon {eps:g} is what the {method} calibration "
            f"targets, but the exact audit found realised epsilon up to {worst:.3g} times the "
            "nominal value on small instances (benchmarks/audit_sweep.py)"
        ),
        "proof": None,
        "audited_worst_ratio": worst,
    }


_NUMBER = {"type": "number"}
_NULLABLE_NUMBER = {"type": ["number", "null"]}
_STRING = {"type": "string"}
_FILE = {
    "type": "object",
    "required": ["path", "sha256", "layout"],
    "additionalProperties": False,
    "properties": {
        "path": _STRING,
        "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
        "layout": _STRING,
    },
}

#: JSON Schema of the manifest (format :data:`RELEASE_FORMAT`).
SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "dpcounts release manifest",
    "type": "object",
    "additionalProperties": False,
    "required": [
        "dpcounts_release_format",
        "dpcounts_version",
        "purpose",
        "mechanism",
        "method",
        "guarantee",
        "budget",
        "delta",
        "neighbouring_relation",
        "public",
        "prior",
        "rounding",
        "truncation",
        "strata",
        "strata_list",
        "total",
        "sets",
        "keys",
        "population_column",
        "files",
        "randomness",
        "seed_commitment",
    ],
    "properties": {
        "dpcounts_release_format": {"const": RELEASE_FORMAT},
        "dpcounts_version": _STRING,
        "purpose": {"enum": list(PURPOSE.values())},
        # the registry's at import; schema() gives today's (a mechanism registered since)
        "mechanism": {"enum": list(_registry.names())},
        "method": {"enum": list(_registry.methods())},
        "guarantee": {
            "type": "object",
            "additionalProperties": False,
            "required": ["status", "statement", "proof", "audited_worst_ratio"],
            "properties": {
                "status": {"enum": ["certified", "nominal"]},
                "statement": _STRING,
                "proof": {"type": ["string", "null"]},
                "audited_worst_ratio": _NULLABLE_NUMBER,
            },
        },
        "budget": {
            "type": "object",
            "additionalProperties": False,
            "required": [
                "epsilon_total",
                "epsilon_prior",
                "epsilon_synthesis",
                "epsilon_per_set",
                "delta_total",
                "delta_per_set",
                "sets",
                "composition",
            ],
            "properties": {
                "epsilon_total": _NUMBER,
                "epsilon_prior": _NUMBER,
                "epsilon_synthesis": _NUMBER,
                "epsilon_per_set": _NUMBER,
                "delta_total": _NUMBER,
                "delta_per_set": _NUMBER,
                "sets": {"type": "integer", "minimum": 1},
                "composition": _STRING,
            },
        },
        "delta": {
            "type": "object",
            "additionalProperties": False,
            "required": ["per_set", "sampler_tv_target", "how"],
            "properties": {
                "per_set": _NUMBER,
                "sampler_tv_target": _NUMBER,
                "how": _STRING,
            },
        },
        "neighbouring_relation": _STRING,
        "public": {"type": "array", "items": _STRING},
        "prior": {
            "type": "object",
            "additionalProperties": False,
            "required": [
                "kind",
                "description",
                "epsilon",
                "groups",
                "file",
                "floor",
                "declared_source",
                "count_fit_check",
            ],
            "properties": {
                "kind": {"enum": ["none", "input-column", "external-file", "sanitised", "total"]},
                "description": _STRING,
                "epsilon": _NUMBER,
                "groups": {"type": ["array", "null"], "items": _STRING},
                "file": {"type": ["string", "null"]},
                "floor": {"type": ["number", "null"]},
                "declared_source": {"type": ["string", "null"], "maxLength": 500},
                "count_fit_check": {"enum": ["passed", "overridden", "not applicable"]},
            },
        },
        "rounding": {
            "type": "object",
            "additionalProperties": False,
            "required": ["mode", "statement"],
            "properties": {
                "mode": {"enum": list(ROUNDING_STATEMENTS)},
                "statement": _STRING,
            },
        },
        "truncation": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "required": ["tail", "inflation"],
            "properties": {"tail": _NUMBER, "inflation": _NUMBER},
        },
        "strata": {"type": "integer", "minimum": 1},
        "strata_list": {
            "type": "object",
            "additionalProperties": False,
            "required": ["source", "statement"],
            "properties": {
                "source": {"enum": ["cross-product", "external-file", "declared"]},
                "statement": _STRING,
            },
        },
        "total": {"type": "integer", "minimum": 1},
        "sets": {"type": "integer", "minimum": 1},
        "keys": {"type": "array", "items": _STRING, "minItems": 1},
        # optional (releases before it have none): public columns beside the keys
        "attributes": {"type": "array", "items": _STRING, "uniqueItems": True},
        "population_column": _STRING,
        # optional (releases before it have populations): what population_column holds
        "denominator": {
            "type": "object",
            "additionalProperties": False,
            "required": ["kind", "statement"],
            "properties": {
                "kind": {"enum": list(DENOMINATOR_STATEMENTS)},
                "statement": _STRING,
            },
        },
        "files": {
            "type": "object",
            "additionalProperties": _FILE,
            "required": ["synthetic", "hyperparameters"],
        },
        "randomness": _STRING,
        "seed_commitment": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
    },
}


def validate(manifest: dict) -> None:
    """Raise ``jsonschema.ValidationError`` if ``manifest`` does not follow :data:`SCHEMA`."""
    import jsonschema

    jsonschema.validate(manifest, SCHEMA)
    numbers = [manifest["budget"][k] for k in ("epsilon_total", "delta_total")]
    if not all(math.isfinite(x) for x in numbers):
        raise ValueError("manifest budget must be finite")
