"""fast_exit: a finished job ends at once, with what a normal exit would have flushed,
closed and cleaned; an error before it still fails the job."""

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = """
import atexit, logging, sys, tempfile
from pathlib import Path
from dpcounts.fast_exit import fast_exit

folder = Path(sys.argv[1])
logging.basicConfig(filename=folder / "job.log", level=logging.INFO, force=True)
logging.info("written")
scratch = tempfile.TemporaryDirectory()  # removed by its weakref.finalize at exit
(folder / "scratch").write_text(scratch.name)
atexit.register(lambda: (folder / "atexit").write_text("ran"))
sys.stdout.write("unflushed")
if sys.argv[2] == "fail":
    raise RuntimeError("the job failed")
fast_exit()
raise AssertionError("fast_exit returned")
"""


def run(tmp_path, mode):
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT), str(tmp_path), mode],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.process
def test_fast_exit_flushes_runs_exit_handlers_and_cleans_up(tmp_path):
    done = run(tmp_path, "ok")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "unflushed" and done.stderr == ""
    assert (tmp_path / "job.log").read_text().strip() == "INFO:root:written"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert not Path((tmp_path / "scratch").read_text()).exists()


@pytest.mark.process
def test_an_error_before_fast_exit_fails_the_job_as_usual(tmp_path):
    failed = run(tmp_path, "fail")
    assert failed.returncode == 1
    assert "RuntimeError: the job failed" in failed.stderr
    assert (tmp_path / "atexit").read_text() == "ran"


def test_every_workflow_script_ends_with_fast_exit():
    scripts = sorted((Path(__file__).parents[1] / "workflow" / "scripts").glob("*.py"))
    assert scripts
    for script in scripts:
        last = ast.parse(script.read_text()).body[-1]
        called = getattr(getattr(last, "value", None), "func", None)
        assert getattr(called, "id", None) == "fast_exit", f"{script.name} does not end with it"
