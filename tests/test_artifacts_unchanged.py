"""Every artifact of the tiny run unchanged (issue #16): the project as it was at BASELINE,
run from its own source tree, against today's tree, both with the tiny config and the
laptop profile on 2 cores, compared file by file by tools/compare_runs.py (tables by
content, figures by bytes)."""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from workflow_helpers import REPO, TEST_CONFIG, copy_project, export_commit, snakemake

pytestmark = [pytest.mark.slow, pytest.mark.process]

#: The commit whose tiny-run artifacts today's must equal, file for file. A refactoring
#: leaves it alone. When a change of numbers or figures is intended, move it to the commit
#: that makes the change and say so (which artifacts change, and why) in CHANGELOG.md.
BASELINE = "9137411"
#: Moved from dc585ae by issues #51 and #54 (merged in 9137411): a study's synthetic tables are
#: its sets (the metrics' and reference's set column, the guides' sets, sets_needed and
#: more_sets, run_config.yaml's studies.<name>.sets and sets_per_job, the figures' "over the
#: sets"); coverage scores age-adjusted rates and disparities (pennlc's and homicide_1980's
#: coverage.parquet gain rows, coverage.releases in run_config.yaml and the guide.json
#: fingerprints at measures' version 3), its rows join guide.csv (coverage.csv is gone) and
#: its figures draw a column per quantity; the posterior's prior beyond a truncated
#: release's bounds holds the design's tail (the truncated posterior rows of coverage.parquet);
#: Study 1 measures coverage (new results/study1/coverage.parquet, coverage.csv and
#: figures/study1/coverage.png). Every draw, metric value and summary as at dc585ae.
#: Before, moved from 6d77774 by issue #54, item 2 (merged in dc585ae, after issue #53's move
#: to 6d77774 beside it): pennlc and homicide_1980 measure coverage (their new coverage.parquet,
#: coverage.csv and coverage figures; the tiny config enables it for both), and run_config.yaml
#: and the guide.json fingerprints hold the new studies.<name>.coverage key; every other table
#: and figure as at 6d77774. Before, from 1f852e6 by issue #53, items 2 and 3:
#: the metrics of pennlc and homicide_1980 gain
#: the attacker who reads the hyperparameters (attack:posterior_exact,
#: attack:posterior_within_one: the posterior mode given a release's sets), their summaries its
#: rows (with its no-set guess as prior), the attack figures draw it, and each study gains
#: figures/studies/<study>/suppressed.png, the map of the suppressed table; every other column,
#: row and file unchanged. Before, from 476f82c by issue #53, item 2: the metrics and summaries
#: of pennlc and homicide_1980 gain the mode over a release's sets (attack:mode_exact,
#: attack:mode_within_one), the attack figures draw it, and run_config.yaml and the guide.json
#: fingerprints hold suppression.sets. Before, from 1509e53 by issue #53: the config's
#: suppression key is an object with enabled (results/run_config.yaml). Before, from 73e10c5 by
#: issue #53, items 2 and 3: the metrics, reference and summary tables of pennlc and
#: homicide_1980 gain the attacker's columns (attack:exact, attack:within_one), their new attack
#: figures, and the measures figures' first sentence (how many measures suppression keeps); every
#: measure's value unchanged. Before, from a3cf1d2 by issue #53: pennlc and homicide_1980 have a
#: suppression arm (their new suppression.json; their guide.csv's suppression rows and the
#: suppression and epsilon_vs_suppression columns, and every study's guide.csv the two columns;
#: the DP rows' reasons end with the comparison; the guide.json fingerprints and run_config.yaml
#: hold the new key; the measures figures draw the line and the sentences); every draw, summary
#: and metric unchanged, as is every release (issue #51, item 2, the registry of mechanisms,
#: changed no artifact: its run against a3cf1d2 differed only by the suppression arm). Before,
#: from c711623 by issue #52, item 2: every study measures the strata's relative error and each
#: key's margin (new columns of the metrics and reference tables, new rows of the summaries and
#: guides, the guide.json fingerprints at measures' version 2, the schema's new
#: studies.<name>.margins in run_config.yaml), the guide no longer asks for more datasets at an
#: epsilon no release allows (homicide_1980's New Mexico / New York), and the studies' measures
#: and guide figures draw the new rows. Before, from 9a150eb by issue #52, item 5: a study with
#: age adjustment titles its rank correlation "of the age-adjusted area rates" (pennlc's guide
#: and measures figures, which print it; every table unchanged). Before, from c81f900 by issue
#: #52, item 1: ratios judged by what is kept of the departure from parity (|log(value / target)|
#: <= tolerance x max(|log truth|, log 1.1), never nearer the prior's value than the truth): the
#: guide.csv rows of the disparities change (verdict, verdict_text, epsilon, epsilon_privacy,
#: within_low, within_high, datasets_needed, reason) and so do the figures that draw them (the
#: studies' measures and guide figures: verdicts and the tolerance's shading); every other row,
#: table and the summaries are unchanged. Before, from 4b2fc6f by issue #51, item 1 (the rename):
#: BASELINE's code recorded its imports under the old package's name, which today's test cannot
#: ask for; the run of that commit's tree (the renamed project) gave every table of 4b2fc6f's
#: tiny run unchanged, its figures but the pseudo-posterior ones (issue #36, on purpose) byte for
#: byte, and results/run_config.yaml with one key added on purpose (issue #50: the stand-in's
#: prior.source_note). Before, from 4966b9a by issue #36: Study 1's sanitised-prior arm drew
#: every dataset's prior noise in one call, then every dataset's rates in one call (the same
#: distributions, another order of the draws).
#: Names changed on purpose since BASELINE, as compare_runs' --rename OLD=NEW.
RENAMES: dict[str, str] = {}
#: Config keys added on purpose since BASELINE (compare_runs' --added), found in
#: results/run_config.yaml.
ADDED: tuple[str, ...] = ()
#: Files added on purpose since BASELINE (only in today's run; fnmatch patterns). Every
#: file of BASELINE's run must still be there and the same.
NEW_FILES: tuple[str, ...] = (
    "results/studies/*/guide.json",  # what each guide judged (issue #52, item 3)
)
#: Figures changed on purpose since BASELINE (fnmatch patterns): compared as present in
#: both runs and of the same kind, not byte for byte; every table, JSON and YAML file must
#: still equal BASELINE's. The next change of figures moves BASELINE to a commit on main
#: and empties this list.
CHANGED_FIGURES: tuple[str, ...] = ()
#: Tables changed on purpose since BASELINE, column by column: {fnmatch pattern: {column:
#: what may change}}. A column "new" is only in today's table; "reworded" may hold other
#: text; a dict {old: (new, ...)} lets a cell of the old value become one of the new values
#: and no other cell change. Every other column must equal BASELINE's, value for value,
#: in the same order.
CHANGED_TABLES: dict[str, dict[str, object]] = {
    # a ratio's distance named in words before its formula (the guide's reasons)
    "results/studies/*/guide.csv": {"reason": "reworded"},
}

RUN = ["--profile", "workflow/profiles/default", "--cores", "2", "--configfile", TEST_CONFIG]

_spec = importlib.util.spec_from_file_location("compare_runs", REPO / "tools" / "compare_runs.py")
compare_runs = sys.modules.setdefault("compare_runs", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(compare_runs)

#: sitecustomize for the runs' Python processes (the snakemake process that parses the
#: Snakefile, and every job): at exit, it writes the file of every dpcounts module it
#: imported to $DPCOUNTS_IMPORT_LOG/<pid>.json.
IMPORT_RECORDER = """\
import atexit, json, os, sys

def _record():
    names = [n for n in list(sys.modules) if n == "dpcounts" or n.startswith("dpcounts.")]
    files = sorted({str(getattr(sys.modules[n], "__file__", None)) for n in names})
    if files:
        path = os.path.join(os.environ["DPCOUNTS_IMPORT_LOG"], f"{os.getpid()}.json")
        with open(path, "w") as handle:
            json.dump({"argv": sys.argv, "files": files}, handle)

atexit.register(_record)
"""


def _new_on_purpose(path: str) -> bool:
    return any(fnmatch.fnmatch(path, pattern) for pattern in NEW_FILES)


def _changed_on_purpose(outcome) -> bool:
    """A figure of CHANGED_FIGURES that differs (present in both runs)."""
    return (outcome.status == "differs" and outcome.kind in ("png", "pdf")
            and any(fnmatch.fnmatch(outcome.path, p) for p in CHANGED_FIGURES))  # fmt: skip


def table_changes(path: str, before: Path, after: Path) -> list[str]:
    """What differs in the table ``path`` of two runs beyond :data:`CHANGED_TABLES` allows
    (empty: only what changed on purpose; a path it does not list: not on purpose)."""
    import pandas as pd

    rules = next((r for p, r in CHANGED_TABLES.items() if fnmatch.fnmatch(path, p)), None)
    if rules is None:
        return [f"{path} is not in CHANGED_TABLES"]
    old, new = pd.read_csv(before / path), pd.read_csv(after / path)
    problems = []
    for column, rule in rules.items():
        if rule == "new" and column in old.columns:
            problems.append(f"{column!r} is listed as new but BASELINE has it")
        if rule != "new" and column not in new.columns:
            problems.append(f"{column!r} is gone")
        if isinstance(rule, dict) and column in old.columns and len(old) == len(new):
            for k, (was, now) in enumerate(zip(old[column], new[column], strict=True)):
                if was != now and now not in rule.get(was, ()):
                    problems.append(f"{column!r} row {k}: {was!r} -> {now!r}")
    unlisted = [c for c in new.columns if c not in old.columns and c not in rules]
    if unlisted:
        problems.append(f"columns new but not listed: {unlisted}")
    keep = [c for c in old.columns if c not in rules]
    return problems + compare_runs.frame_differences(old[keep], new[[c for c in new.columns
                                                                      if c in keep]])  # fmt: skip


def run_tiny(work: Path, src: Path) -> Path:
    """The tiny config in ``work`` with ``src`` first on every process's path (the
    Snakefile's parse-time import of dpcounts runs in the parent process, so the path must
    be set there too), recording where each process found dpcounts."""
    hook, log = work / ".import_hook", work / ".import_log"
    hook.mkdir()
    log.mkdir()
    (hook / "sitecustomize.py").write_text(IMPORT_RECORDER)
    env = {"PYTHONPATH": f"{src}:{hook}", "DPCOUNTS_IMPORT_LOG": str(log)}
    result = snakemake(work, *RUN, env=env, timeout=1800)
    assert result.returncode == 0, result.stderr[-4000:]
    return work


def imports(work: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((work / ".import_log").glob("*.json"))]


@pytest.fixture(scope="module")
def baseline_run(tmp_path_factory):
    """The tiny run of the project at BASELINE: its Snakefile, rules, scripts and library
    (skipped in a source archive without .git; fails in a shallow clone)."""
    work = export_commit(BASELINE, tmp_path_factory.mktemp("artifacts") / "baseline")
    return run_tiny(work, work / "src")


@pytest.fixture(scope="module")
def today_run(tmp_path_factory):
    """The tiny run of today's tree (its working copy, committed or not). No other test
    runs the tiny config through the laptop profile on 2 cores, so there is none to reuse."""
    work = copy_project(tmp_path_factory.mktemp("artifacts") / "today")
    return run_tiny(work, REPO / "src")


@pytest.mark.parametrize("which", ["baseline", "today"])
def test_each_run_imports_its_own_library(which, request):
    """Every process of a run that imported dpcounts (the snakemake process parsing the
    Snakefile and every job) found it in that run's own src/, not in the installed one."""
    work = request.getfixturevalue(f"{which}_run")
    src = (work / "src" if which == "baseline" else REPO / "src").resolve()
    records = imports(work)
    parents = [r for r in records if Path(r["argv"][0]).name == "snakemake"]
    assert parents, f"no snakemake process recorded its imports: {records[:3]}"
    assert len(records) > len(parents), "no job recorded its imports"
    for record in records:
        elsewhere = [f for f in record["files"] if not Path(f).resolve().is_relative_to(src)]
        assert not elsewhere, f"{record['argv'][:2]} imported dpcounts from {elsewhere[:3]}"


def test_every_artifact_of_the_tiny_run_is_unchanged(baseline_run, today_run):
    """Same files under results/ and figures/, the same tables, JSON and YAML by content,
    the same figures byte for byte."""
    outcomes = compare_runs.compare_runs(baseline_run, today_run, RENAMES, ADDED)
    table = compare_runs.report(outcomes, baseline_run, today_run)
    compared = [o for o in outcomes if o.status != "excluded"]
    assert any(o.kind == "parquet" for o in compared), table
    assert any(o.kind == "png" for o in compared), table
    new = [o for o in compared if o.status == "extra" and _new_on_purpose(o.path)]
    on_purpose = [o for o in compared if _changed_on_purpose(o)]
    tables = [o for o in compared if o.status == "differs" and o.kind == "csv"
              and not table_changes(o.path, baseline_run, today_run)]  # fmt: skip
    changed = [o for o in compared if o.status != "same" and o not in new + on_purpose + tables]
    assert all(o.path.startswith("figures/") for o in on_purpose), table
    why = [f"{o.path}: {'; '.join(table_changes(o.path, baseline_run, today_run))}"
           for o in changed if o.status == "differs" and o.kind == "csv"]  # fmt: skip
    assert not changed, (
        f"{len(changed)} artifacts of the tiny run differ from those of commit {BASELINE}:\n"
        f"{table}\n"
        + "".join(f"{line}\n" for line in why)
        + "A refactoring changes no artifact. If the change is intended, move "
        "BASELINE (tests/test_artifacts_unchanged.py) and say so in CHANGELOG.md; a column "
        "renamed on purpose goes into RENAMES, a config key added on purpose into ADDED."
    )
