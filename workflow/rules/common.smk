# Helpers shared by every stage: target paths, figure formats, Study 1's design.
import os

from snakemake.io import report as captioned

from dpcounts import __version__ as dpcounts_version
from dpcounts import provenance as prov
from dpcounts.data.age_groups import AGE_GROUPS
from dpcounts.design import calibration_chunk
from dpcounts.studies.study1 import Study1Design

#: The conda environment of every job (`--sdm conda`): Python and the pinned packages of
#: requirements.txt, written from it by tools/write_environment.py (a test checks that they
#: agree); dpcounts comes from src/ through PYTHONPATH (Snakefile). Relative to the rules.
DPCOUNTS_ENV = "../../environment.yml"

# Every job is one single-threaded process (`threads: 1` on the compute rules; the
# Snakefile sets one BLAS/OpenMP thread): a run's parallelism is its number of jobs.
# Among ready jobs the long chains start first (`priority:`): 3 for the truth rates, which
# Study 1's jobs (most of a run) wait for; 2 for the heads of other chains and the longest
# single jobs (a study's strata, the pseudo-posterior's simulate-fit-synthesize, Study 1's
# run bundles or summaries and Appendix C's figures); 1 for the sampling jobs (Study 1's
# scenarios and scores, a study's arms and reference) and the figures and maps that take
# seconds (a study's, Study 1's, the pseudo-posterior's); 0 for the short ones (the data
# maps, the truth map), which fill the cores at the end instead of leaving one long job to
# run alone.


def figure_paths(stem):
    """One path per configured figure format, e.g. figures/x.png and figures/x.pdf."""
    return [f"figures/{stem}.{fmt}" for fmt in config["figure_formats"]]


def caption_path(caption):
    """Path of a report caption: an .rst under workflow/report/, Jinja-templated with the
    run's config and the job's wildcards."""
    return os.path.join(workflow.basedir, "workflow", "report", caption)


def report_figures(stem, caption, category, subcategory=None):
    """figure_paths(stem), the PNG flagged for the HTML report with its own caption."""
    return [
        (
            captioned(
                path,
                caption=caption_path(caption),
                category=category,
                subcategory=subcategory,
            )
            if path.endswith(".png")
            else path
        )
        for path in figure_paths(stem)
    ]


# ---- provenance: each figure rule's params.provenance, which its caption ends with and
# the report's landing page lists (dpcounts.provenance holds every dataset's line) -------
def study1_provenance(appendix=False):
    """The datasets of Study 1's figures (Appendix C's when ``appendix``)."""
    s1 = config["study1"]
    truth = prov.appendix_c(s1) if appendix else prov.truth(config["truth"])
    return prov.lines(truth, prov.POPULATIONS_1980, prov.study1_datasets(s1))


def study_provenance(wildcards):
    """The dataset of a study of the study stage (a params function)."""
    name = wildcards.study
    return prov.lines(prov.study(name, config["studies"][name]))


def pseudo_posterior_provenance(wildcards):
    """The simulated data set of a pseudo-posterior figure (a params function)."""
    name = wildcards.dataset
    return prov.lines(
        prov.pseudo_posterior(name, config["pseudo_posterior"]["datasets"][name])
    )


def run_config():
    """The run's configuration as the report attaches it: every key but job_structure (how
    units are grouped into jobs, which changes no artifact), so that the file, like every
    other artifact, is the same bytes whatever the profile."""
    return prov.MappingInWords(
        {key: value for key, value in config.items() if key != "job_structure"},
        "the configuration, this file",
    )


def all_targets():
    """Everything `make` builds: the figures of each enabled stage."""
    targets = ["results/run_config.yaml"]
    targets += data_figures()
    targets += truth_figures()
    targets += study1_figures()
    targets += study2_figures()
    targets += pseudo_posterior_figures()
    targets += studies_figures()
    return targets


def study1_design():
    """Study 1's design (arms, epsilon grid, chunks), built by the library from the config."""
    return Study1Design.from_config(config["study1"])


def checked_study1_coverage():
    """Study 1's coverage setting (config ``study1.coverage``) checked before any job
    runs: a wrong value stops the run here with a short message naming its key."""
    import sys

    from dpcounts.studies.study1_coverage import Study1Coverage

    s1 = config["study1"]
    if not (s1["enabled"] and s1["coverage"]["enabled"]):
        return
    try:
        Study1Coverage.from_config(s1)
    except ValueError as error:
        sys.exit(f"config error: {error}")


def study1_bundle_paths(scenarios, kind):
    """A run bundle's outputs of one kind (scenario, datasets, scores, county_sums):
    scenario by scenario, then in the design's unit order, as the summary reads them."""
    if kind == "scenario":
        return [
            f"results/{{run}}/scenario_{scenario}.parquet" for scenario in scenarios
        ]
    if kind == "datasets":
        return [
            f"results/{{run}}/datasets/scenario_{scenario}.parquet"
            for scenario in scenarios
        ]
    return [
        f"results/{{run}}/{kind}/{scenario}/{arm}/{chunk}.parquet"
        for scenario in scenarios
        for arm, chunk in study1_design().units
    ]


def study1_unit_inputs(wildcards, kind):
    """Every unit's output of one kind in a run, scenario by scenario (the summary's input)."""
    return [
        f"results/{wildcards.run}/{kind}/{scenario}/{arm}/{chunk}.parquet"
        for scenario in study1_run_scenarios(wildcards.run)
        for arm, chunk in study1_design().units
    ]


# ---- Study 1's age groups: 35-44 (the main study) and Appendix C's older groups ----------
STUDY1_AGE_GROUP = "35-44"
#: Appendix C's groups, oldest last (45-54 ... 85+; 35+ is the urban rule's, not a study).
APPENDIX_C_AGE_GROUPS = [g for g in AGE_GROUPS if g not in (STUDY1_AGE_GROUP, "35+")]


def age_group_slug(age_group):
    """Filesystem-safe name of an age group: 45-54 -> 45_54, 85+ -> 85plus."""
    return age_group.replace("-", "_").replace("+", "plus")


#: The older groups' slugs as a regex alternation (wildcard constraints).
APPENDIX_C_SLUGS = "|".join(age_group_slug(g) for g in APPENDIX_C_AGE_GROUPS)
#: A Study-1 run's folder under results/: study1 (ages 35-44) or study1/appendix_c/<slug>.
STUDY1_RUNS = f"study1(?:/appendix_c/(?:{APPENDIX_C_SLUGS}))?"


def study1_run(age_group):
    """Folder of one age group's Study-1 artifacts under results/ (and logs/)."""
    if age_group == STUDY1_AGE_GROUP:
        return "study1"
    return f"study1/appendix_c/{age_group_slug(age_group)}"


def study1_run_age_group(run):
    """Inverse of study1_run: the age group a results folder holds."""
    for age_group in [STUDY1_AGE_GROUP, *APPENDIX_C_AGE_GROUPS]:
        if study1_run(age_group) == run:
            return age_group
    raise ValueError(f"not a Study 1 folder: {run!r}")


def study1_truth(wildcards):
    """The true rates of the age group of a Study-1 run (an input function)."""
    slug = age_group_slug(study1_run_age_group(wildcards.run))
    return f"results/data/truth_{slug}.parquet"


def study1_run_scenarios(run):
    """Scenarios of a run: study1.scenarios, or study1.appendix_c.scenarios."""
    s1 = config["study1"]
    return s1["scenarios"] if run == "study1" else s1["appendix_c"]["scenarios"]


def study1_rng_labels(run):
    """Extra job-key labels of a run: none for 35-44 (its streams stay as they were),
    ("appendix_c", <age group>) for an older group, so every run has its own streams."""
    age_group = study1_run_age_group(run)
    return [] if age_group == STUDY1_AGE_GROUP else ["appendix_c", age_group]


def appendix_c_runs():
    """Results folders of the configured Appendix C age groups."""
    return [study1_run(g) for g in config["study1"]["appendix_c"]["age_groups"]]


def appendix_c_truth_paths(suffix):
    """The configured older groups' truth files (suffix ".parquet" or "_summary.json"),
    in the order of study1.appendix_c.age_groups: truth_rates_older writes them all."""
    return [
        f"results/data/truth_{age_group_slug(g)}{suffix}"
        for g in config["study1"]["appendix_c"]["age_groups"]
    ]


def appendix_c_rates():
    """The assumed national rate per 100,000 of each configured older group."""
    appendix = config["study1"]["appendix_c"]
    rates = appendix["national_rate_per_100k"]
    return {g: rates[g] for g in appendix["age_groups"]}


# ---- studies on the analyst's own strata (config `studies`) -------------------------------
def checked_studies():
    """Every study's definition, checked before any job runs: a wrong key stops the run
    here with a short message, and so does a wrong column, level or count in the table
    of an enabled study. A table under results/ is made by the workflow (Study 2's): the
    study's first job checks it.
    """
    import sys

    from dpcounts.studies.stage.definition import StudyConfigError, study_definition
    from dpcounts.studies.stage.table import StudyDataError, load_study_table

    studies = {}
    for name, entry in config.get("studies", {}).items():
        try:
            definition = study_definition(name, entry)
            made = definition.table.parts[:1] == ("results",)
            if entry.get("enabled", True) and not made:
                load_study_table(definition)
        except (StudyConfigError, StudyDataError, ValueError) as error:
            sys.exit(f"Error in study {name!r}: {error}")
        except Exception as error:  # never a traceback: say what broke, and where
            sys.exit(
                f"Error in study {name!r}: config key studies.{name}: {error!r} while "
                "checking it; expected an entry as config/README.md describes (please "
                "report this message: the check should have named the key)"
            )
        studies[name] = definition
    return studies


def study_chunk_labels(name, kind):
    """A study's epsilon chunks (kind "e": calibration units) or epsilon x set chunks
    ("e_d": draw units), from its checked definition."""
    d = STUDIES[name]
    return d.calibration_chunks if kind == "e" else d.chunks


def study_calibration_path(wildcards):
    """The calibrations a draw chunk uses (an input function)."""
    echunk = calibration_chunk(wildcards.chunk)
    return f"results/studies/{wildcards.study}/calibrations/{wildcards.arm}/{echunk}.parquet"


def study_chunk_paths(name, folder, kind):
    """A bundled study's outputs in one folder, one per arm and chunk: arm by arm (the
    study's order), each arm's chunks in study_chunk_labels order."""
    return [
        f"results/studies/{{study}}/{folder}/{arm.name}/{chunk}.parquet"
        for arm in STUDIES[name].arms
        for chunk in study_chunk_labels(name, kind)
    ]


def study_entry(wildcards):
    """The config entry of a study (a params function), named in words on the report's
    job pages (results/run_config.yaml holds it)."""
    return prov.MappingInWords(
        config["studies"][wildcards.study],
        f"studies.{wildcards.study} of the configuration (results/run_config.yaml)",
    )


# ---- the end of a run ----------------------------------------------------------------------
def stop_rescheduling():
    """Cancel the scheduler's pending re-evaluations. Snakemake 9.27 starts one timer a
    pass, one `max-jobs-per-timespan` ahead (the profiles set 20 s locally, 10 s on
    SLURM), and Python waits for every timer before it exits: without this, a finished
    run sat idle for up to one timespan. Called when the run has ended (onsuccess,
    onerror), when nothing is left to schedule."""
    import threading

    for thread in threading.enumerate():
        if isinstance(thread, threading.Timer):
            thread.cancel()
