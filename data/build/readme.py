"""Rewrite the checksum section of ``data/README.md`` from the files just built."""

from __future__ import annotations

import re
from pathlib import Path

from dpcounts.io import sha256_file as sha256

START = "<!-- checksums:start (written by data/build/build_data.py; do not edit) -->"
END = "<!-- checksums:end -->"


def checksum_section(written: list[Path], raw) -> str:
    lines = [START, "", "| shipped file | bytes | SHA-256 |", "|---|---:|---|"]
    for path in sorted(written, key=lambda p: p.name):
        lines.append(f"| `{path.name}` | {path.stat().st_size} | `{sha256(path)}` |")
    lines += ["", "| downloaded input (in `data/raw/`, not shipped) | SHA-256 |", "|---|---|"]
    for label, path in raw.archives().items():
        lines.append(f"| {label}: `{path.name}` | `{sha256(path)}` |")
    lines += ["", END]
    return "\n".join(lines)


def update_checksums(readme: Path, written: list[Path], raw) -> None:
    """Replace the text between the START and END markers (append it if missing)."""
    section = checksum_section(written, raw)
    text = readme.read_text() if readme.exists() else "# Shipped data\n"
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), flags=re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip("\n") + "\n\n## Checksums\n\n" + section + "\n"
    readme.write_text(text)
