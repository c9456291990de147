"""Where each dataset of a run comes from: real, modelled, simulated or illustrative.

The one source of every dataset's provenance. The report's landing page lists the
datasets of the figures a run made, and every figure's caption ends with the datasets it
shows (``workflow/report/*.rst``, through each figure rule's ``params.provenance``); both
are these lines. A study of the study stage gets its line from its table: a shipped table
(or a table the workflow builds from one) is known here; another table states its own in
the study's config (``provenance: {kind, source}``), or the line says it is not stated.

Every line is reStructuredText: ``<dataset>: **<kind>**, <source>``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: real: counts observed of real people; modelled: made by a model where the papers' real
#: data cannot be had here; simulated: drawn by a stated design, as the papers do;
#: illustrative: numbers a paper states for an example, no data.
KINDS = ("real", "modelled", "simulated", "illustrative")
#: The kind of a table whose provenance neither this module nor its config states.
NOT_STATED = "provenance not stated"


@dataclass(frozen=True)
class Provenance:
    """One dataset: its name in the report, its kind and its source (reStructuredText)."""

    dataset: str
    kind: str
    source: str

    def __post_init__(self):
        if self.kind not in (*KINDS, NOT_STATED):
            raise ValueError(f"provenance kind {self.kind!r} is not one of {KINDS}")

    def line(self) -> str:
        return f"{self.dataset}: **{self.kind}**, {self.source}"


POPULATIONS_1980 = Provenance(
    "1980 county populations by age group",
    "modelled",
    "from each county's census population and median age (NCOVR NAT) and the national "
    "1980 age structure (``data/county_age_groups_1980.parquet``; data/README.md)",
)
PENNLC = Provenance(
    "pennLC",
    "real",
    "Pennsylvania's 2002 lung-cancer cases by county, race, sex and age over 2000 "
    "populations (R package SpatialEpi, via Debian's ``r-cran-rgooglemaps``; "
    "``data/pennlc_strata.parquet``)",
)
NCOVR_HOMICIDES = Provenance(
    "NCOVR county homicides",
    "real",
    "US county homicide counts and person-years, 1960-1990 (NCOVR NAT, in the PyPI sdist "
    "``pysal==1.14.4``; ``data/ncovr_homicides.csv``; data/README.md)",
)
STANDIN = Provenance(
    "Study 2's stand-in",
    "modelled",
    "deaths drawn on Pennsylvania's strata at the paper's scale (47,034 strata), "
    "with national age-specific rates as the prior (``study2_table``)",
)
TOY = Provenance(
    "the toy example",
    "illustrative",
    "the numbers of Quick (2022), Section 2.3 (config ``study2.toy``), computed exactly",
)

#: Tables of the study stage whose provenance is known: the shipped file, or the table
#: the workflow builds from one (study2.smk).
STUDY_TABLES: dict[str, Provenance] = {
    "data/ncovr_homicides.csv": NCOVR_HOMICIDES,
    "data/pennlc_strata.parquet": PENNLC,
    "results/study2/pennlc/table.parquet": PENNLC,
    "results/study2/standin/table.parquet": STANDIN,
}


def truth(truth_config: Mapping) -> Provenance:
    """Study 1's true county rates, ages 35-44 (config ``truth``)."""
    if truth_config.get("source") == "wonder":
        path = truth_config.get("wonder", {}).get("path")
        return Provenance(
            "Study 1's true rates (35-44)",
            "real",
            f"deaths of the CDC WONDER export ``{path}``, smoothed by empirical Bayes",
        )
    total = truth_config.get("model", {}).get("total_deaths")
    return Provenance(
        "Study 1's true rates (35-44)",
        "modelled",
        "log rate = national level + state effect + proper CAR field + noise, scaled to "
        f"{total:,} deaths (config ``truth.model``)",
    )


def appendix_c(study1_config: Mapping) -> Provenance:
    """Appendix C's older age groups (config ``study1.appendix_c``)."""
    groups = ", ".join(study1_config["appendix_c"]["age_groups"])
    rho = study1_config["appendix_c"]["correlation"]
    return Provenance(
        f"Appendix C's true rates ({groups})",
        "modelled",
        "totals are assumed national 1980 heart-disease rates times the modelled "
        f"populations; county rates correlated {rho} with the 35-44 truth",
    )


def study1_datasets(study1_config: Mapping) -> Provenance:
    """Study 1's confidential datasets, drawn from its truth (config ``study1``)."""
    return Provenance(
        "Study 1's datasets",
        "simulated",
        f"L = {study1_config['datasets']} tables per scenario, "
        "y ~ Multinomial(y., n x rate / sum of n x rate), from the true rates",
    )


def pseudo_posterior(name: str, dataset: Mapping) -> Provenance:
    """One simulated data set of the pseudo-posterior stage (config
    ``pseudo_posterior.datasets.<name>``)."""
    parts = []
    for c in dataset["components"]:
        family = "Poisson" if c.get("dispersion") is None else "NB"
        shape = "" if c.get("dispersion") is None else f", size {c['dispersion']}"
        parts.append(f"{c['weight']} x {family}(mean {c['mean']}{shape})")
    return Provenance(
        f"pseudo-posterior data set ``{name}``",
        "simulated",
        f"{dataset['size']:,} records drawn from " + " + ".join(parts),
    )


def study(name: str, entry: Mapping) -> Provenance:
    """A study of the study stage (config ``studies.<name>``): its own ``provenance``,
    else its table's when the table is known here, else a line saying it is unknown."""
    stated = entry.get("provenance")
    if stated:
        return Provenance(f"study ``{name}``", stated["kind"], stated["source"])
    table = str(entry["table"])
    known = STUDY_TABLES.get(table)
    rows = entry.get("rows")
    selected = " (rows " + ", ".join(f"{k} = {v}" for k, v in rows.items()) + ")" if rows else ""
    if known is None:
        return Provenance(
            f"study ``{name}``",
            NOT_STATED,
            f"the table ``{table}``{selected} (``studies.{name}.provenance`` says whether "
            "it is real, modelled or simulated, and where it comes from)",
        )
    return Provenance(f"study ``{name}``", known.kind, f"{known.dataset}{selected}: {known.source}")


def lines(*datasets: Provenance) -> list[str]:
    """The datasets' lines, each once, in order (named in words on a report's job page,
    :class:`InWords`: the caption already shows them)."""
    found = list(dict.fromkeys(d.line() for d in datasets))
    return InWords(found, f"the {_count(len(found), 'dataset')} named in the caption")


def code_version(root: str | Path, version: str) -> str:
    """The code a run ran: dpcounts's ``version`` and the git commit of the checkout at
    ``root`` (the workflow's folder), marked when files differ from it, or that it is
    not a git checkout (a source archive)."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(root), *args], capture_output=True,
                                  text=True, timeout=30, check=False)  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short=12", "HEAD")
    if not commit:
        return f"dpcounts {version}, not a git checkout: no commit to name"
    changed = git("status", "--porcelain", "--untracked-files=no")
    mark = " with uncommitted changes" if changed else ""
    return f"dpcounts {version}, commit {commit}{mark}"


# ---- job parameters as the HTML report shows them -----------------------------------------
# Snakemake's report ends each figure's page with its job's parameters as ``str()`` gives
# them: a study's whole config entry, or reStructuredText lines with their markup, dumped
# raw. A parameter in these types reads and pickles as the list or dict it holds, and is
# shown in words instead (its ``repr``, which Snakemake records to decide reruns, is
# unchanged).
class InWords(list):
    """A list job parameter shown on the report's job page as ``words``."""

    def __init__(self, items=(), words: str = "a list"):
        super().__init__(items)
        self.words = words

    def __str__(self) -> str:
        return self.words


class MappingInWords(dict):
    """A mapping job parameter (a config entry) shown on the report's job page as
    ``words``."""

    def __init__(self, items=(), words: str = "a mapping"):
        super().__init__(items)
        self.words = words

    def __str__(self) -> str:
        return self.words


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"
