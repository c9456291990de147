"""The laptop profile's Snakemake logger (src/snakemake_logger_plugin_dpcounts), fed the
records Snakemake emits: one line per finished job, warnings and errors in full, the
whole log in logs/snakemake/, one closing line."""

from __future__ import annotations

import io
import logging
from types import SimpleNamespace

from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.registry import LoggerPluginRegistry

from snakemake_logger_plugin_dpcounts import LogHandler


def settings(**overrides):
    values = dict(printshellcmds=False, nocolor=True, quiet=None, debug_dag=False,
                  verbose=False, show_failed_logs=True, stdout=False, dryrun=False)  # fmt: skip
    return SimpleNamespace(**{**values, **overrides})


def record(msg, level=logging.INFO, **extra):
    rec = logging.LogRecord("snakemake", level, __file__, 1, msg, None, None)
    rec.__dict__.update(extra)
    return rec


def job_info(jobid, rule, **wildcards):
    return record(f" Rule: {rule}, Jobid: {jobid}", event=LogEvent.JOB_INFO, jobid=jobid,
                  rule_msg=None, rule_name=rule, local=False, input=["a.parquet"],
                  output=["b.parquet"], log=[], benchmark=None, wildcards=wildcards,
                  reason="Missing output files", resources={}, priority=0, threads=1,
                  indent=False, is_checkpoint=False, printshellcmd=True,
                  is_handover=False, shellcmd=None)  # fmt: skip


def test_snakemake_finds_the_plugin():
    assert "dpcounts" in LoggerPluginRegistry().plugins


def test_one_line_per_job_warnings_errors_and_the_full_log(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    handler = LogHandler(settings(), None)
    handler.stream = out = io.StringIO()
    for rec in [
        record("Building DAG of jobs..."),
        job_info(3, "study_summary", study="pennlc"),
        record("Finished jobid: 3", event=LogEvent.JOB_FINISHED, job_id=3),
        record(None, event=LogEvent.PROGRESS, done=1, total=12),
        record("a warning", level=logging.WARNING),
        job_info(4, "all"),
        record("Finished jobid: 4", event=LogEvent.JOB_FINISHED, job_id=4),
        record(None, event=LogEvent.PROGRESS, done=2, total=12),
        record("Exiting because a job execution failed.", level=logging.ERROR),
    ]:
        handler.handle(rec)
    handler.close()
    handler.close()  # Snakemake stops its handlers, and logging closes them again at exit
    lines = out.getvalue().splitlines()
    [log] = (tmp_path / "logs" / "snakemake").glob("*.log")
    assert lines == [
        "[ 1/12] study_summary (study=pennlc)",
        "a warning",
        "[ 2/12] all",
        "Exiting because a job execution failed.",
        f"snakemake: stopped on an error; full log: logs/snakemake/{log.name}",
    ]
    text = log.read_text()
    assert "Building DAG of jobs..." in text and "    input: a.parquet" in text
    assert "rule study_summary:" in text and "1 of 12 steps (8%) done" in text


def test_quiet_all_prints_errors_only_and_a_dry_run_prints_the_plan(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    quiet = LogHandler(settings(quiet={"all"}), None)
    quiet.stream = out = io.StringIO()
    quiet.handle(record("Report created."))
    quiet.handle(record("an error", level=logging.ERROR))
    quiet.close()
    assert out.getvalue().splitlines() == ["an error"]
    logs = list((tmp_path / "logs" / "snakemake").glob("*.log"))  # the full log is kept
    assert len(logs) == 1 and "Report created." in logs[0].read_text()

    dry = LogHandler(settings(dryrun=True), None)
    dry.stream = out = io.StringIO()
    dry.handle(job_info(1, "study2_toy"))
    dry.close()
    assert "rule study2_toy:" in out.getvalue() and "    input: a.parquet" in out.getvalue()
    assert list((tmp_path / "logs" / "snakemake").glob("*.log")) == logs  # none for a dry run
