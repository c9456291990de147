"""A release of a study's table, as the study's config entry states it (``--study CONFIG:NAME``).

A steward studies a table (``studies.<name>`` in a config, :mod:`dpcounts.studies.stage`), reads the
guide, and releases the same table under one of the study's arms at an epsilon the guide
endorses. Everything the study expresses then reaches the release from the one entry,
checked by the same code as the study stage (:func:`dpcounts.config_check.check_config`
with the workflow's schema, :func:`dpcounts.studies.stage.definition.study_definition`,
:func:`dpcounts.studies.stage.table.read_study_table`): the table and its row selection, keys,
count, population (or expected counts, ``denominator``) and ``population_keys``,
rounding, the prior (overall, sanitised by keys or attributes with its epsilon, a file,
a column), the truncation settings, and for the utility report the measures,
disparities, age adjustment and the guide's verdicts. The command line gives what a
study leaves open: epsilon, the arm (``--mechanism`` and ``--method``, one of the
study's arms), sets, the dataset's name, budget and folder.

The config is read as the workflow reads it: ``config/config.yaml`` of the checkout that
holds the workflow's schema, with the given file merged over it (Snakemake's
``--configfile``), every default filled from the schema. Paths in the config are relative
to that checkout, where ``snakemake`` runs, and so is the study's guide,
``results/studies/<name>/guide.csv``.

A release rests on a guide that judged the entry as it is today: the study stage writes
what it judged beside the guide (``guide.json``,
:mod:`dpcounts.studies.stage.fingerprint`), and :meth:`StudySource.check_guide` refuses,
before any count is read and before the ledger, a guide that is missing or whose
fingerprint differs from the entry's, naming the keys that differ (never a value) and the
command that runs the study. ``--release-without-guide`` releases anyway; the private
summary says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dpcounts.data.rounding import RoundingReport
from dpcounts.studies.stage.definition import StudyDefinition

#: Where a workflow checkout keeps its schema and default config (relative to its root).
SCHEMA = Path("workflow/schemas/config.schema.yaml")
DEFAULT_CONFIG = Path("config/config.yaml")
#: The options a study's entry decides (given with ``--study``, they are refused).
DECIDED = {
    "input": "table",
    "keys": "keys",
    "count_column": "count",
    "population_column": "population",
    "denominator": "denominator",
    "population_keys": "population_keys",
    "attributes": "attributes",
    "rounding": "rounding",
    "prior_file": "prior",
    "prior_rate_column": "prior",
    "sanitised_prior_by": "prior",
    "prior_epsilon": "prior.epsilon",
    "prior_source": "prior.source_note",
    "tail": "truncation.tail",
    "inflation": "truncation.inflation",
    "wonder": "format",
}


class StudySourceError(ValueError):
    """``--study`` names no readable study; the message says which part and the fix."""


@dataclass(frozen=True)
class StudySource:
    """A study's checked definition, the checkout its paths are relative to, its config."""

    definition: StudyDefinition
    root: Path
    config: Path

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def guide_path(self) -> Path:
        """The study's guide, where the workflow writes it."""
        return self.root / "results" / "studies" / self.name / "guide.csv"

    @property
    def fingerprint_path(self) -> Path:
        """What the guide judged (:mod:`dpcounts.studies.stage.fingerprint`), beside it."""
        return self.guide_path.with_name("guide.json")

    def run_command(self, again: bool = False) -> str:
        """The command that runs the study (docs/your-study.md), from the checkout;
        ``again``: every job of it, whatever Snakemake's own triggers say."""
        config = self.config.resolve()
        try:
            config = config.relative_to(self.root.resolve())
        except ValueError:
            pass
        force = " --forcerun study_strata" if again else ""
        return (f"snakemake --cores 2 --configfile {config}{force} -- "
                f"results/studies/{self.name}/guide.csv")  # fmt: skip

    def guide_problem(self) -> str | None:
        """Why the guide is not the entry's as it is today (missing, or the keys whose
        fingerprint differs), or None when it is current."""
        import json

        from dpcounts.studies.stage.fingerprint import differences, study_fingerprint

        where = Path("results", "studies", self.name, "guide.csv")  # in the checkout
        if not self.guide_path.is_file():
            return f"the study has not run (no guide at {where})"
        if not self.fingerprint_path.is_file():
            return (f"its guide ({where}) records no fingerprint of what it judged (a guide "
                    "from before guide.json)")  # fmt: skip
        try:
            judged = json.loads(self.fingerprint_path.read_text(encoding="utf-8"))["fingerprint"]
        except (ValueError, KeyError, TypeError, OSError):
            return f"its guide's fingerprint ({self.fingerprint_path.name}) cannot be read"
        changed = differences(judged, study_fingerprint(self.definition))
        if changed:
            return (f"its guide ({where}) judged another entry: {', '.join(changed)} "
                    "changed since the study ran")  # fmt: skip
        return None

    def check_guide(self) -> None:
        """StudySourceError, one line, when the guide is missing or stale
        (:meth:`guide_problem`), naming the command that runs the study."""
        problem = self.guide_problem()
        if problem is None:
            return
        again = not problem.startswith("the study has not run")
        raise StudySourceError(
            f"--study {self.config}:{self.name}: {problem}; nothing was spent. Run the "
            f"study{' again' if again else ''}: {self.run_command(again)}, then read its "
            "guide (or give --release-without-guide to release without a current guide: "
            "the private report says so)"
        )

    def guide(self) -> pd.DataFrame | None:
        """The study's guide (``guide.csv``), or None when the study has not run."""
        return pd.read_csv(self.guide_path) if self.guide_path.is_file() else None

    def arm(self, mechanism: str, method: str):
        """The study's arm of ``mechanism`` / ``method``; StudySourceError naming the arms
        the study judged when it has none."""
        for arm in self.definition.arms:
            if (arm.mechanism, arm.method) == (mechanism, method):
                return arm
        arms = ", ".join(f"{a.mechanism} / {a.method}" for a in self.definition.arms)
        raise StudySourceError(
            f"--study {self.config}:{self.name}: the study judged the arms {arms}, not "
            f"{mechanism} / {method}; give --mechanism and --method of one of them (the "
            "guide's verdicts are about those), or add the arm to studies."
            f"{self.name}.arms and run the study"
        )

    def request_fields(self, mechanism: str) -> dict:
        """The :class:`~dpcounts.release.request.ReleaseRequest` fields the entry decides
        (:data:`DECIDED`) for an arm of ``mechanism``."""
        d = self.definition
        prior = d.prior
        fields = dict(
            input=d.table,
            keys=tuple(d.keys),
            count_column=d.count,
            population_column=d.population,
            denominator=d.denominator,
            population_keys=tuple(d.population_keys),
            attributes=tuple(d.attributes),
            rounding=d.rounding,
            wonder=d.wonder,
        )
        from dpcounts.mechanisms import registry

        if registry.family(mechanism).bounded:
            fields |= dict(tail=d.tail, inflation=d.inflation)
        if not registry.family(mechanism).uses_prior:
            return fields
        if prior.source == "overall":
            fields["sanitised_prior_by"] = ()
        elif prior.source == "sanitised":
            fields |= dict(sanitised_prior_by=tuple(prior.by), prior_epsilon=prior.epsilon)
        elif prior.source == "file":
            fields |= dict(prior_file=prior.path, prior_rate_column=prior.column,
                           prior_source=prior.source_note)  # fmt: skip
        else:
            fields |= dict(prior_rate_column=prior.column, prior_source=prior.source_note)
        return fields

    def strata(self) -> tuple[pd.DataFrame, RoundingReport]:
        """The study's strata (:func:`dpcounts.studies.stage.table.read_study_table`: selected,
        checked, sorted by the keys) and what the rounding did."""
        from dpcounts.studies.stage.table import read_study_table

        table = read_study_table(self.definition)
        rounding = table.report["rounding"]
        report = RoundingReport(
            mode=rounding["mode"],
            strata=table.report["strata"],
            strata_changed=rounding["strata_changed"],
            total_before=rounding["total_before"],
            total_after=rounding["total_after"],
        )
        return table.strata, report


def _merged(base: dict, over: dict) -> dict:
    """``over`` merged into ``base`` key by key, as Snakemake merges ``--configfile``."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def find_root(config: Path) -> Path:
    """The workflow checkout of ``config``: the first folder holding :data:`SCHEMA`, from
    the current folder up, then from the config's folder up."""
    for start in (Path.cwd(), config.resolve().parent):
        for folder in (start, *start.parents):
            if (folder / SCHEMA).is_file():
                return folder
    raise StudySourceError(
        f"--study {config}: no dpcounts workflow checkout ({SCHEMA}) in the current folder, "
        "the config's folder or above; run dpcounts from the checkout where the study ran"
    )


def load_study(spec: str) -> StudySource:
    """The study ``NAME`` of the config file ``CONFIG`` (``spec`` = ``CONFIG:NAME``),
    checked as the workflow checks it before its first job."""
    import yaml

    from dpcounts.config_check import ConfigError, check_config
    from dpcounts.studies.stage.definition import StudyConfigError, study_definition

    path_text, colon, name = str(spec).rpartition(":")
    if not colon or not path_text or not name:
        raise StudySourceError(
            f"--study {spec}: expected CONFIG:NAME, the config file and the study's name "
            "under its studies key, e.g. --study my_study.yaml:homicides_by_decade"
        )
    config = Path(path_text)
    if not config.is_file():
        raise StudySourceError(f"--study {spec}: {config} not found; expected a YAML config")
    root = find_root(config)
    try:
        over = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
        base = yaml.safe_load((root / DEFAULT_CONFIG).read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, OSError) as err:
        raise StudySourceError(f"--study {spec}: cannot read the config: {err}") from None
    if not isinstance(over, dict):
        raise StudySourceError(f"--study {spec}: {config} is not a mapping of config keys")
    merged = _merged(base, over) if config.resolve() != (root / DEFAULT_CONFIG).resolve() else base
    studies = over.get("studies") if isinstance(over.get("studies"), dict) else {}
    if name not in studies and name not in (merged.get("studies") or {}):
        known = sorted(merged.get("studies") or {})
        raise StudySourceError(
            f"--study {spec}: no study {name!r} under the key studies of {config}; it has {known}"
        )
    try:
        check_config(merged, root / SCHEMA)
        definition = study_definition(name, merged["studies"][name], base=root)
    except (ConfigError, StudyConfigError) as err:
        raise StudySourceError(f"--study {spec}: {err}") from None
    return StudySource(definition, root, config)
