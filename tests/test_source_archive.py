"""`make test` from a source archive (issue #28): a release tarball or a "download ZIP" has
no .git, so the tests that export a pinned commit (`git archive`) skip there, saying why,
and nothing else needs the history. Proved on a copy of this checkout without .git: the
whole suite collects, and those tests skip with their reason instead of failing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from workflow_helpers import REPO

pytestmark = [pytest.mark.slow, pytest.mark.process]

#: The tests that need the git history, by -k expression: they must skip in an archive.
NEEDS_HISTORY = ["tests/test_artifacts_unchanged.py", "tests/test_study2_workflow.py"]
SELECT = "baseline or every_artifact or numbers_are_those"


def source_archive(dest: Path) -> Path:
    """This checkout's files as `git archive` packs them (tracked and new files of the
    working copy, so uncommitted edits count; ignored files and .git left out)."""
    if not (REPO / ".git").exists():
        pytest.skip(f"{REPO} is itself a source archive (no .git): this very run is the proof")
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = REPO / name
        if source.is_file():  # a file deleted in the working copy is not in the archive
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    assert not (dest / ".git").exists()
    return dest


def pytest_in(work: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("DPCOUNTS_TEST_LANE", "PYTHONPATH")}
    env["PYTHONPATH"] = str(work / "src")  # the archive's library, not the installed one
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    return source_archive(tmp_path_factory.mktemp("archive") / "dpcounts-src")


def test_the_whole_suite_collects_from_an_archive(archive):
    result = pytest_in(archive, "--collect-only", "-q")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    last = result.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ tests collected in [\d.]+s", last), result.stdout[-4000:]


def _pinned_commits() -> list[str]:
    """The commits the tests of NEEDS_HISTORY compare with (``BASELINE = "..."`` and
    ``BEFORE = "..."`` in their files), read from the files: each moves on purpose."""
    pattern = re.compile(r'^(?:BASELINE|BEFORE) = "([0-9a-f]+)"', re.M)
    commits = [c for name in NEEDS_HISTORY for c in pattern.findall((REPO / name).read_text())]
    assert len(commits) == 2, commits
    return commits


def test_the_tests_that_need_the_history_skip_there_saying_why(archive):
    result = pytest_in(archive, "-q", "-rs", *NEEDS_HISTORY, "-k", SELECT)
    out = result.stdout
    assert result.returncode == 0, out[-4000:] + result.stderr[-2000:]
    assert "3 skipped" in out and "failed" not in out and "error" not in out, out[-4000:]
    assert out.count("has no .git: a source archive") == 3, out[-4000:]
    for commit in _pinned_commits():  # BASELINE and BEFORE, as the two tests pin them
        assert f"commit {commit}" in out, out[-4000:]


def test_export_skips_without_git_and_fails_in_a_clone_without_the_commit(tmp_path, monkeypatch):
    """Only a checkout with no .git skips; a git checkout that lacks the commit (a shallow
    clone) fails loudly, so CI cannot skip the comparison by accident."""
    import workflow_helpers

    archive = tmp_path / "archive"
    archive.mkdir()
    monkeypatch.setattr(workflow_helpers, "REPO", archive)
    with pytest.raises(pytest.skip.Exception, match="has no .git: a source archive"):
        workflow_helpers.export_commit("277743f", tmp_path / "out")

    clone = tmp_path / "clone"
    subprocess.run(["git", "init", "-q", str(clone)], check=True)
    monkeypatch.setattr(workflow_helpers, "REPO", clone)
    with pytest.raises(pytest.fail.Exception, match="commit 277743f is not available"):
        workflow_helpers.export_commit("277743f", tmp_path / "out")
