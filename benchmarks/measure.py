"""One command's wall time, CPU time and peak resident memory, measured in a process of
its own.

Linux carries a parent's resident high-water mark into a forked child: ``wait4`` on a
child forked from a 1 GiB test process reports at least 1 GiB, whatever the child used.
So the command runs under a small wrapper process, and the wrapper reports its only child's
usage (``RUSAGE_CHILDREN``): that child was forked from the small wrapper, so its peak is
its own.
"""

from __future__ import annotations

import json
import subprocess
import sys

_WRAPPER = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[2:], stdout=None if sys.argv[1] == "show" else
                      subprocess.DEVNULL).returncode
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": code, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
                  "peak_bytes": usage.ru_maxrss * 1024}), file=sys.stderr)
"""


def run_measured(command: list[str], env: dict | None = None, show: bool = False) -> dict:
    """``{"code", "wall", "cpu", "peak_bytes"}`` of ``command`` (its stdout shown only if
    ``show``; its stderr passes through, the measurement is the wrapper's last line)."""
    done = subprocess.run(
        [sys.executable, "-c", _WRAPPER, "show" if show else "hide", *command],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    *lines, last = done.stderr.rstrip("\n").split("\n")
    if lines:
        sys.stderr.write("\n".join(lines) + "\n")
    return json.loads(last)
