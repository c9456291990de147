"""Topic ``metadata``: no file embeds metadata beyond its columns' description, and the
folder and its files have the fixed public times and modes."""

from __future__ import annotations

import json
from pathlib import Path

from dpcounts.release import folder
from dpcounts.verify.checks import FAIL, OK, WARNING, CheckSpec, _check, register
from dpcounts.verify.readers import _footer, _Release, regular_file
from dpcounts.verify.words import shown

register(
    CheckSpec("metadata", "metadata",
              "The metadata's checks ran: a file they could not read fails here, with the "
              "reason."),
    CheckSpec("metadata", "embedded",
              "No Parquet file embeds metadata beyond pandas' description of its columns (no "
              "`attributes`, other schema keys, field metadata or categorical columns): an "
              "input's metadata must not ride along."),
    CheckSpec("metadata", "times",
              "A warning (copying may change it) unless the folder and its files have the "
              "fixed time 1980-01-01 (`dpcounts.release.folder.PUBLIC_MTIME`), which says "
              "nothing about when the release ran."),
    CheckSpec("metadata", "modes",
              "A warning (copying may change them) unless the files are 0644 and the folder "
              "0755, whatever the umask."),
)  # fmt: skip


def embedded_metadata(path: Path) -> list[str]:
    """What a public Parquet file embeds beyond pandas' description of its columns
    (:func:`.folder.write_public_table` writes nothing else); [] for a CSV file."""
    if path.suffix != ".parquet":
        return []
    import pyarrow.parquet as pq

    _footer(path)  # the schema is in the footer: a small one
    schema = pq.read_schema(path)
    metadata = dict(schema.metadata or {})
    found = [
        f"schema key {shown(repr(k.decode(errors='replace')), 60)}"
        for k in metadata
        if k != b"pandas"
    ]
    if b"pandas" in metadata:
        described = json.loads(metadata[b"pandas"])
        if not isinstance(described, dict) or described.get("attributes"):
            found.append("pandas attributes (attrs)")
    found += [f"metadata of column {shown(repr(f.name), 60)}" for f in schema if f.metadata]
    found += [
        f"categorical column {shown(repr(f.name), 60)}"
        for f in schema
        if str(f.type).startswith("dict")
    ]
    return found[:20]


def _metadata_checks(release: _Release):
    entries = release.entries()
    embedded = {
        shown(path.name, 80): found
        for path in entries
        if path.parent == release.path and regular_file(path)
        and (found := embedded_metadata(path))
    }  # fmt: skip
    paths = [release.path, *entries]
    off_time = [p for p in paths if int(p.lstat().st_mtime) != folder.PUBLIC_MTIME]

    def mode_of(p: Path) -> int:
        return folder.PUBLIC_FOLDER_MODE if p.is_dir() else folder.PUBLIC_FILE_MODE

    off_mode = [p for p in paths if (p.lstat().st_mode & 0o7777) != mode_of(p)]

    def names(found: list[Path]) -> str:
        shown = [p.relative_to(release.path).as_posix() or "." for p in found[:4]]
        return ", ".join(shown) + (", ..." if len(found) > 4 else "")

    out = [
        _check(
            "metadata", "embedded", FAIL if embedded else OK,
            ("metadata beyond the columns' description: "
             + "; ".join(f"{name}: {', '.join(found)}" for name, found in embedded.items())
             + " (the release's writer never embeds it: it may be the input's)")
            if embedded
            else "no file embeds metadata beyond its columns' description",
            {"embedded": embedded},
        ),
        _check(
            "metadata", "times", WARNING if off_time else OK,
            (f"{len(off_time)} of {len(paths)} (the folder '.' and its files) have a "
             f"modification time other than {folder.PUBLIC_MTIME} (1980-01-01): "
             f"{names(off_time)}; copying may change it")
            if off_time
            else f"the folder and its {len(paths) - 1} files have the modification time "
                 f"{folder.PUBLIC_MTIME} (1980-01-01)",
        ),
        _check(
            "metadata", "modes", WARNING if off_mode else OK,
            (f"{len(off_mode)} of {len(paths)} have modes other than 0644 (files) / 0755 "
             f"(folder): {names(off_mode)}; copying may change them")
            if off_mode
            else "files 0644, folder 0755",
        ),
    ]  # fmt: skip
    return out, True
