"""Code and docs cite what a reader of the repository can open: the papers by author, year
and section, and the repository's own files; never the team's notes outside it."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Names of documents that live outside the repository (the team's design notes and its
#: numbered copies of the papers).
OUTSIDE = re.compile(r"DESIGN\.md|\bseed 0\d\d\b|\.\./shared/(?!seeds/)")
SOURCES = ["src", "workflow", "docs", "config", "benchmarks", "tools", "data/build", "tests"]
SUFFIXES = {".py", ".smk", ".md", ".rst", ".yaml", ".yml"}


def cited_outside(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if OUTSIDE.search(line)]


def test_the_pattern_finds_citations_of_documents_outside_the_repository():
    assert cited_outside("see DESIGN.md sec 4\nfine: Quick (2022), Section 2.3")
    assert cited_outside("(seed 001 eq 4)")
    assert not cited_outside("Quick (2021), eq (15); docs/privacy.md, Part 2; seed = 7")


def test_no_file_cites_a_document_outside_the_repository():
    offenders = [f"{name}: {line}" for name in ("README.md", "CHANGELOG.md")
                 for line in cited_outside((REPO / name).read_text())]  # fmt: skip
    for folder in SOURCES:
        for path in sorted((REPO / folder).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and path != Path(__file__):
                offenders += [f"{path.relative_to(REPO)}: {line}"
                              for line in cited_outside(path.read_text())]  # fmt: skip
    assert not offenders, "\n".join(offenders)
