"""Where a release's seconds and bytes go: ``dpcounts synthesize`` in this process, each phase
timed and its peak resident memory measured.

Run from the repository root::

    .venv/bin/python benchmarks/release_phases.py national_1M.parquet [--mechanism pg]
        [--sets 10] [--keys ...]

The input is a national table of ``benchmarks/national_table.py`` (``--keys`` defaults to
its keys, with ``year`` first when the file has that column); the release runs on the
default path (the input's ``prior_rate`` column, its count-fit check, default limits).
Each phase is a function of the release wrapped here: its wall time and the peak of the
process's resident memory while it ran (Linux's high-water mark, reset when a phase
begins; a phase's peak includes what earlier phases still hold). Nested phases are
indented. Prints a table; ``--json`` writes the rows too.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path

#: (module, attribute, label): the functions timed, as the release looks them up.
PHASES = [
    ("dpcounts.release.plan", "load_strata", "plan: load_strata"),
    ("dpcounts.release.inputs", "read_table", "plan: read_table"),
    ("dpcounts.release.inputs", "values_only", "plan: values_only"),
    ("dpcounts.release.inputs", "round_counts", "plan: round_counts"),
    ("dpcounts.release.inputs", "validate_strata", "plan: validate_strata"),
    ("dpcounts.release.inputs", "key_order", "plan: key_order (sort)"),
    ("dpcounts.release.prior_source", "grouping", "plan: prior's grouping"),
    ("dpcounts.release.design.Design", "calibrate", "plan: calibrate"),
    ("dpcounts.release.limits", "estimate_cost", "plan: forecast"),
    ("dpcounts.release.design.Design", "check_tv_target", "plan: rounding floor"),
    ("dpcounts.release.plan", "_checked_calibration", "plan: calibration + limits"),
    ("dpcounts.release.sequence", "check_prior_fit", "charge: count-fit check"),
    ("dpcounts.release.inputs.Strata", "identities", "table's ids (side by side)"),
    ("dpcounts.release.sequence._Releasing", "charge", "charge: ledger"),
    ("dpcounts.ledger.index", "fingerprint", "charge: overlap fingerprint"),
    ("dpcounts.ledger.Ledger", "spend", "charge: Ledger.spend"),
    ("dpcounts.release.sequence._Releasing", "draw", "draw"),
    ("dpcounts.sampling.release_mode", "release_sampler", "draw: build sampler"),
    ("dpcounts.sampling.release_mode.ReleaseSampler", "_release_log_tilt", "draw: tilt"),
    ("dpcounts.sampling.tree_build", "build_leaves", "draw: build leaves"),
    ("dpcounts.sampling.release_mode.ReleaseSampler", "_store_flat", "draw: store tree"),
    ("dpcounts.sampling.release_mode.ReleaseSampler", "draw", "draw: one set"),
    ("dpcounts.release.sequence._Releasing", "write", "write"),
    ("dpcounts.release.folder", "write_public_parts", "write: synthetic parts"),
    ("dpcounts.release.folder", "write_public_table", "write: table"),
    ("dpcounts.release.sequence._Releasing", "report", "report"),
    ("dpcounts.release.report.summary", "write_summary", "report: summary"),
    ("dpcounts.release.report.utility", "write_utility", "report: utility"),
    ("dpcounts.release.sequence", "finish_manifest", "report: manifest"),
    ("dpcounts.release.folder", "install", "report: install"),
]

ROWS: list[dict] = []
_STACK: list[list[float]] = []  # per open phase: the running peak of its nested phases


def _hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _reset() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def _wrap(function, label):
    @functools.wraps(function)
    def timed(*args, **kwargs):
        if _STACK:  # the enclosing phase's peak so far, before the mark is reset
            _STACK[-1][0] = max(_STACK[-1][0], _hwm())
        depth = len(_STACK)
        _STACK.append([0.0])
        row = {"phase": label, "depth": depth, "rss_before_gib": _rss() / 2**30}
        ROWS.append(row)
        _reset()
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            row["seconds"] = time.perf_counter() - start
            peak = max(_STACK.pop()[0], _hwm())
            row["peak_gib"] = peak / 2**30
            row["rss_after_gib"] = _rss() / 2**30
            if _STACK:
                _STACK[-1][0] = max(_STACK[-1][0], peak)

    return timed


def _merge_repeats() -> None:
    """One row for a phase called again and again in a row (the leaves, walked in chunks):
    its seconds summed, its peak the largest, its calls counted."""
    merged: list[dict] = []
    for row in ROWS:
        last = merged[-1] if merged else None
        if last and (last["phase"], last["depth"]) == (row["phase"], row["depth"]):
            last["seconds"] += row["seconds"]
            last["peak_gib"] = max(last["peak_gib"], row["peak_gib"])
            last["rss_after_gib"] = row.get("rss_after_gib")
            last["calls"] = last.get("calls", 1) + 1
        else:
            merged.append(dict(row))
    for row in merged:
        if row.get("calls", 1) > 1:
            row["phase"] += f" ({row['calls']} calls)"
    ROWS[:] = merged


def _patch() -> None:
    for where, name, label in PHASES:
        parts = where.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                owner = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attribute in parts[cut:]:
                owner = getattr(owner, attribute)
            break
        if hasattr(owner, name):
            setattr(owner, name, _wrap(getattr(owner, name), label))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input", type=Path)
    parser.add_argument("--mechanism", default="truncated")
    parser.add_argument("--sets", type=int, default=1)
    parser.add_argument("--keys", nargs="+")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--max-minutes", help="passed on (default: the release's default)")
    args = parser.parse_args()
    import os

    import pyarrow.parquet as pq

    columns = pq.read_schema(args.input).names
    keys = args.keys or [k for k in ("year", "county", "age", "race", "sex", "hispanic")
                         if k in columns]  # fmt: skip
    _patch()
    from dpcounts import cli

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_DATA_HOME"] = str(Path(tmp) / "home")
        os.environ["DPCOUNTS_LEDGER"] = str(Path(tmp) / "ledger")
        argv = [
            "synthesize", "--input", str(args.input), "--keys", *keys, "--strata", "input",
            "--prior-rate-column", "prior_rate", "--mechanism", args.mechanism,
            "--prior-source", "the benchmark table's national rates by age (synthetic)",
            "--epsilon", "1", "--sets", str(args.sets), "--dataset", "profile",
            "--out", str(Path(tmp) / "out"), "--private-dir", str(Path(tmp) / "private"),
            "--quiet", "--force",
        ]  # fmt: skip
        if args.max_minutes is not None:
            argv += ["--max-minutes", args.max_minutes]
        _reset()
        start = time.perf_counter()
        code = cli.main(argv)
        ROWS.append({"phase": "whole (in process)", "depth": 0, "seconds":
                     time.perf_counter() - start, "peak_gib": _hwm() / 2**30})  # fmt: skip
    _merge_repeats()
    print(f"{args.input.name}: {args.mechanism}, {args.sets} set(s), exit {code}\n")
    print("| phase | seconds | peak GiB | RSS after GiB |\n|---|---|---|---|")
    for row in ROWS:
        after = row.get("rss_after_gib")
        print(f"| {'  ' * row['depth']}{row['phase']} | {row['seconds']:.2f} | "
              f"{row['peak_gib']:.2f} | {'' if after is None else f'{after:.2f}'} |")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(ROWS, indent=1) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
