"""Every rule block reads the same way: its directives in one order, and every job rule
(one that runs a script) logs, benchmarks and names its environment.

Read from the rule files' text, as a reader sees them (Snakemake's rule objects do not keep
the order in which directives were written).
"""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RULE_FILES = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]

#: The one order of a rule's directives (docs/architecture.md, "Stages, jobs and artifacts").
ORDER = (
    "name",
    "default_target",
    "input",
    "output",
    "log",
    "benchmark",
    "wildcard_constraints",
    "priority",
    "conda",
    "threads",
    "resources",
    "params",
    "message",
    "script",
)
#: What every rule that runs a job script declares.
JOB_DIRECTIVES = {"output", "log", "benchmark", "conda", "script"}

_RULE = re.compile(r"^(?P<indent>\s*)rule(?:\s+(?P<name>\w+))?\s*:\s*$")
_DIRECTIVE = re.compile(r"^(?P<indent>\s*)(?P<directive>\w+)\s*:")


def rule_blocks(path: Path) -> list[tuple[str, int, list[str]]]:
    """(rule name, line number, directives in written order) of every rule in ``path``."""
    blocks = []
    current = None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if current is not None:
            name, start, outer, directives = current
            directive = _DIRECTIVE.match(line)
            if directive and indent == outer + 4:
                directives.append(directive["directive"])
                continue
            if indent <= outer:
                blocks.append((name or "<generated>", start, directives))
                current = None
        rule = _RULE.match(line)
        if rule:
            current = (rule["name"], number, len(rule["indent"]), [])
    if current is not None:
        blocks.append((current[0] or "<generated>", current[1], current[3]))
    return blocks


BLOCKS = [(path.relative_to(REPO), *block) for path in RULE_FILES for block in rule_blocks(path)]


def test_the_rule_files_are_read():
    """The parser finds the rules Snakemake runs (a broken parser passes every check)."""
    names = {name for _, name, _, _ in BLOCKS}
    assert {"all", "study1_score", "study_strata", "study2_figures", "run_config"} <= names
    assert len(BLOCKS) >= 30
    assert all(directives for *_, directives in BLOCKS)


@pytest.mark.parametrize(
    ("path", "name", "line", "directives"), BLOCKS, ids=[f"{b[0]}:{b[1]}" for b in BLOCKS]
)
def test_directives_in_the_one_order(path, name, line, directives):
    unknown = [d for d in directives if d not in ORDER]
    assert not unknown, f"{path}:{line} rule {name}: {unknown} not in ORDER; add it there"
    positions = [ORDER.index(d) for d in directives]
    assert positions == sorted(positions), (
        f"{path}:{line} rule {name}: directives {directives}; expected the order {ORDER}"
    )
    if "script" in directives:
        missing = JOB_DIRECTIVES - set(directives)
        assert not missing, f"{path}:{line} rule {name}: a job rule without {sorted(missing)}"


def test_a_misordered_rule_is_caught(tmp_path):
    """The check fails on a block written in another order."""
    smk = tmp_path / "bad.smk"
    smk.write_text(
        "rule bad:\n    output:\n        'x'\n    input:\n        'y'\n    script:\n"
        "        's.py'\n\nrule:\n    name:\n        'gen'\n    output:\n        'z'\n"
    )
    (name, _, directives), (generated, _, _) = rule_blocks(smk)
    assert (name, directives, generated) == ("bad", ["output", "input", "script"], "<generated>")
    positions = [ORDER.index(d) for d in directives]
    assert positions != sorted(positions)
