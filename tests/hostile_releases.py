"""A corpus of hostile release folders for ``dpcounts verify`` (issue #34, item 3).

Each folder is built at test time from a valid small release (``test_release_verify.release``)
and then tampered with, the way a forger would: listed hashes made to agree where that
helps the attack, so that only the verifier's bounds stand between the folder and the
machine. No bomb is committed: each is a few hundred kilobytes at most once written, and
made in seconds.

:data:`HOSTILE` maps a name to a function ``make(out: Path) -> None`` tampering with the
valid release in ``out``; :data:`FORGED`, small forgeries each aimed at one check, maps a
name to the kind of valid release it starts from and such a function.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dpcounts.io import sha256_file
from dpcounts.release.manifest import RELEASE_FORMAT, guarantee

#: Rows of the dictionary-encoded row bomb (the audit's: 20 M rows in a 789 KB file).
BOMB_ROWS = 20_000_000
#: The length of each huge text (the audit's: 8 texts of 100 MB in 29 KB).
HUGE_TEXT = 100 * 2**20

#: What a terminal must not obey: a new line and a fake verdict, a colour, a screen clear.
ESCAPES = "\n  ok      everything\nPASSED: forged\x1b[31m\x1b[2J\r\x07\u202e"


def manifest_of(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def set_manifest(out: Path, manifest: dict) -> None:
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))


def relist(out: Path, name: str, manifest: dict | None = None) -> dict:
    """The manifest with the SHA-256 of the file ``name`` as it now is (a careful forger)."""
    manifest = manifest or manifest_of(out)
    manifest["files"][name]["sha256"] = sha256_file(out / manifest["files"][name]["path"])
    set_manifest(out, manifest)
    return manifest


def _table(out: Path, name: str) -> pa.Table:
    return pq.read_table(out / manifest_of(out)["files"][name]["path"])


def _set_sets(manifest: dict, sets: int, consistent: bool) -> None:
    """``sets`` sets; with ``consistent``, the budget and its statement made to agree."""
    manifest["sets"] = manifest["budget"]["sets"] = sets
    if consistent:
        b = manifest["budget"]
        b["epsilon_synthesis"] = sets * b["epsilon_per_set"]
        b["epsilon_total"] = b["epsilon_prior"] + b["epsilon_synthesis"]
        b["delta_total"] = sets * b["delta_per_set"]
        manifest["guarantee"] = guarantee(manifest["mechanism"], manifest["method"], b)


def row_bomb(out: Path, consistent: bool = False) -> None:
    """synthetic.parquet declaring :data:`BOMB_ROWS` rows: set 0 repeated set after set,
    its keys dictionary-encoded and its set numbers delta-encoded, so the file is small; the
    manifest's ``sets`` made to match. Without ``consistent`` the budget still says one
    set (so the verdict is FAILED after every row was read); with it the folder is a valid
    release of that many sets."""
    manifest = manifest_of(out)
    strata = manifest["strata"]
    one = _table(out, "synthetic")
    per_group = (1_000_000 // strata) * strata
    groups = math.ceil(BOMB_ROWS / per_group)
    sets = groups * per_group // strata
    path = out / manifest["files"]["synthetic"]["path"]
    keys = manifest["keys"]
    schema = one.schema.remove_metadata()
    stratum = pa.array(np.tile(np.arange(strata, dtype=np.int32), per_group // strata))
    columns = {c: one.column(c).combine_chunks().take(stratum) for c in one.column_names[1:]}
    with pq.ParquetWriter(
        path,
        schema,
        compression="zstd",
        use_dictionary=keys,
        column_encoding={"set": "DELTA_BINARY_PACKED"},
        write_statistics=False,
    ) as writer:
        for g in range(groups):
            first = g * per_group // strata
            numbers = np.repeat(np.arange(first, first + per_group // strata), strata)
            batch = {"set": pa.array(numbers), **columns}
            writer.write_table(pa.table(batch, schema=schema), row_group_size=per_group)
    _set_sets(manifest, sets, consistent)
    relist(out, "synthetic", manifest)


def huge_texts_in_hyperparameters(out: Path) -> None:
    """hyperparameters.parquet whose first key holds one text of :data:`HUGE_TEXT` bytes in
    every row, dictionary-encoded and compressed to a few kilobytes."""
    manifest = manifest_of(out)
    hyper = _table(out, "hyperparameters")
    key = manifest["keys"][0]
    huge = pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(hyper.num_rows, dtype=np.int32)), pa.array(["x" * HUGE_TEXT])
    )
    hyper = hyper.set_column(hyper.schema.get_field_index(key), key, huge)
    path = out / manifest["files"]["hyperparameters"]["path"]
    pq.write_table(hyper, path, compression="zstd", write_statistics=False)
    relist(out, "hyperparameters", manifest)


def long_keys_in_synthetic(out: Path) -> None:
    """synthetic.parquet whose first key's texts are 100 KB each (plainly encoded): too long
    for a key, small enough that the footer's sizes alone do not say so."""
    manifest = manifest_of(out)
    synthetic = _table(out, "synthetic")
    key = manifest["keys"][0]
    long = pa.array([f"{v}{'y' * 100_000}" for v in synthetic.column(key).to_pylist()])
    synthetic = synthetic.set_column(synthetic.schema.get_field_index(key), key, long)
    path = out / manifest["files"]["synthetic"]["path"]
    pq.write_table(synthetic, path, compression="zstd", use_dictionary=False)
    relist(out, "synthetic", manifest)


def strata_bomb(out: Path) -> None:
    """hyperparameters and synthetic of a million strata, the first stratum's row repeated,
    dictionary-encoded; the manifest's ``strata`` to match."""
    manifest = manifest_of(out)
    strata = 1_000_000
    index = pa.array(np.zeros(strata, dtype=np.int32))
    for name in ("hyperparameters", "synthetic"):
        table = _table(out, name)
        rows = table.take(index) if name == "hyperparameters" else table.slice(0, 1).take(index)
        path = out / manifest["files"][name]["path"]
        pq.write_table(rows.replace_schema_metadata(None), path, compression="zstd")
        relist(out, name, manifest)
    manifest["strata"] = strata
    set_manifest(out, manifest)
    relist(out, "synthetic")


def over_the_bounds(out: Path) -> None:
    """A manifest declaring a billion sets of its strata: refused before a file is read."""
    manifest = manifest_of(out)
    _set_sets(manifest, 1_000_000_000, consistent=True)
    set_manifest(out, manifest)


def footer_bomb(out: Path) -> None:
    """synthetic.parquet whose footer carries 16 MB of key-value metadata."""
    manifest = manifest_of(out)
    path = out / manifest["files"]["synthetic"]["path"]
    table = _table(out, "synthetic")
    table = table.replace_schema_metadata({"junk": "z" * (16 * 2**20)})
    pq.write_table(table, path)
    relist(out, "synthetic", manifest)


def nested_column(out: Path) -> None:
    """synthetic.parquet with a list column of ten million repeated numbers in one row."""
    manifest = manifest_of(out)
    path = out / manifest["files"]["synthetic"]["path"]
    table = _table(out, "synthetic")
    values = pa.array(np.zeros(10_000_000, dtype=np.int64))
    offsets = np.zeros(table.num_rows + 1, dtype=np.int32)
    offsets[1:] = len(values)
    listed = pa.ListArray.from_arrays(pa.array(offsets), values)
    table = table.set_column(table.num_columns - 1, table.column_names[-1], listed)
    pq.write_table(table, path, compression="zstd")
    relist(out, "synthetic", manifest)


def many_files(out: Path) -> None:
    """Twenty thousand unlisted empty files in the folder."""
    for i in range(20_000):
        (out / f"f{i}").touch()


def fifo(out: Path) -> None:
    """synthetic.parquet replaced by a named pipe (reading it would block forever)."""
    path = out / manifest_of(out)["files"]["synthetic"]["path"]
    path.unlink()
    os.mkfifo(path)


def nested_manifest(out: Path) -> None:
    """A manifest nested 100,000 deep."""
    depth = 100_000
    (out / "manifest.json").write_text(
        f'{{"dpcounts_release_format": {RELEASE_FORMAT}, "x": ' + "[" * depth + "]" * depth + "}"
    )


def escapes_in_the_manifest(out: Path) -> None:
    """Control characters and a fake verdict in ``mechanism``, a listed name, and an
    unlisted file's name: printed, they must be shown, not obeyed."""
    manifest = manifest_of(out)
    manifest["mechanism"] = f"pg{ESCAPES}"
    manifest["method"] = "x" * 100_000
    manifest["files"][f"notes{ESCAPES}"] = dict(manifest["files"]["synthetic"])
    set_manifest(out, manifest)
    (out / f"unlisted{ESCAPES.replace(chr(0x202E), '')}").write_text("x")


def escapes_in_a_listed_name(out: Path) -> None:
    """A schema-valid manifest listing a file under a name with control characters."""
    manifest = manifest_of(out)
    manifest["files"][f"notes{ESCAPES}"] = dict(manifest["files"]["hyperparameters"])
    set_manifest(out, manifest)


def escapes_in_column_names(out: Path) -> None:
    """hyperparameters.parquet whose columns are named with control characters."""
    manifest = manifest_of(out)
    path = out / manifest["files"]["hyperparameters"]["path"]
    table = _table(out, "hyperparameters")
    table = table.rename_columns([f"{c}{ESCAPES}" for c in table.column_names])
    pq.write_table(table.replace_schema_metadata(None), path)
    relist(out, "hyperparameters", manifest)


#: Every hostile folder of the corpus, by name.
HOSTILE = {
    "row bomb": row_bomb,
    "huge texts": huge_texts_in_hyperparameters,
    "long keys": long_keys_in_synthetic,
    "strata bomb": strata_bomb,
    "over the bounds": over_the_bounds,
    "footer bomb": footer_bomb,
    "nested column": nested_column,
    "many files": many_files,
    "fifo": fifo,
    "nested manifest": nested_manifest,
    "escapes in the manifest": escapes_in_the_manifest,
    "escapes in a listed name": escapes_in_a_listed_name,
    "escapes in column names": escapes_in_column_names,
}


# --- forgeries aimed at one check each --------------------------------------------------------
# Not bombs: small edits of a valid release's manifest that only one check is about, so that
# with the folders above the corpus reaches every check of dpcounts.verify.CHECKS
# (tests/test_release_verify_checks.py).


def _edit_prior(**prior):
    def make(out: Path) -> None:
        manifest = manifest_of(out)
        manifest["prior"].update(prior)
        set_manifest(out, manifest)

    return make


def budget_beyond_floats(out: Path) -> None:
    """An ``epsilon_total`` the schema lets through (a number) that no float can hold."""
    manifest = manifest_of(out)
    manifest["budget"]["epsilon_total"] = 10**400
    set_manifest(out, manifest)


def path_outside_the_folder(out: Path) -> None:
    """A listed path that leaves the folder."""
    manifest = manifest_of(out)
    manifest["files"]["hyperparameters"]["path"] = "../hyperparameters.parquet"
    set_manifest(out, manifest)


#: Every forgery, by name: (the kind of valid release of ``test_release_verify.KINDS`` it
#: is made from, the function that tampers with it).
FORGED = {
    "budget beyond floats": ("pg", budget_beyond_floats),
    "path outside the folder": ("pg", path_outside_the_folder),
    "prior said to be the overall rate": ("pg", _edit_prior(kind="total")),
    "prior of no groups and no source": ("pg", _edit_prior(groups=None)),
    "prior of a declared source": ("pg", _edit_prior(groups=None, declared_source="a census")),
    "count fit overridden": ("pg", _edit_prior(count_fit_check="overridden")),
    "prior file renamed": ("sanitised", _edit_prior(file="other.parquet")),
}
