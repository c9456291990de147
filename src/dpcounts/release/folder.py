"""Installing a release folder safely: whole or not at all, never over someone else's.

A release and the steward's private folder (wherever ``--private-dir`` puts it) are each
written into a hidden partial folder ``.<name>.<pid>.<random>.partial`` next to their
destination and renamed into place only when both are complete, under exclusive locks on
the destinations' parent folders, so:

* a killed run leaves no release and no private folder, only partial folders, which the
  next release into the same parent folders removes (their process is gone) before it
  starts;
* two concurrent runs into one ``--out`` cannot both succeed: the second finds the first's
  release in place and stops, naming it;
* an existing folder is replaced only with ``force`` and only when it is a dpcounts folder
  of the same kind (a release with our manifest, a private folder with our provenance);
  an empty folder is taken over;
* the working directory and its ancestors are refused outright (``--out .`` would
  otherwise replace the folder the command runs in);
* the private folder is never the release folder, inside it, or around it
  (:func:`check_apart`): the release is published whole;
* the release's file metadata says nothing about the run (:func:`fix_public_metadata`):
  every public file and the release folder get one fixed modification and access time,
  :data:`PUBLIC_MTIME`, and fixed permissions, whatever the umask. Their times would
  otherwise be the wall clock at the end of the draw, which depends on how long the
  sampler took, which depends on the counts, and zip, tar and ``rsync -a`` keep them.
  The private folder keeps its real times (the steward's record);
* a public table holds its columns and nothing else (:func:`write_public_table`): no
  metadata of the input (pandas ``attrs``, Parquet key-value or field metadata, the
  categories of a categorical column) rides along into a published file.
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

import pandas as pd

from dpcounts.release.request import ReleaseError

#: The file that marks a dpcounts release folder, and the key that marks the manifest ours.
MANIFEST = "manifest.json"
FORMAT_KEY = "dpcounts_release_format"
#: The file that marks a dpcounts private folder.
PROVENANCE = "provenance.json"
#: The modification and access time of every public file and of the release folder:
#: 1980-01-01T00:00:00Z, the earliest time a ZIP archive can hold (the reproducible-builds
#: convention, as SOURCE_DATE_EPOCH). Public and fixed: it says nothing about when, or for
#: how long, the release ran.
PUBLIC_MTIME = 315532800
#: Permissions of the public files and of the release folder, whatever the umask.
PUBLIC_FILE_MODE = 0o644
PUBLIC_FOLDER_MODE = 0o755
_PARTIAL = re.compile(r"^\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]+\.partial$")


def _is_ours(folder: Path, marker: str) -> bool:
    path = folder / marker
    if not path.is_file():
        return False
    try:
        return FORMAT_KEY in json.loads(path.read_text())
    except (OSError, ValueError):
        return False


def check_destination(out: Path, force: bool, *, private: bool = False) -> None:
    """Refuse a destination that cannot or must not be replaced (checked again at install).

    ``private``: ``out`` is the steward's private folder (``--private-dir``), which replaces
    only a private folder of ours; else the release folder (``--out``), only a release.
    """
    option, marker = ("--private-dir", PROVENANCE) if private else ("--out", MANIFEST)
    kind = "private folder" if private else "release"
    resolved = out.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise ReleaseError(
            f"{out}: is the working directory or one of its ancestors; choose a new folder "
            f"for {option}"
        )
    if out.exists() and not out.is_dir():
        raise ReleaseError(f"{out}: exists and is not a folder; expected a folder for {option}")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise ReleaseError(
                f"{out}: folder exists and is not empty; choose another {option} or pass "
                f"--force to replace a dpcounts {kind}"
            )
        if not _is_ours(out, marker):
            raise ReleaseError(
                f"{out}: folder exists and holds no dpcounts {kind} ({marker} with "
                f"{FORMAT_KEY!r}); --force replaces only a dpcounts {kind} there"
            )


def check_apart(out: Path, private: Path) -> None:
    """Refuse a private folder that is the release folder, lies inside it or holds it:
    the release folder is published whole, and a private folder around it would be
    replaced or published with it. Refuse a release folder inside the steward's folder
    (:func:`dpcounts.ledger.steward_home`, the ledger's and the private folders' home), or
    around it, for the same reason."""
    from dpcounts.ledger import steward_home

    release, steward = out.resolve(), private.resolve()
    home = steward_home()
    if release.is_relative_to(home.resolve()) or home.resolve().is_relative_to(release):
        raise ReleaseError(
            f"--out {out}: lies in (or holds) the steward's folder {home}, which holds the "
            "ledger and the private folders (root keys) and is never published; put the "
            "release outside it"
        )
    if steward == release:
        problem = f"the private folder {private} is the release folder {out}"
    elif steward.is_relative_to(release):
        problem = f"the private folder {private} lies inside the release folder {out}"
    elif release.is_relative_to(steward):
        problem = f"the release folder {out} lies inside the private folder {private}"
    else:
        return
    raise ReleaseError(
        f"{problem}: the release folder is published whole and the private folder (the root "
        "key, the original totals) never, so they must be apart; choose a --private-dir "
        "outside --out and not around it"
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


@contextlib.contextmanager
def parent_locks(destinations) -> Iterator[list[Path]]:
    """:func:`parent_lock` on every destination's parent folder (each once, in sorted
    order, so two runs never wait for each other in a cycle); yields the parents."""
    parents = sorted({Path(dest).parent.resolve() for dest in destinations})
    with contextlib.ExitStack() as stack:
        for parent in parents:
            stack.enter_context(parent_lock(parent))
        yield parents


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


def fix_public_metadata(folder: Path) -> None:
    """Give ``folder`` (a finished release, before installation) and everything in it the
    fixed public times :data:`PUBLIC_MTIME` and modes (:data:`PUBLIC_FILE_MODE`, and
    :data:`PUBLIC_FOLDER_MODE` for folders). The inode change time (ctime) cannot be set;
    docs/privacy.md (Part 5, Timing) says what that leaves."""
    for path in sorted(folder.rglob("*"), reverse=True):  # contents before their folder
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            raise ReleaseError(f"{path}: not a regular file or folder in a release")
        os.chmod(path, PUBLIC_FOLDER_MODE if path.is_dir() else PUBLIC_FILE_MODE)
        os.utime(path, (PUBLIC_MTIME, PUBLIC_MTIME))
    os.chmod(folder, PUBLIC_FOLDER_MODE)
    os.utime(folder, (PUBLIC_MTIME, PUBLIC_MTIME))


def install(partials: dict[Path, Path], force: bool, private: Path) -> None:
    """Rename each finished partial folder onto its destination, under the parents' locks.

    ``partials`` maps destination -> finished partial, in the order they are renamed (the
    private folder first: a run killed in between leaves a private folder without its
    release, never a release without its key). Every destination is checked before any is
    touched; an old dpcounts folder is replaced only with ``force``. ``private`` (one of the
    destinations) stays readable by its owner only (0700) and keeps its times; the others
    are public: :func:`fix_public_metadata` (times :data:`PUBLIC_MTIME`, modes 0755 and
    0644), set again on the folder once it is in place.
    """
    with parent_locks(partials):
        for dest in partials:
            check_destination(dest, force, private=dest == private)
        for dest, partial in partials.items():
            if dest == private:
                os.chmod(partial, 0o700)
            else:
                fix_public_metadata(partial)
            if dest.is_dir():
                old = dest.parent / f".{dest.name}.{os.getpid()}.{secrets.token_hex(6)}.partial"
                os.rename(dest, old)
                os.rename(partial, dest)
                shutil.rmtree(old)
            else:
                os.rename(partial, dest)
            if dest != private:  # a rename may touch the folder's times on some systems
                os.utime(dest, (PUBLIC_MTIME, PUBLIC_MTIME))


def values_only(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame``'s columns and values, without its metadata: a new frame with no pandas
    ``attrs`` and no categorical dtype (a categorical's unused categories are metadata, not
    data). The input's metadata stops here when it is read (:func:`.inputs.load_strata`),
    and every public table is written through it (:func:`write_public_table`)."""
    columns = {}
    for name in frame.columns:
        column = frame[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            column = column.astype(column.cat.categories.dtype)
        # an extension column (pandas' Arrow-backed text) as its array: a NumPy copy would
        # make a Python object of every value, pandas then converting them back (issue #36:
        # 30 s and 3 GiB at 10M strata); arrays carry values, no metadata
        extension = isinstance(column.dtype, pd.api.extensions.ExtensionDtype)
        columns[name] = column.array if extension else column.to_numpy()
    clean = pd.DataFrame(columns, index=range(len(frame)))
    clean.attrs = {}
    return clean


def write_public_table(frame: pd.DataFrame, path: Path) -> None:
    """Write ``frame`` to a public ``.csv`` or ``.parquet`` file: its columns and nothing else.

    The frame is rebuilt column by column, so no pandas ``attrs`` (which pandas copies
    through selections, and pyarrow writes into the file's pandas metadata) survive, and
    the Parquet schema keeps one metadata key, pandas' description of the columns, with any
    ``attributes`` entry removed. Every public table of a release goes through here
    (``tests/test_release_metadata.py`` fills every metadata slot of an input with a marker
    and searches the release for it).
    """
    import pyarrow.parquet as pq

    clean = values_only(frame)
    if path.suffix == ".csv":
        clean.to_csv(path, index=False)
        return
    pq.write_table(_public_arrow(clean), path)


def _public_arrow(clean: pd.DataFrame):
    """``clean`` as an Arrow table whose schema keeps only pandas' column description."""
    import pyarrow as pa

    table = pa.Table.from_pandas(clean, preserve_index=False)
    description = json.loads(table.schema.metadata[b"pandas"])
    description.pop("attributes", None)
    return table.replace_schema_metadata({b"pandas": json.dumps(description).encode()})


def write_public_parts(parts, path: Path) -> None:
    """:func:`write_public_table` of the rows of ``parts`` (frames of the same columns, in
    order), one part at a time: a long table (the sets) never stands whole in memory. Each
    part goes through :func:`values_only`; a Parquet file gets one or more row groups a
    part, a CSV one header."""
    import pyarrow.parquet as pq

    writer = None
    try:
        for number, part in enumerate(parts):
            clean = values_only(part)
            del part
            if path.suffix == ".csv":
                first = number == 0
                clean.to_csv(path, index=False, header=first, mode="w" if first else "a")
                continue
            table = _public_arrow(clean)
            del clean
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
