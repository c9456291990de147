"""The papers' three mechanism families and the studies' baselines, registered in the one
registry (:mod:`dpcounts.mechanisms.registry`): md (Quick 2021, eqs 2-5), pg (eqs 6-8)
and truncated (Quick 2022), each with its calibration (:mod:`dpcounts.privacy.calibrate`),
its privacy map (docs/privacy.md) and its sampler (:mod:`dpcounts.sampling.synthesize`).
``dpcounts/__init__`` imports this module, so every use of the library sees them; the
functions' own modules are imported when first called, so the import stays cheap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from dpcounts.mechanisms.registry import Baseline, Family, register, register_baseline


def _calibrate(kind: str):
    def calibrate(epsilon, total, population, prior_rate, method, settings):
        from dpcounts.privacy import calibrate as module

        return getattr(module, f"calibrate_{kind}")(epsilon, total, population, prior_rate,
                                                    method, **settings)  # fmt: skip

    return calibrate


def _md_map(total: int, columns: Mapping) -> tuple[float, str]:
    """Quick (2021), eq 5: eps-DP iff min alpha >= total / (e^eps - 1)."""
    import numpy as np

    return math.log1p(total / float(np.min(columns["a"]))), "log(1 + total / min alpha)"


def _kappa_map(truncated: bool):
    def privacy_map(total: int, columns: Mapping) -> tuple[float, str]:
        import numpy as np

        from dpcounts.privacy.certified import certified_epsilon

        a = np.asarray(columns["a"], dtype=float)
        if truncated:
            lower = np.asarray(columns["lower"], dtype=float)
            upper = np.asarray(columns["upper"], dtype=float)
            how = "kappa_i + kappa_j from a, lower, upper, total"
        else:
            lower, upper = np.zeros(a.size), np.full(a.size, float(total))
            how = "kappa_i + kappa_j from a, total (L = 0, U = total)"
        return certified_epsilon(a, total, lower, upper), how

    return privacy_map


def _draw(name: str):
    def draw(counts, cal, size, rng):
        from dpcounts.sampling import synthesize

        return getattr(synthesize, name)(counts, cal, size, rng)

    return draw


def _pg_paper_rows(epsilon, totals, population, prior_rows):
    """pg/paper's calibration of many totals in one pass (:func:`~dpcounts.privacy.paper.
    pg_paper_shapes_rows`): the shapes a, then b = a / prior rate, bit for bit each row's
    ``calibrate("pg", ..., method="paper")``."""
    from dpcounts.mechanisms.poisson_gamma import gamma_rates
    from dpcounts.privacy.paper import pg_paper_shapes_rows

    shapes = pg_paper_shapes_rows(epsilon, totals, population, prior_rows)
    return shapes, gamma_rates(shapes, prior_rows)


_KAPPA = "docs/privacy.md, certified calibration (kappa_i + kappa_j <= epsilon per set)"
_MD_PROOF = "Quick (2021), eq 5 (Machanavajjhala et al. 2008), confirmed by the exact audit"

# Figures draw an arm by what it is, never by its place in a list: MD red; untruncated PG
# blue with the study's own (or a national) prior, green with state rates, olive with
# sanitised state rates; truncated PG orange (paper calibration), purple (exact bivariate)
# or pink (certified); the geometric baseline grey (brown is the prior's, in the study
# figures), suppression cyan.
register(Family(
    name="md", title="MD", methods=("paper", "certified"),
    certified={"paper": _MD_PROOF, "certified": _MD_PROOF},
    hyperparameters=("a", "population"), calibrate=_calibrate("md"), privacy_map=_md_map,
    draw=_draw("draw_dirichlet_multinomial"), uses_prior=False,
    method_titles={"paper": "exact alpha", "certified": "exact alpha"},
    colours={None: "tab:red"}, line_method="paper",
))  # fmt: skip
register(Family(
    name="pg", title="PG", methods=("paper", "exact", "certified"),
    certified={"certified": _KAPPA}, hyperparameters=("a", "b", "population", "prior_rate"),
    calibrate=_calibrate("pg"), privacy_map=_kappa_map(False), draw=_draw("draw_conditioned"),
    prior_blind=("certified",), lighter="truncated", calibrate_rows={"paper": _pg_paper_rows},
    colours={None: "tab:blue", "national": "tab:blue", "state": "tab:green",
             "sanitised": "tab:olive"}, colour_by="prior",
))  # fmt: skip
register(Family(
    name="truncated", title="Truncated PG", methods=("paper", "exact", "certified"),
    certified={"certified": _KAPPA},
    hyperparameters=("a", "b", "population", "prior_rate", "lower", "upper"),
    calibrate=_calibrate("truncated"), privacy_map=_kappa_map(True),
    draw=_draw("draw_conditioned"),
    settings=("tail", "inflation"),
    colours={"paper": "tab:orange", "exact": "tab:purple", "certified": "tab:pink"},
    colour_by="method",
))  # fmt: skip
register_baseline(Baseline("geometric", "geometric output perturbation", colour="tab:gray"))
# what agencies publish today: one table, no epsilon (dpcounts.studies.stage.suppression)
register_baseline(Baseline("suppression", "suppression of small counts"))
