"""Atomic writers: a killed run never leaves a half-written artifact behind.

Each writer writes to a temporary file in the destination's folder and renames it into
place (``os.replace`` is atomic on POSIX within one file system).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it to ``path`` only on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    # mkstemp makes the file private (0600); artifacts get the usual umask-based mode.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_parquet(frame, path: str | os.PathLike) -> None:
    """Write a (Geo)DataFrame to Parquet atomically."""
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)


def write_json(obj, path: str | os.PathLike) -> None:
    """Write JSON atomically, keys sorted so equal objects give equal bytes."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def write_yaml(obj, path: str | os.PathLike, header: str = "") -> None:
    """Write YAML atomically (block style, keys sorted: equal objects give equal bytes),
    after an optional comment header (each line prefixed with ``# ``)."""
    import yaml  # PyYAML comes with Snakemake; only this writer needs it

    comment = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    text = yaml.safe_dump(obj, sort_keys=True, default_flow_style=False, allow_unicode=True)
    with atomic_path(path) as tmp:
        tmp.write_text(comment + text)


#: Resolution of every saved figure (dots per inch; a PDF's text and lines are vectors).
FIGURE_DPI = 150


def save_figure(fig, *paths: str | os.PathLike, tight: bool = True) -> None:
    """Save a matplotlib figure to each path (format from the suffix), atomically.

    PDF and PNG metadata carry no creation date, so the same figure gives the same bytes.
    ``tight`` (the default) crops the saved figure to what it draws plus
    ``savefig.pad_inches``; ``tight=False`` saves the figure's own size, for a figure whose
    layout engine already fits its contents to it.

    The figure is laid out and measured once, at the saving resolution, and then drawn
    once per format: its layout engine (constrained layout) runs here and is removed,
    the axes staying where it put them, and the crop is measured here. ``savefig`` alone
    would, for every format, lay the figure out and draw it once to measure the crop, then
    draw it again (a figure of many panels spends most of its time there).
    """
    import matplotlib as mpl

    if paths:
        with mpl.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
            original, fig.dpi = fig.dpi, FIGURE_DPI  # text is measured at the saved size
            try:
                engine = fig.get_layout_engine()
                if engine is not None:
                    engine.execute(fig)
                    fig.set_layout_engine(None)  # none at all: no layout at every draw
                crop = None
                if tight:
                    pad = mpl.rcParams["savefig.pad_inches"]
                    crop = fig.get_tightbbox().padded(pad)
            finally:
                fig.dpi = original
    for path in paths:
        path = Path(path)
        fmt = path.suffix.lstrip(".")
        metadata = {"CreationDate": None} if fmt == "pdf" else {}
        if fmt == "png":
            metadata = {"Software": None}
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, metadata=metadata, dpi=FIGURE_DPI, bbox_inches=crop)


def sha256_file(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
