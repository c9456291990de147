"""``dpcounts verify`` on the hostile corpus (issue #34 item 3): wall and CPU seconds and
peak resident memory of each verification in a process of its own, beside the floor of
starting Python and importing what the verifier needs (pandas, pyarrow).

The corpus is the tests' (``tests/hostile_releases.py``: a dictionary-encoded row bomb,
huge texts, too many strata, escapes, ...), each made from one small valid release, plus
the valid release itself and a 1M-strata valid folder. Writes every row to ``--json``
(default ``results/benchmarks/verify_hostile.json``, git-ignored) and prints a table.

    python benchmarks/verify_hostile.py
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "benchmarks")]

from hostile_releases import HOSTILE  # noqa: E402
from measure import run_measured  # noqa: E402

FLOOR = "import pandas, pyarrow.parquet, numpy"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--json", type=Path, default=REPO / "results/benchmarks/verify_hostile.json"
    )
    args = parser.parse_args()
    from test_release_verify import release

    dpcounts = str(Path(sys.executable).parent / "dpcounts")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        os.environ["DPCOUNTS_LEDGER"] = str(base / "ledger.jsonl")
        os.environ["XDG_DATA_HOME"] = str(base / "data")
        valid = release(base, "valid")
        floor = run_measured([sys.executable, "-c", FLOOR])
        rows.append({"folder": "(floor: python, " + FLOOR + ")", **floor})
        cases = {"valid": None, **HOSTILE}
        for name, make in cases.items():
            out = base / f"case_{len(rows)}"
            shutil.copytree(valid, out)
            if make is not None:
                make(out)
            found = run_measured([dpcounts, "verify", str(out)])
            rows.append({"folder": name, **found})
            print(f"{name:<40} exit {found['code']}  wall {found['wall']:5.2f} s  "
                  f"CPU {found['cpu']:5.2f} s  peak {found['peak_bytes'] / 2**20:6.0f} MiB",
                  flush=True)  # fmt: skip
            shutil.rmtree(out)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    record = {"cores": os.cpu_count(), "load": os.getloadavg(), "rows": rows}
    args.json.write_text(json.dumps(record, indent=1) + "\n")
    worst = max(rows[1:], key=lambda r: r["cpu"])
    print(f"floor: CPU {rows[0]['cpu']:.2f} s, peak {rows[0]['peak_bytes'] / 2**20:.0f} MiB; "
          f"worst: {worst['folder']} CPU {worst['cpu']:.2f} s; peak of all "
          f"{max(r['peak_bytes'] for r in rows[1:]) / 2**20:.0f} MiB -> {args.json}")  # fmt: skip


if __name__ == "__main__":
    main()
