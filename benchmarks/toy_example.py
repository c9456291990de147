"""Quick (2022), Section 2.3 toy example: y. = 100, I = 2, E[y] = (15, 85), eps = 1, tail = 1e-4.

Prints every calibration of ours (paper / exact / certified, untruncated and truncated:
a, L, U, the exact audited epsilon and where it occurs) next to the paper's numbers
(untruncated a_1 > 116, a_2 > 58; truncated, optimised: a_1 > 6.85, a_2 > 0.001, worst
case at z_1 = 30).

Every quantity of the mechanism depends on n_i and lambda0_i only through
E[y_i] = n_i lambda0_i and a_i (b_i / n_i = a_i / E[y_i]; for I = 2, b_(i) / n_(i) is the
other cell's), so "equal rates, unequal populations" and "equal populations, unequal
rates" give the same calibration; the script checks that too.

    .venv/bin/python benchmarks/toy_example.py
"""

from __future__ import annotations

import numpy as np

from dpcounts import calibrate
from dpcounts.mechanisms.truncation import truncation_bounds
from dpcounts.privacy.audit import audit_worst_case
from dpcounts.privacy.certified import effective_bounds
from dpcounts.privacy.paper import truncated_paper_shapes

TOTAL, EPSILON, TAIL = 100, 1.0, 1e-4
EQUAL_RATES = {"population": [15.0, 85.0], "prior_rate": None}  # national rate = 1
EQUAL_POPULATIONS = {"population": [100.0, 100.0], "prior_rate": [0.15, 0.85]}
PAPER = {
    ("pg", "paper"): "paper: a_1 > 116, a_2 > 58",
    ("truncated", "exact"): "paper: a_1 > 6.85, a_2 > 0.001 (optimised), worst z_1 = 30",
}


def row(label, cal, note=""):
    case = audit_worst_case(cal)
    bounds = f"L={cal.lower.tolist()} U={cal.upper.tolist()}" if cal.truncated else "L=0 U=y."
    if cal.method == "certified" and cal.truncated:
        eff_lower, eff_upper = effective_bounds(cal.total, cal.lower, cal.upper)
        note = f"effective L'={eff_lower.astype(int).tolist()} U'={eff_upper.astype(int).tolist()}"
    print(
        f"{label:<28} a=({cal.a[0]:9.4f}, {cal.a[1]:9.4f})  {bounds:<22} "
        f"audit eps={case.epsilon:.6f} at y={case.y.tolist()} z={case.z.tolist()}"
        + (f"   {note}" if note else "")
    )


def main() -> None:
    print(__doc__.splitlines()[0])
    for mechanism in ("pg", "truncated"):
        extra = {"tail": TAIL} if mechanism == "truncated" else {}
        for method in ("paper", "exact", "certified"):
            label = f"{mechanism} / {method}"
            try:
                cal = calibrate(mechanism, EPSILON, TOTAL, **EQUAL_RATES, method=method, **extra)
            except ValueError as err:
                print(f"{label:<28} refused: {err}")
                continue
            twin = calibrate(mechanism, EPSILON, TOTAL, **EQUAL_POPULATIONS, method=method, **extra)
            assert np.allclose(cal.a, twin.a, rtol=1e-6), "E[y] alone should matter"
            row(label, cal, PAPER.get((mechanism, method), ""))
    # Eq (13) evaluated anyway, although cell 2 (E = 85 > 15) violates its assumption.
    lower, upper = truncation_bounds(np.array([15.0, 85.0]), TOTAL, TAIL)
    a13 = truncated_paper_shapes(EPSILON, TOTAL, lower, upper)
    print(
        f"{'eq (13) ignoring assumption':<28} a=({a13[0]:9.4f}, {a13[1]:9.4f})  "
        f"L={lower.tolist()} U={upper.tolist()} (not audited: outside the paper's theorem)"
    )
    # The paper's worst case z_1 = 30 suggests U_1 = 30: Poisson(15) quantiles give that
    # for tail/2 in [1.97e-4, 4.18e-4), e.g. tail = 4e-4.
    cal = calibrate("truncated", EPSILON, TOTAL, **EQUAL_RATES, method="exact", tail=4e-4)
    row("truncated / exact tail=4e-4", cal, PAPER[("truncated", "exact")])


if __name__ == "__main__":
    main()
