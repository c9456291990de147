"""Run the tiny config through the SLURM profile and locally; compare the artifacts.

Called by ``tests/slurm/run.sh`` once its one-node cluster is up (``SLURM_CONF`` set).
Not collected by pytest (no ``test_`` prefix): it needs a live SLURM controller.

Checks, each failing with a message that says what differed:

1. ``snakemake --profile workflow/profiles/slurm`` finishes in a throw-away copy of the
   project and every job it ran on the cluster was submitted with sbatch: snakemake's log
   names each SLURM job id, and slurmctld's job-completion log records each one COMPLETED;
2. the same config run locally (default profile) in another copy gives the same files
   under results/ and figures/, byte for byte (same seeds, so the same random streams),
   although the two profiles group the work differently: the SLURM profile runs one job
   per unit (job_structure: split), the laptop profile one per Study-1 run and per
   study (bundled); both structures are checked to have been used.

Both copies and a snapshot of ``src/`` (put first on PYTHONPATH, which sbatch passes on
to the jobs) are taken before the first run, so both runs use the same code.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from workflow_helpers import (
    BIN,
    REPO,
    SNAKEMAKE,
    TEST_CONFIG,
    copy_project,
    generated_files,
)

#: The executor plugin logs "Job 3 has been submitted with SLURM jobid 17 (log: ...)".
SUBMITTED = re.compile(r"submitted with SLURM jobid (\d+)")
#: One line of jobcomp/filetxt: "JobId=17 UserId=root(0) ... JobState=COMPLETED ...".
COMPLETION = re.compile(r"\bJobId=(\d+)\b.*?\bJobState=(\S+)")

#: Options for a cluster without accounting (see run.sh): no account to validate, and
#: squeue (kept honest by MinJobAge=300) instead of sacct for job status.
SLURM_TEST_ARGS = (
    "--slurm-no-account",
    "--slurm-status-command",
    "squeue",
    "--slurm-init-seconds-before-status-checks",
    "5",
    # Study 1's scoring jobs take seconds each; batching them into a few SLURM jobs keeps
    # the test's sbatch/srun overhead (tens of seconds per job on 2 busy cores) bounded.
    # Group jobs also exercise the jobstep executor's group path.
    "--groups",
    "study1_score=study1_score",
    "--group-components",
    "study1_score=40",
    # Without limits a group asks for every parallel member's cores at once (more than
    # the node has); with them snakemake stacks members in series within the group.
    "--cores",
    "2",
    "--resources",
    "mem_mb=4000",
)


def run(workdir: Path, src: Path, *args: str, label: str, timeout: float) -> str:
    """Run snakemake in ``workdir`` with the library imported from the snapshot ``src``."""
    start = time.monotonic()
    env = dict(
        os.environ,
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        PYTHONPATH=f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    )
    try:
        result = subprocess.run(
            [SNAKEMAKE, "--configfile", TEST_CONFIG, *args],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        sys.exit(f"{label} run did not finish within {timeout:.0f} s")
    took = time.monotonic() - start
    print(f"{label}: exit {result.returncode} after {took:.0f} s", flush=True)
    if result.returncode != 0:
        sys.exit(f"{label} run failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}")
    return result.stdout + result.stderr


def completed_jobs(jobcomp_log: Path) -> dict[str, str]:
    if not jobcomp_log.exists():
        return {}
    states = {}
    for line in jobcomp_log.read_text().splitlines():
        match = COMPLETION.search(line)
        if match:
            states[match.group(1)] = match.group(2)
    return states


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobcomp-log", type=Path, required=True)
    parser.add_argument("--slurmctld-log", type=Path, required=True)
    parser.add_argument("--timeout", type=float, default=900, help="per snakemake run, s")
    args = parser.parse_args()

    # Removed on success only, so a failed run's logs (.snakemake/slurm_logs) can be read.
    tmp = Path(tempfile.mkdtemp(prefix="dpcounts-slurm-"))
    print(f"project copies in {tmp}", flush=True)
    compare(tmp, args)
    shutil.rmtree(tmp)


def compare(tmp: Path, args: argparse.Namespace) -> None:
    # Both copies, and one snapshot of the library they import, are taken before either
    # run starts, so both runs use the same code even while the checkout changes.
    src = tmp / "src"
    shutil.copytree(REPO / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    on_slurm = copy_project(tmp / "slurm")
    local = copy_project(tmp / "local")
    log = run(
        on_slurm,
        src,
        "--profile",
        "workflow/profiles/slurm",
        *SLURM_TEST_ARGS,
        label="SLURM profile",
        timeout=args.timeout,
    )
    submitted = SUBMITTED.findall(log)
    if not submitted:
        sys.exit(f"snakemake's log names no SLURM job id; the run did not use sbatch:\n{log}")
    states = completed_jobs(args.jobcomp_log)
    not_completed = {job: states.get(job, "absent") for job in submitted}
    not_completed = {job: s for job, s in not_completed.items() if s != "COMPLETED"}
    if not_completed:
        sys.exit(
            f"SLURM jobs not recorded COMPLETED in {args.jobcomp_log}: {not_completed}\n"
            f"slurmctld log tail:\n{args.slurmctld_log.read_text()[-3000:]}"
        )
    print(f"{len(submitted)} jobs went through sbatch and completed on the cluster")

    run(
        local,
        src,
        "--profile",
        "workflow/profiles/default",
        "--cores",
        "2",
        label="local profile",
        timeout=args.timeout,
    )

    bundles = {work: list((work / "logs" / "benchmarks").rglob("*_bundle*")) for work in
               (on_slurm, local)}  # fmt: skip
    if bundles[on_slurm] or not bundles[local]:
        sys.exit(
            "expected split jobs on SLURM and bundled jobs locally; bundled jobs found: "
            f"SLURM {len(bundles[on_slurm])}, local {len(bundles[local])}"
        )
    slurm_files, local_files = generated_files(on_slurm), generated_files(local)
    if not local_files:
        sys.exit("the local run generated no files under results/ or figures/")
    only_local = sorted(set(local_files) - set(slurm_files))
    only_slurm = sorted(set(slurm_files) - set(local_files))
    differ = sorted(
        name
        for name in set(local_files) & set(slurm_files)
        if local_files[name] != slurm_files[name]
    )
    if only_local or only_slurm or differ:
        sys.exit(
            "SLURM and local artifacts differ:\n"
            f"  only local: {only_local}\n  only SLURM: {only_slurm}\n  bytes differ: {differ}"
        )
    print(f"{len(local_files)} files under results/ and figures/ identical byte for byte")


if __name__ == "__main__":
    main()
