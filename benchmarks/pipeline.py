"""The whole default pipeline (what `make` runs), stage by stage, beside its sampling floor.

Run from the repository root::

    .venv/bin/python benchmarks/pipeline.py [--cores 2] [--configfile FILE] [--keep DIR]

Runs `make`'s two commands (``snakemake --profile workflow/profiles/default`` for every
figure, then ``--report report.html``) in a throw-away copy of the project, with progress
on stderr, then prints a markdown table with, per stage, the jobs, their summed wall
seconds ("job-s"), CPU seconds and largest resident memory (Snakemake's ``benchmark:``
file of every job; its CPU seconds from the job process's own accounting, recorded at its
exit, as the ``benchmark:`` file's samples miss much of a long job's CPU) and the stage's
*floor* measured in this same run:

- a sampling stage (Study 1's scoring and data sets, each study's simulations): NumPy
  drawing as many gamma variates as the stage draws synthetic cells (vectors x cells,
  counted from the stage's own artifacts), in this one process, after the run; and, as
  a shared machine's speed drifts over the minutes of a run, NumPy drawing
  ``GAMMA_BEFORE`` variates (about the default run's count) just before the run: each
  stage's floor is its cells at the mean of the two rates (both printed);
- the pseudo-posterior stage: the compiled NUTS kernel's warm run on a data set's records
  (compiled beforehand, so only sampling is timed) times the number of NUTS fits, plus
  the exact fits' gamma draws;
- stages that draw nothing (maps, truth, figures, report): no floor; the figures, maps,
  summaries and checks of the sampling stages are one row of their own, so a sampling
  stage's ratio compares the jobs that draw with the floor of what they draw.

The last row is the whole run: wall seconds of the two commands, CPU of every process,
the largest single process, the summed floor, and the ratio of the wall time to the floor
divided by the cores used (``--cores``): the floor is measured in one process, and a run
on N cores could at best take 1/N of it, so that ratio is what the run costs over the
best its cores could do (1.0x would be perfect). A stage's ratio compares its summed job
seconds (each job is one single-threaded process) with its one-process floor.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
from study1 import gamma_floor
from workflow_helpers import merged
from workflow_timing import BIN, copy_project, single_thread_env

XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
#: Gamma variates timed just before the run (about as many as the default run draws, so
#: that the first batches' slower start weighs as little as in the floor after it).
GAMMA_BEFORE = 2_600_000_000


#: sitecustomize of the jobs' Python processes: at exit, a job's script (the one whose
#: ``snakemake`` object has a log) writes its log path and its CPU seconds (every thread's,
#: from the kernel's accounting) to $DPCOUNTS_JOB_CPU/<pid>. Snakemake's ``benchmark:``
#: file samples a job's CPU while it runs and misses what falls between its samples, much
#: of a long job's CPU.
JOB_CPU_RECORDER = """\
import atexit, os, resource, sys

def _record():
    job = getattr(sys.modules.get("__main__"), "snakemake", None)
    if job is None or not job.log:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    path = os.path.join(os.environ["DPCOUNTS_JOB_CPU"], str(os.getpid()))
    with open(path, "w") as out:
        out.write(f"{job.log[0]}\\t{usage.ru_utime + usage.ru_stime}\\n")

atexit.register(_record)
"""


def job_cpu_env(folder: Path) -> dict[str, str]:
    """single_thread_env() with the jobs' CPU recorder on PYTHONPATH, writing to ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(JOB_CPU_RECORDER)
    env = single_thread_env()
    paths = (str(folder), env.get("PYTHONPATH"))
    env.update(PYTHONPATH=os.pathsep.join(p for p in paths if p), DPCOUNTS_JOB_CPU=str(folder))
    return env


def recorded_cpu(folder: Path) -> dict[str, float]:
    """CPU seconds of each job recorded in ``folder``, by its log path."""
    cpu = {}
    for record in folder.iterdir():
        if record.name.isdigit():
            log, seconds = record.read_text().rstrip("\n").split("\t")
            cpu[log] = float(seconds)
    return cpu


def run_logged(work: Path, *args: str) -> float:
    """Run snakemake in ``work`` with progress lines on stderr; wall seconds."""
    start = time.perf_counter()
    with subprocess.Popen(
        [str(BIN / "snakemake"), *args],
        cwd=work,
        env=job_cpu_env(work / ".job_cpu"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        tail = []
        for line in process.stderr:
            tail = (tail + [line])[-40:]
            # the laptop profile's logger prints "[done/total] rule (wildcards)" per job
            if re.match(r"\[ *\d+/\d+\] ", line) or "steps (" in line:
                print(f"  [{time.perf_counter() - start:6.0f} s] {line.strip()}", file=sys.stderr)
    if process.returncode:
        raise RuntimeError(f"snakemake {' '.join(args)} failed:\n{''.join(tail)}")
    return time.perf_counter() - start


#: Job names (their benchmark file's stem) of the sampling stages' jobs that draw nothing:
#: their seconds are shown apart, so that a sampling stage's ratio compares only the jobs
#: that draw with the floor of what they draw.
DRAW_NOTHING = ("figure", "maps", "summary", "summarize", "strata")
#: The row of those jobs.
NOT_DRAWING = "figures, maps, summaries (draw nothing)"


def stage_of(path: Path) -> str:
    """The stage a job's benchmark file belongs to, from its folder under logs/benchmarks/."""
    parts = path.parts
    if parts[0] in ("study1", "studies", "pseudo_posterior") and path.stem.startswith(DRAW_NOTHING):
        return NOT_DRAWING
    if parts[0] == "study1":
        return "Study 1, Appendix C" if "appendix_c" in parts else "Study 1 (35-44)"
    if parts[0] == "studies":
        return f"study {parts[1]}"
    return {
        "data": "data maps",
        "truth": "truth",
        "study2": "Study 2 tables and figures",
        "pseudo_posterior": "pseudo-posterior",
        "report": "report's configuration",
    }.get(parts[0], parts[0])


def job_table(work: Path) -> pd.DataFrame:
    """One row per job: stage, wall s, CPU s, largest RSS (MB). The wall seconds and
    memory are the job's ``benchmark:`` file's; the CPU seconds the job's own record
    (every rule's log is its benchmark file's path under logs/ instead of
    logs/benchmarks/, with .log for .tsv), else the benchmark file's sampled CPU."""
    root = work / "logs" / "benchmarks"
    recorded = recorded_cpu(work / ".job_cpu")
    rows = []
    for path in sorted(root.rglob("*.tsv")):
        row = pd.read_csv(path, sep="\t").iloc[0]
        log = Path("logs", path.relative_to(root)).with_suffix(".log").as_posix()
        rows.append(
            {
                "stage": stage_of(path.relative_to(root)),
                "s": float(row["s"]),
                "cpu": recorded.get(log, float(row["cpu_time"])),
                "rss": float(pd.to_numeric(row["max_rss"], errors="coerce")),
            }
        )
    return pd.DataFrame(rows)


def drawn_cells(work: Path) -> dict[str, int]:
    """Synthetic cells (vectors x cells) each sampling stage drew, from its artifacts."""
    cells: dict[str, int] = defaultdict(int)
    results = work / "results"
    for run in [results / "study1", *sorted((results / "study1" / "appendix_c").glob("*/"))]:
        stage = "Study 1, Appendix C" if "appendix_c" in run.parts else "Study 1 (35-44)"
        for scenario in sorted(run.glob("scenario_*.parquet")):
            n_cells = len(pd.read_parquet(scenario, columns=["population"]))
            datasets = run / "datasets" / scenario.name
            cells[stage] += len(pd.read_parquet(datasets, columns=["count"]))
            number = scenario.stem.split("_")[1]
            for scores in (run / "scores" / number).rglob("*.parquet"):
                frame = pd.read_parquet(scores, columns=["metric"])
                cells[stage] += int((frame["metric"] == "rmse").sum()) * n_cells
    for study in sorted((results / "studies").glob("*/")):
        if not (study / "summary.parquet").exists():
            continue
        n_cells = len(pd.read_parquet(study / "strata.parquet"))
        for metrics in (study / "metrics").rglob("*.parquet"):
            frame = pd.read_parquet(metrics, columns=["epsilon", "set"])
            cells[f"study {study.name}"] += len(frame.drop_duplicates()) * n_cells
    return dict(cells)


def nuts_floor(work: Path, configfile: str | None) -> tuple[float, int]:
    """Seconds of pure NUTS sampling for the stage's NUTS fits, and how many there were.

    Per data set fitted with NUTS: its compiled kernel is built and run once (compilation),
    then timed on three more runs with the job's settings (warm: sampling only), of which
    the fastest counts: a floor is the least the machine does, and a shared machine's
    noise only adds to it.
    """
    os.environ.setdefault("XLA_FLAGS", XLA_FLAGS)
    import json

    import yaml

    from dpcounts.studies.pseudo_posterior.fitting import fit_weighted
    from dpcounts.studies.pseudo_posterior.jax_threads import use_one_thread
    from dpcounts.studies.pseudo_posterior.study import StudySettings

    use_one_thread()  # as the fit job does

    config = yaml.safe_load((work / "config" / "config.yaml").read_text())
    if configfile:
        config = merged(config, yaml.safe_load(Path(configfile).read_text()))
    config = config["pseudo_posterior"]
    seconds, fits = 0.0, 0
    for folder in sorted((work / "results" / "pseudo_posterior").glob("*/")):
        meta = json.loads((folder / "fits.json").read_text())
        nuts = [m for m in meta.values() if m.get("sampler") == "nuts"]
        if not nuts:
            continue
        count = sum(max(1, len(m["history"])) for m in nuts)
        settings = StudySettings.from_config(config, folder.name)
        y = pd.read_parquet(folder / "data.parquet")["y"].to_numpy()
        weights = np.ones(y.size)
        rng = np.random.default_rng(0)
        fit_weighted(y, weights, settings.family, settings.mcmc, rng, method="nuts")
        warm = []
        for _ in range(3):
            start = time.perf_counter()
            fit_weighted(y, weights, settings.family, settings.mcmc, rng, method="nuts")
            warm.append(time.perf_counter() - start)
        seconds += min(warm) * count
        fits += count
    return seconds, fits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--configfile", default=None, help="extra config (e.g. the test one)")
    parser.add_argument("--keep", default=None, help="copy logs/benchmarks here")
    args = parser.parse_args()

    extra = ["--configfile", str(Path(args.configfile).resolve())] if args.configfile else []
    smk = ["--profile", "workflow/profiles/default", "--cores", str(args.cores), *extra]
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        work = copy_project(Path(tmp))
        print("pipeline: the gamma floor's rate, before the run", file=sys.stderr)
        rate_before = gamma_floor(GAMMA_BEFORE, rng) / GAMMA_BEFORE
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        print("pipeline: every figure (`make`, first command)", file=sys.stderr)
        wall_run = run_logged(work, *smk)
        print("pipeline: the report (`make`, second command)", file=sys.stderr)
        wall_report = run_logged(work, *smk, "--report", "report.html")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        jobs = job_table(work)
        cells = drawn_cells(work)
        print("pipeline: measuring the floors", file=sys.stderr)
        nuts_seconds, nuts_fits = nuts_floor(work, args.configfile)
        if args.keep:
            shutil.copytree(work / "logs" / "benchmarks", args.keep, dirs_exist_ok=True)

    after_run = {stage: gamma_floor(n, rng) for stage, n in cells.items()}
    rate_after = sum(after_run.values()) / sum(cells.values()) if cells else rate_before
    rate = (rate_before + rate_after) / 2
    floors = {stage: n * rate for stage, n in cells.items()}
    if nuts_fits:
        floors["pseudo-posterior"] = nuts_seconds
    by_stage = jobs.groupby("stage").agg(
        jobs=("s", "size"), job_s=("s", "sum"), cpu=("cpu", "sum"), rss=("rss", "max")
    )
    cpu_total = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    wall = wall_run + wall_report

    print(f"| stage ({args.cores} cores) | jobs | job-s | CPU s | largest job | floor | ratio |")
    print("|---|---|---|---|---|---|---|")
    for stage, row in by_stage.sort_values("job_s", ascending=False).iterrows():
        floor = floors.get(stage)
        ratio = f"{row['job_s'] / floor:,.1f}x" if floor else "-"
        note = ""
        if stage == "pseudo-posterior" and nuts_fits:
            note = f" ({nuts_fits} NUTS fits)"
        elif stage in cells:
            note = f" ({cells[stage] / 1e6:,.1f} M cells)"
        shown = f"{floor:.2f} s{note}" if floor else "-"
        print(
            f"| {stage} | {int(row['jobs'])} | {row['job_s']:.0f} | {row['cpu']:.0f} | "
            f"{row['rss']:.0f} MB | {shown} | {ratio} |"
        )
    floor_total = sum(floors.values())
    ideal = floor_total / args.cores  # the one-process floor shared perfectly by the cores
    peak = after.ru_maxrss / 1024
    print(
        f"| **whole run** (wall: {wall_run:.0f} s + report {wall_report:.0f} s) | "
        f"{int(by_stage['jobs'].sum())} | {wall:.0f} (wall) | {cpu_total:.0f} | "
        f"{peak:.0f} MB | {floor_total:.1f} s / {args.cores} cores = {ideal:.1f} s | "
        f"{wall / ideal:,.1f}x (wall) |"
    )
    print(
        f"\nWhole run: wall {wall:.0f} s against the floor divided by the {args.cores} cores "
        f"used ({floor_total:.1f} s / {args.cores} = {ideal:.1f} s): {wall / ideal:,.1f}x. "
        "The floor is one process's sampling; the cores could at best divide it. A gamma "
        f"variate took {rate_before * 1e9:.1f} ns just before the run and "
        f"{rate_after * 1e9:.1f} ns just after it; the floor uses their mean."
    )


if __name__ == "__main__":
    main()
