"""Which dpcounts modules a release enters (issue #51): a release of the shipped pennLC table
run in process, with every call into a module of dpcounts recorded, the second of two
releases so that one-off work (numba's compiling) is not counted.

    .venv/bin/python tools/release_modules.py [--mechanism truncated] [--sanitised-prior-by]

prints the number of modules entered, then per top-level room the modules and their calls.
It writes nothing outside a temporary folder.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mechanism", default="truncated")
    parser.add_argument("--sanitised-prior-by", nargs="*", default=None)
    args = parser.parse_args()
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.environ["XDG_DATA_HOME"] = str(tmp / "home")
        from dpcounts.release import ReleaseRequest, build_release

        table = pd.read_parquet(REPO / "data" / "pennlc_strata.parquet")
        table = table.query("population > 0").rename(columns={"cases": "count"})
        table.to_csv(tmp / "pa.csv", index=False)
        prior = args.sanitised_prior_by
        if prior is None and args.mechanism != "md":
            prior = []  # the overall rate
        calls: collections.Counter = collections.Counter()

        def record(frame, event, arg) -> None:
            name = frame.f_globals.get("__name__", "")
            if event == "call" and name.startswith("dpcounts"):
                calls[name] += 1

        for run in range(2):
            request = ReleaseRequest(
                input=tmp / "pa.csv", out=tmp / f"out{run}", epsilon=5.0,
                mechanism=args.mechanism, keys=("county", "race", "sex", "age"),
                strata="input", dataset="modules-trace", test_seed=1, sets=2,
                sanitised_prior_by=None if prior is None else tuple(prior),
                ledger=tmp / "ledger.jsonl", new_dataset=True,
                private_dir=tmp / f"private{run}", progress=False,
            )  # fmt: skip
            if run:
                sys.setprofile(record)
            build_release(request)
            sys.setprofile(None)
    rooms: dict[str, list[str]] = collections.defaultdict(list)
    for name in sorted(calls):
        parts = name.split(".")
        rooms[parts[1] if len(parts) > 2 else "(top level)"].append(name)
    print(f"{len(calls)} modules of dpcounts entered, in {len(rooms)} rooms")
    for room, names in sorted(rooms.items()):
        print(f"  {room}: " + ", ".join(f"{n.split('.', 1)[1]} ({calls[n]})" for n in names))


if __name__ == "__main__":
    main()
