"""Snakemake logger plugin ``dpcounts`` (``snakemake --logger dpcounts``; the laptop profile
``workflow/profiles/default``, which ``make`` uses, sets it).

On the terminal (stderr): one line per finished job, ``[done/total] rule (wildcards)``;
every warning and error in full, as Snakemake formats them (a failed job's block, with
its log under ``--show-failed-logs``); and a closing line with the number of jobs run and
the path of the full log. Everything Snakemake logs (each job's inputs, outputs, reason
and resources, the job counts, the report's files) goes to that full log,
``logs/snakemake/<start time>.log``, formatted as Snakemake's own terminal output would
be. A dry run (``-n``) prints as Snakemake does, since its plan is what was asked for.

Snakemake finds the plugin by its package name (``snakemake_logger_plugin_*`` on the
import path): ``pip install -e .`` puts ``src/`` there.
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
from pathlib import Path

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent

#: Where the full log of each run goes, relative to the working directory.
LOG_DIR = Path("logs") / "snakemake"

_ERRORS = {LogEvent.JOB_ERROR, LogEvent.GROUP_ERROR, LogEvent.ERROR}


def job_label(record: logging.LogRecord) -> str:
    """``rule (key=value, ...)`` of a JOB_INFO record."""
    wildcards = getattr(record, "wildcards", None) or {}
    inner = ", ".join(f"{key}={value}" for key, value in wildcards.items())
    name = getattr(record, "rule_name", "?")
    return f"{name} ({inner})" if inner else name


class LogHandler(LogHandlerBase):
    """One line per finished job on stderr; the full log in ``logs/snakemake/``."""

    def __post_init__(self) -> None:
        from snakemake.logging import DefaultFilter, DefaultFormatter

        settings = self.common_settings
        self.stream = sys.stdout if settings.stdout else sys.stderr
        self.dryrun = bool(settings.dryrun)
        quiet = set(settings.quiet or ())
        # the full log: what Snakemake's own terminal handler would print (no --quiet)
        self.full_filter = DefaultFilter(set(), settings.debug_dag, settings.verbose,
                                         settings.dryrun, settings.printshellcmds)  # fmt: skip
        self.full_format = DefaultFormatter(set(), settings.show_failed_logs)
        # the terminal's errors and warnings, and a dry run's plan, as Snakemake prints them
        self.terminal_filter = DefaultFilter(quiet, settings.debug_dag, settings.verbose,
                                             settings.dryrun, settings.printshellcmds)  # fmt: skip
        self.terminal_format = DefaultFormatter(quiet, settings.show_failed_logs)
        self.silent = any(str(q).lower().endswith("all") for q in quiet) and not self.dryrun
        self.jobs: dict[int, str] = {}
        self.last_finished: str | None = None
        self.finished = 0
        self.failed = False
        self.started = datetime.datetime.now()
        self.path: Path | None = None
        self.file = None

    # ---- the plugin's declarations -------------------------------------------------------
    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False  # the full log is ours, beside Snakemake's .snakemake/log/

    @property
    def has_filter(self) -> bool:
        return True

    @property
    def has_formatter(self) -> bool:
        return True

    @property
    def needs_rulegraph(self) -> bool:
        return False

    # ---- records -------------------------------------------------------------------------
    def _print(self, text: str) -> None:
        if text:
            print(text, file=self.stream, flush=True)

    def _to_file(self, record: logging.LogRecord) -> None:
        if self.dryrun or not self.full_filter.filter(record):
            return
        if self.file is None:
            LOG_DIR.mkdir(parents=True, exist_ok=True)
            stamp = self.started.strftime("%Y-%m-%dT%H%M%S.%f")
            self.path = LOG_DIR / f"{stamp}.log"
            self.file = open(self.path, "a", encoding="utf-8")
        self.file.write(self.full_format.format(record) + "\n")
        self.file.flush()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._to_file(record)
            event = getattr(record, "event", None)
            if event == LogEvent.JOB_INFO:
                self.jobs[record.jobid] = job_label(record)
            elif event == LogEvent.JOB_FINISHED:
                self.last_finished = self.jobs.get(record.job_id, f"job {record.job_id}")
            error = event in _ERRORS or record.levelno >= logging.ERROR
            self.failed |= error
            if self.dryrun:
                if self.terminal_filter.filter(record):
                    self._print(self.terminal_format.format(record))
            elif error:  # always shown, even under --quiet all
                self._print(self.terminal_format.format(record))
            elif self.silent:
                return
            elif event == LogEvent.PROGRESS:
                self.finished = record.done
                width = len(str(record.total))
                label = self.last_finished or ""
                self._print(f"[{record.done:>{width}}/{record.total}] {label}")
            elif record.levelno >= logging.WARNING and self.terminal_filter.filter(record):
                self._print(self.terminal_format.format(record))
        except Exception:  # a log line must never stop the run
            self.handleError(record)

    def close(self) -> None:
        # Snakemake closes its handlers when it stops, and logging again at exit: once.
        closing, self.closing_done = not getattr(self, "closing_done", False), True
        try:
            if closing and not self.dryrun and not self.silent and self.path is not None:
                path = os.path.relpath(self.path)
                done = f"{self.finished} jobs finished" if self.finished else "no job run"
                state = "stopped on an error" if self.failed else done
                self._print(f"snakemake: {state}; full log: {path}")
            if self.file is not None:
                self.file.close()
                self.file = None
        finally:
            super().close()
