"""The manifest's schema, its documentation, and the audited ratios it quotes."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpcounts import calibrate
from dpcounts.privacy.audit import audit
from dpcounts.release.manifest import SCHEMA, audited_ratios, guarantee

DOC = Path(__file__).resolve().parents[1] / "docs" / "manifest.md"


def _fields(schema: dict, prefix: str = "") -> list[str]:
    names = []
    for name, sub in schema.get("properties", {}).items():
        names.append(prefix + name)
        names += _fields(sub, prefix + name + ".")
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        names += _fields(extra, prefix + "*.")
    return names


def test_every_schema_field_is_documented():
    text = DOC.read_text()
    missing = [name for name in _fields(SCHEMA) if f"| `{name}` |" not in text]
    assert not missing, f"docs/manifest.md does not document {missing}"


@pytest.mark.parametrize("key", sorted(audited_ratios()["ratios"]))
def test_quoted_ratio_is_reproduced_by_the_exact_audit(key):
    """The ratio a nominal manifest quotes comes from an instance the audit re-checks."""
    mechanism, method = key.split("/")
    instance = dict(audited_ratios()["instances"][key])
    epsilon, total = instance.pop("epsilon"), instance.pop("total")
    population, rate = instance.pop("population"), instance.pop("prior_rate")
    cal = calibrate(mechanism, epsilon, total, population, rate, method=method, **instance)
    ratio = audit(cal) / epsilon
    assert ratio == pytest.approx(audited_ratios()["ratios"][key], rel=1e-9)
    assert ratio > 1  # nominal: the audit finds the claim broken
    budget = {"epsilon_total": 1.0, "delta_total": 1e-12}
    assert f"{ratio:.3g} times" in guarantee(mechanism, method, budget)["statement"]
