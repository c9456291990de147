"""Every shipped data file matches the SHA-256 recorded in data/README.md."""

import hashlib
import re
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"
ROW = re.compile(r"^\| `(?P<name>[^`/]+)` \| (?P<size>\d+) \| `(?P<sha>[0-9a-f]{64})` \|$")


def recorded_checksums() -> dict[str, tuple[int, str]]:
    rows = {}
    for line in (DATA / "README.md").read_text().splitlines():
        match = ROW.match(line)
        if match:
            rows[match["name"]] = (int(match["size"]), match["sha"])
    return rows


def shipped_files() -> list[str]:
    return sorted(
        p.name for p in DATA.iterdir() if p.is_file() and p.suffix in {".parquet", ".csv"}
    )


def test_readme_lists_every_shipped_file():
    assert recorded_checksums(), "no checksum rows found in data/README.md"
    assert sorted(recorded_checksums()) == shipped_files()


@pytest.mark.parametrize("name", shipped_files())
def test_shipped_file_matches_its_checksum(name):
    size, sha = recorded_checksums()[name]
    content = (DATA / name).read_bytes()
    assert len(content) == size
    assert hashlib.sha256(content).hexdigest() == sha
