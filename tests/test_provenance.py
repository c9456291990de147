"""dpcounts.provenance: one line per dataset (real, modelled, simulated, illustrative), and
every figure caption of the report shows its figure and ends with its datasets' lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from workflow_helpers import schema_defaults

from dpcounts import provenance

REPO = Path(__file__).resolve().parents[1]
REPORT = REPO / "workflow" / "report"
RULES = Path(__file__).resolve().parents[1] / "workflow" / "rules"


def test_the_shipped_datasets_have_their_kind():
    config = schema_defaults()
    assert provenance.truth(config["truth"]).kind == "modelled"
    wonder = provenance.truth({"source": "wonder", "wonder": {"path": "w.txt"}})
    assert wonder.kind == "real" and "``w.txt``" in wonder.source
    assert provenance.appendix_c(config["study1"]).kind == "modelled"
    assert provenance.study1_datasets(config["study1"]).kind == "simulated"
    for name, entry in config["pseudo_posterior"]["datasets"].items():
        line = provenance.pseudo_posterior(name, entry).line()
        assert line.startswith(f"pseudo-posterior data set ``{name}``: **simulated**, 1,000")
    assert provenance.TOY.kind == "illustrative" and provenance.PENNLC.kind == "real"


def test_a_study_takes_its_tables_provenance_or_its_own():
    homicides = {"table": "data/ncovr_homicides.csv", "rows": {"decade": 1980}}
    line = provenance.study("homicide_1980", homicides).line()
    assert line.startswith("study ``homicide_1980``: **real**, NCOVR county homicides")
    assert "(rows decade = 1980)" in line
    standin = provenance.study("standin", {"table": "results/study2/standin/table.parquet"})
    assert standin.kind == "modelled"
    stated = {"table": "x.csv", "provenance": {"kind": "simulated", "source": "my model"}}
    assert provenance.study("mine", stated).line() == "study ``mine``: **simulated**, my model"
    unknown = provenance.study("mine", {"table": "x.csv"})
    assert unknown.kind == provenance.NOT_STATED and "studies.mine.provenance" in unknown.source
    with pytest.raises(ValueError, match="kind"):
        provenance.Provenance("d", "guessed", "s")


def test_lines_keep_each_dataset_once_in_order():
    a, b = provenance.PENNLC, provenance.TOY
    assert provenance.lines(a, b, a) == [a.line(), b.line()]


def test_every_figure_caption_shows_its_figure_and_ends_with_its_data():
    captions = {p.name for p in REPORT.glob("*.rst")} - {"workflow.rst", "run_config.rst"}
    assert len(captions) == 29
    for name in captions:
        text = (REPORT / name).read_text()
        # the figure from beside the report, else the report's embedded copy
        assert '<img src="{{ png }}"' in text, name
        assert "this.src = results['{{ png }}'].data_uri" in text, name
        assert text.rstrip().endswith('**Data.** {{ snakemake.params.provenance | join("; ") }}.')


def test_every_rule_with_a_report_figure_states_its_provenance():
    for path in RULES.glob("*.smk"):
        for rule in re.split(r"\n(?=\s*rule )", path.read_text())[1:]:
            if "report_figures(" in rule or "**S2_FIGURE_OUTPUTS" in rule:
                assert "provenance=" in rule, (path.name, rule[:80])


@pytest.mark.process  # runs git
def test_code_version_names_the_commit_or_says_there_is_none(tmp_path):
    """results/run_config.yaml and the report name the code that ran: the version and the
    commit of a git checkout (its 12-digit prefix, as git itself gives it), or no commit."""
    import shutil
    import subprocess

    from dpcounts import __version__
    from dpcounts.provenance import code_version

    assert (
        code_version(tmp_path, __version__)
        == f"dpcounts {__version__}, not a git checkout: no commit to name"
    )
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs a git checkout of the project and git")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    said = code_version(REPO, __version__)
    assert said.startswith(f"dpcounts {__version__}, commit {head[:12]}"), said
