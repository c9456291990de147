"""Installing a release folder safely: whole or not at all, never over someone else's.

A release (and the steward's private folder beside it) is written into a hidden partial
folder ``.<name>.<pid>.<random>.partial`` next to its destination and renamed into place
only when complete, under an exclusive lock on the destination's parent folder, so:

* a killed run leaves no release, only a partial folder, which the next release into the
  same parent removes (its process is gone) before it starts;
* two concurrent runs into one ``--out`` cannot both succeed: the second finds the first's
  release in place and stops, naming it;
* an existing folder is replaced only with ``force`` and only when it holds a dpsynth
  manifest (a release of ours, or our private folder); an empty folder is taken over;
* the working directory and its ancestors are refused outright (``--out .`` would
  otherwise replace the folder the command runs in).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

from dpsynth.release.request import ReleaseError

#: The file that marks a dpsynth release folder, and the key that marks the manifest ours.
MANIFEST = "manifest.json"
FORMAT_KEY = "dpsynth_release_format"
#: The file that marks a dpsynth private folder.
PROVENANCE = "provenance.json"
_PARTIAL = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]+\.partial$")


def _is_ours(folder: Path) -> bool:
    for marker in (MANIFEST, PROVENANCE):
        path = folder / marker
        if path.is_file():
            try:
                return FORMAT_KEY in json.loads(path.read_text())
            except (OSError, ValueError):
                return False
    return False


def check_destination(out: Path, force: bool) -> None:
    """Refuse a destination that cannot or must not be replaced (checked again at install)."""
    resolved = out.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise ReleaseError(
            f"{out}: is the working directory or one of its ancestors; choose a new folder "
            "for the release (e.g. --out release/)"
        )
    if out.exists() and not out.is_dir():
        raise ReleaseError(f"{out}: exists and is not a folder; expected a folder for the release")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise ReleaseError(
                f"{out}: folder exists and is not empty; choose another --out or pass --force "
                "to replace a dpsynth release"
            )
        if not _is_ours(out):
            raise ReleaseError(
                f"{out}: folder exists and holds no dpsynth release ({MANIFEST} with "
                f"{FORMAT_KEY!r}); --force replaces only dpsynth releases"
            )


@contextlib.contextmanager
def parent_lock(parent: Path) -> Iterator[None]:
    """An exclusive lock on a folder (flock on its descriptor): one installer at a time."""
    parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_partials(parent: Path) -> list[Path]:
    """Delete partial folders in ``parent`` whose writing process no longer exists."""
    removed = []
    for path in parent.iterdir():
        match = _PARTIAL.match(path.name)
        if match and path.is_dir() and not _alive(int(match["pid"])):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def new_partial(destination: Path) -> Path:
    """A fresh private partial folder beside ``destination`` (mode 0700)."""
    parent = destination.parent
    parent.mkdir(parents=True, exist_ok=True)
    name = f".{destination.name}.{os.getpid()}.{secrets.token_hex(6)}.partial"
    path = parent / name
    path.mkdir(mode=0o700)
    return path


def install(partials: dict[Path, Path], force: bool) -> None:
    """Rename each finished partial folder onto its destination, under the parent's lock.

    ``partials`` maps destination -> finished partial. Every destination is checked before
    any is touched; an old dpsynth folder is replaced only with ``force``.
    """
    parents = {dest.parent.resolve() for dest in partials}
    if len(parents) != 1:
        raise ValueError("all destinations of one release must share a parent folder")
    parent = next(iter(parents))
    with parent_lock(parent):
        for dest in partials:
            check_destination(dest, force)
        for dest, partial in partials.items():
            os.chmod(partial, 0o755 if dest.suffix != ".private" else 0o700)
            if dest.is_dir():
                old = parent / f".{dest.name}.{os.getpid()}.{secrets.token_hex(6)}.partial"
                os.rename(dest, old)
                os.rename(partial, dest)
                shutil.rmtree(old)
            else:
                os.rename(partial, dest)
