"""Compare the artifacts of two pipeline runs: is every table and figure unchanged?

    python tools/compare_runs.py BEFORE AFTER [--rename OLD=NEW ...]

BEFORE and AFTER are run folders, each with the ``results/`` and ``figures/`` a run
writes. Every file under them is compared with its namesake in the other run:

- the same set of files in both (a file of BEFORE missing from AFTER, or one only AFTER
  has, is a difference);
- Parquet (and CSV) tables by content: the same columns in the same order, the same
  dtypes, the same index, every value exactly equal (NaN equals NaN); ``--rename OLD=NEW``
  (repeatable) says that a column OLD of BEFORE is NEW in AFTER, on purpose (in every
  table of BEFORE with a column OLD whose namesake in AFTER has none);
- JSON and YAML by their parsed content (NaN equals NaN); a dotted ``--rename
  OLD.PATH=NEW.PATH`` (e.g. ``study1.mechanisms=study1.arms``) says that a key of BEFORE's
  documents moved, on purpose (column renames have no dot and apply to tables only);
  ``--added PATH`` (repeatable; dotted, ``*`` standing for any one key or list index, e.g.
  ``studies.*.title``) says that keys of AFTER's documents at PATH that BEFORE lacks are
  new on purpose (a new config key in results/run_config.yaml): they are left out;
- PNG, PDF and anything else by bytes; a PNG whose bytes differ is read with matplotlib's
  image reader to tell a change of metadata only (same pixels) from a visual one.

Excluded (with the reason printed): see ``EXCLUDED``. The tiny run (config/test/config.yaml)
writes no log, benchmark, timestamp or other per-run file under results/ or figures/: its
logs and benchmark TSVs go to ``logs/``, the report to ``report.html``, neither compared;
two runs of the same commit are the same bytes, file for file. A new per-run file belongs
in ``EXCLUDED``, with its reason.

Prints a short table; the exit status is 0 when nothing differs, 1 when anything does, 2
when a folder is not a run folder. Standard library, numpy, pandas and matplotlib only (and
PyYAML when present; without it YAML is compared as text): no dpcounts, so it compares runs
of any two versions of the library. Tests call ``main(argv)`` in process.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

#: The folders of a run folder that hold its artifacts.
FOLDERS = ("results", "figures")

#: (pattern on the path relative to the run folder, why it is not compared). A pattern
#: without "/" matches a file's name in any folder.
EXCLUDED = (
    ("results/README.md", "documentation kept in git beside the artifacts, not written by a run"),
    ("figures/README.md", "documentation kept in git beside the artifacts, not written by a run"),
    (".*", "hidden file: Snakemake's bookkeeping (e.g. .snakemake_timestamp), not an artifact"),
)

#: How many differing files, and lines per file, are detailed.
MAX_DETAILS = 40


@dataclass(frozen=True)
class Outcome:
    """One file's comparison: ``status`` is same, differs, missing (only in BEFORE), extra
    (only in AFTER) or excluded; ``kind`` the comparison used; ``detail`` what differs."""

    path: str
    status: str
    kind: str
    detail: str = ""


def run_files(run: Path) -> dict[str, Path]:
    """Every file under the run's results/ and figures/, by path relative to ``run``."""
    out = {}
    for folder in FOLDERS:
        root = run / folder
        if root.is_dir():
            for path in sorted(root.rglob("*")):
                if path.is_file():
                    out[path.relative_to(run).as_posix()] = path
    return out


def exclusion(relative: str) -> str | None:
    """Why ``relative`` is not compared, or None."""
    name = relative.rsplit("/", 1)[-1]
    for pattern, reason in EXCLUDED:
        target = relative if "/" in pattern else name
        if fnmatch.fnmatchcase(target, pattern):
            return reason
    return None


def kind_of(relative: str) -> str:
    suffix = Path(relative).suffix.lower()
    return {
        ".parquet": "parquet",
        ".csv": "csv",
        ".json": "json",
        ".yaml": "yaml",
        ".yml": "yaml",
        ".png": "png",
    }.get(suffix, "bytes")


# --- values -------------------------------------------------------------------------------


def _is_nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _number(value) -> bool:
    return isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_))


def same_value(a, b) -> bool:
    """Deep equality of parsed values: NaN equals NaN, a bool is not a number."""
    return not list(value_differences(a, b, "", limit=1))


def value_differences(a, b, where: str, limit: int = 5):
    """Yield up to ``limit`` descriptions of where two parsed values (JSON, YAML, cells)
    differ, each naming its path (``key[0].name``)."""
    found = 0

    def walk(x, y, at):
        nonlocal found
        if found >= limit or x is y:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for key in list(x) + [k for k in y if k not in x]:
                here = f"{at}.{key}" if at else str(key)
                if key not in y:
                    found += 1
                    yield f"{here}: only in before"
                elif key not in x:
                    found += 1
                    yield f"{here}: only in after"
                else:
                    yield from walk(x[key], y[key], here)
            return
        sequences = (list, tuple, np.ndarray)
        if isinstance(x, sequences) and isinstance(y, sequences):
            if len(x) != len(y):
                found += 1
                yield f"{at or '.'}: length {len(x)} != {len(y)}"
                return
            for i, (u, v) in enumerate(zip(x, y, strict=True)):
                yield from walk(u, v, f"{at}[{i}]")
            return
        if _number(x) and _number(y):
            if x == y or (math.isnan(float(x)) and math.isnan(float(y))):
                return
        elif type(x) is type(y) and (x == y or (_is_nan(x) and _is_nan(y))):
            return
        found += 1
        yield f"{at or '.'}: {x!r} != {y!r}"

    yield from walk(a, b, where)


# --- tables -------------------------------------------------------------------------------


def _unequal(a: pd.Series, b: pd.Series) -> np.ndarray:
    """Boolean mask of the rows where two columns of the same dtype differ (NaN == NaN)."""
    x, y = a.to_numpy(), b.to_numpy()
    if x.dtype.kind in "biufcmM" and y.dtype.kind in "biufcmM":
        equal = x == y
        if x.dtype.kind in "fcmM":
            equal |= pd.isna(x) & pd.isna(y)
        return ~np.asarray(equal, dtype=bool)
    return np.array([not same_value(u, v) for u, v in zip(x, y, strict=True)], dtype=bool)


def _cell(value) -> str:
    text = repr(value.item() if isinstance(value, np.generic) else value)
    return text if len(text) <= 40 else text[:37] + "..."


def frame_differences(before: pd.DataFrame, after: pd.DataFrame) -> list[str]:
    """What differs between two tables: columns, dtypes, shape, index, values."""
    if list(before.columns) != list(after.columns):
        gone = [c for c in before.columns if c not in after.columns]
        new = [c for c in after.columns if c not in before.columns]
        if gone or new:
            return [f"columns only in before {gone}, only in after {new}"]
        return [f"column order {list(before.columns)} -> {list(after.columns)}"]
    problems = [
        f"column {c!r}: dtype {before[c].dtype} -> {after[c].dtype}"
        for c in before.columns
        if before[c].dtype != after[c].dtype
    ]
    if problems:
        return problems
    if len(before) != len(after):
        return [f"{len(before)} rows -> {len(after)} rows"]
    if not before.index.equals(after.index) or before.index.dtype != after.index.dtype:
        return ["the index differs"]
    for column in before.columns:
        mask = _unequal(before[column], after[column])
        if not mask.any():
            continue
        rows = np.flatnonzero(mask)
        first = rows[0]
        text = (
            f"column {column!r}: {len(rows)} of {len(mask)} values differ, first at row "
            f"{first}: {_cell(before[column].iloc[first])} -> {_cell(after[column].iloc[first])}"
        )
        if before[column].dtype.kind in "iuf":
            delta = np.abs(
                before[column].to_numpy(float)[rows] - after[column].to_numpy(float)[rows]
            )
            if np.isfinite(delta).any():
                text += f" (largest |difference| {np.nanmax(delta):.3g})"
        problems.append(text)
    return problems


def compare_tables(before: pd.DataFrame, after: pd.DataFrame, renames: dict) -> list[str]:
    """``renames`` (OLD -> NEW) apply to the tables whose BEFORE has OLD and AFTER has not."""
    applied = {
        old: new for old, new in renames.items() if old in before.columns and old not in after
    }
    return frame_differences(before.rename(columns=applied), after)


# --- files --------------------------------------------------------------------------------


def _load_yaml(path: Path):
    try:
        import yaml
    except ImportError:  # compare the text instead
        return path.read_text()
    return yaml.safe_load(path.read_text())


def png_difference(before: Path, after: Path) -> str:
    """Bytes differ: is it the pixels or the metadata only?"""
    from matplotlib import image as mpimg

    try:
        x, y = mpimg.imread(before), mpimg.imread(after)
    except Exception as error:  # an unreadable image is a difference
        return f"bytes differ; unreadable image: {error}"
    if x.shape != y.shape:
        return f"image size {x.shape} -> {y.shape}"
    delta = np.abs(x.astype(float) - y.astype(float))
    changed = delta.reshape(x.shape[0], x.shape[1], -1).max(axis=2) > 0
    if not changed.any():
        return "bytes differ, pixels equal (metadata only)"
    scale = 255 if x.dtype.kind == "f" else 1
    return (
        f"pixels differ: {int(changed.sum())} of {changed.size}, largest channel difference "
        f"{delta.max() * scale:.0f}/255"
    )


def rename_keys(document, renames: dict):
    """``document`` with each dotted key path OLD of ``renames`` moved to NEW (where OLD
    exists and NEW does not); undotted renames are table columns and are left alone."""
    for old, new in renames.items():
        if "." not in old:
            continue
        *old_parents, old_key = old.split(".")
        *new_parents, new_key = new.split(".")
        source = document
        for key in old_parents:
            source = source.get(key) if isinstance(source, dict) else None
        if not isinstance(source, dict) or old_key not in source:
            continue
        target = document
        for key in new_parents:
            target = target.setdefault(key, {}) if isinstance(target, dict) else None
        if isinstance(target, dict) and new_key not in target:
            target[new_key] = source.pop(old_key)
    return document


def drop_added(before, after, added):
    """``after`` without the keys that ``before`` lacks at a path of ``added`` (dotted key
    paths, ``*`` for any one key or list index): the keys added on purpose."""
    patterns = [tuple(path.split(".")) for path in added]

    def named(path):
        return any(
            len(pattern) == len(path)
            and all(p in ("*", k) for p, k in zip(pattern, path, strict=True))
            for pattern in patterns
        )

    def walk(old, new, path):
        if isinstance(new, dict):
            old = old if isinstance(old, dict) else {}
            return {key: walk(old.get(key), value, (*path, str(key)))
                    for key, value in new.items()
                    if key in old or not named((*path, str(key)))}  # fmt: skip
        if isinstance(new, list):
            old = old if isinstance(old, list) else []
            return [walk(old[i] if i < len(old) else None, value, (*path, str(i)))
                    for i, value in enumerate(new)]  # fmt: skip
        return new

    return walk(before, after, ())


def compare_file(relative: str, before: Path, after: Path, renames: dict, added=()) -> Outcome:
    kind = kind_of(relative)
    if before.read_bytes() == after.read_bytes():
        return Outcome(relative, "same", kind)
    try:
        if kind in ("parquet", "csv"):
            read = pd.read_parquet if kind == "parquet" else pd.read_csv
            problems = compare_tables(read(before), read(after), renames)
        elif kind in ("json", "yaml"):
            load = (lambda p: json.loads(p.read_text())) if kind == "json" else _load_yaml
            old_doc = rename_keys(load(before), renames)
            new_doc = drop_added(old_doc, load(after), added)
            problems = list(value_differences(old_doc, new_doc, ""))
        elif kind == "png":
            problems = [png_difference(before, after)]
        else:
            problems = ["bytes differ"]
    except Exception as error:  # a file that cannot be read is a difference
        problems = [f"cannot compare: {type(error).__name__}: {error}"]
    if not problems:
        return Outcome(relative, "same", kind, "same content, bytes differ")
    return Outcome(relative, "differs", kind, "; ".join(problems))


def compare_runs(before: Path, after: Path, renames: dict | None = None,
                 added=()) -> list[Outcome]:  # fmt: skip
    """Every file of either run, compared (see the module docstring)."""
    renames = renames or {}
    old, new = run_files(Path(before)), run_files(Path(after))
    outcomes = []
    for relative in sorted(set(old) | set(new)):
        reason = exclusion(relative)
        if reason is not None:
            outcomes.append(Outcome(relative, "excluded", kind_of(relative), reason))
        elif relative not in new:
            outcomes.append(Outcome(relative, "missing", kind_of(relative), "only in before"))
        elif relative not in old:
            outcomes.append(Outcome(relative, "extra", kind_of(relative), "only in after"))
        else:
            outcomes.append(compare_file(relative, old[relative], new[relative], renames, added))
    return outcomes


# --- report -------------------------------------------------------------------------------

STATUSES = ("same", "differs", "missing", "extra")


def report(outcomes: list[Outcome], before: Path, after: Path) -> str:
    counts = Counter((o.kind, o.status) for o in outcomes if o.status != "excluded")
    kinds = sorted({kind for kind, _ in counts})
    lines = [f"before: {before}", f"after:  {after}", ""]
    lines.append(f"{'kind':<8}" + "".join(f"{s:>9}" for s in STATUSES))
    for kind in kinds:
        lines.append(f"{kind:<8}" + "".join(f"{counts[kind, s]:>9}" for s in STATUSES))
    total = [sum(counts[k, s] for k in kinds) for s in STATUSES]
    lines.append(f"{'all':<8}" + "".join(f"{n:>9}" for n in total))
    excluded = [o for o in outcomes if o.status == "excluded"]
    if excluded:
        lines.append("")
        for reason in dict.fromkeys(o.detail for o in excluded):
            paths = [o.path for o in excluded if o.detail == reason]
            lines.append(f"excluded {', '.join(paths)}: {reason}")
    bad = [o for o in outcomes if o.status not in ("same", "excluded")]
    if bad:
        lines.append("")
        for o in bad[:MAX_DETAILS]:
            lines.append(f"{o.status.upper():<8} {o.path}: {o.detail}")
        if len(bad) > MAX_DETAILS:
            lines.append(f"... and {len(bad) - MAX_DETAILS} more")
    lines.append("")
    lines.append(
        f"DIFFERENT: {len(bad)} of {len(outcomes) - len(excluded)} files"
        if bad
        else f"IDENTICAL: {total[0]} files"
    )
    return "\n".join(lines)


def parse_rename(text: str) -> tuple[str, str]:
    old, sep, new = text.partition("=")
    if not sep or not old or not new:
        raise argparse.ArgumentTypeError(f"--rename expects OLD=NEW, got {text!r}")
    return old, new


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="run folder (results/, figures/) before")
    parser.add_argument("after", type=Path, help="run folder after")
    parser.add_argument(
        "--rename",
        type=parse_rename,
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="a table column OLD of BEFORE is NEW in AFTER, on purpose; with dots, a key "
        "path of its JSON/YAML documents (repeatable)",
    )
    parser.add_argument(
        "--added",
        action="append",
        default=[],
        metavar="PATH",
        help="keys of AFTER's JSON/YAML documents at the dotted PATH ('*': any one key or "
        "list index) that BEFORE lacks are new on purpose (repeatable)",
    )
    args = parser.parse_args(argv)
    for run in (args.before, args.after):
        if not any((run / folder).is_dir() for folder in FOLDERS):
            print(f"{run}: not a run folder (no {' or '.join(FOLDERS)}/)", file=sys.stderr)
            return 2
    renames = dict(args.rename)
    outcomes = compare_runs(args.before, args.after, renames, args.added)
    print(report(outcomes, args.before, args.after))
    return 1 if any(o.status not in ("same", "excluded") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
