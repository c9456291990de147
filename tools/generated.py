"""Write a generated file, or with ``--check`` fail (and show the difference) where the
file in the tree is stale: the one main of the ``tools/write_*.py`` writers."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path


def write_or_check(output: Path, text: str, name: str, description: str) -> int:
    """``output`` (shown as ``name``) written with ``text``; with ``--check`` on the
    command line, 1 and a diff if it differs, else 0."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help=f"fail if {name} is stale")
    args = parser.parse_args()
    if args.check:
        current = output.read_text() if output.exists() else ""
        if current != text:
            sys.stdout.writelines(difflib.unified_diff(
                current.splitlines(keepends=True), text.splitlines(keepends=True),
                name, "generated"))  # fmt: skip
            print(f"{name} is stale: run `make format`", file=sys.stderr)
            return 1
        return 0
    output.write_text(text)
    return 0
