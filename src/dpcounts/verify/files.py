"""Topic ``files``: the manifest is one this version reads, within the verifier's bounds;
the folder holds exactly the files it lists, with their SHA-256; its README is written from
the manifest; the steward's signature."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from dpcounts.io import sha256_file
from dpcounts.release import folder
from dpcounts.release.manifest import RELEASE_FORMAT, schema
from dpcounts.release.readme import ENTRY, MAX_README_BYTES, README, readme_text
from dpcounts.release.signature import SIGNATURE
from dpcounts.verify.checks import FAIL, OK, WARNING, Check, CheckSpec, _check, register
from dpcounts.verify.readers import (
    MAX_ENTRIES,
    MAX_KEYS,
    MAX_MANIFEST_BYTES,
    MAX_ROWS,
    MAX_STRATA,
    _Release,
    regular_file,
)
from dpcounts.verify.words import shown

register(
    CheckSpec("files", "manifest",
              "The manifest's own checks ran: a field they could not read fails here, with "
              "the reason, never a traceback."),
    CheckSpec("files", "format",
              "`dpcounts_release_format` is the one this version reads: the fields of another "
              "format may mean other things."),
    CheckSpec("files", "schema",
              "The manifest follows `dpcounts.release.manifest.SCHEMA` and its budget is "
              "finite: every later check reads its fields."),
    CheckSpec("files", "not checked",
              "After a manifest this version does not read (format or schema failed) nothing "
              "else is checked, and that is a failure."),
    CheckSpec("files", "bounds",
              f"`sets` x `strata` rows (at most {MAX_ROWS // 10**6} M), the strata "
              f"({MAX_STRATA // 10**6} M) and the keys ({MAX_KEYS}) are "
              "within the verifier's bounds, decided before any table is read: a manifest "
              "cannot make it allocate without limit."),
    CheckSpec("files", "listed files",
              f"The listing's checks ran: a folder they could not read (more than {MAX_ENTRIES} "
              "entries) fails here, with the reason."),
    CheckSpec("files", "{file} path",
              "The path of the listed file `{file}` is a plain file name in the folder: no "
              "`..`, no sub-folder, nothing outside it."),
    CheckSpec("files", "names",
              "`files` names only `synthetic`, `hyperparameters`, `prior` and `readme`, each "
              "file once."),
    CheckSpec("files", "regular files",
              "Every entry of the folder is a regular file or folder: a symbolic link may "
              "point outside it, a pipe or a device may block or never end."),
    CheckSpec("files", "nothing unlisted",
              "The folder holds exactly the files `files` lists (the manifest aside): nothing "
              "published by mistake rides along."),
    CheckSpec("files", "{file} sha256",
              "The listed file `{file}` is there, a regular file no larger than the "
              "manifest's rows can need, with its listed `sha256`."),
    CheckSpec("files", "readme",
              f"The listed `{README}` is the page this version writes from the manifest "
              "(its numbers the manifest's, nothing else published): a page edited after the "
              "release fails; one written by another version and differing is a warning. A "
              "release made before the page existed lists none, and that is said."),
    CheckSpec("files", "signature",
              f"With `--key PUBLIC`, the steward's public key: `{SIGNATURE}` is that key's "
              "Ed25519 signature of the manifest as published, and every listed file has the "
              "SHA-256 the signed manifest lists (nothing changed since the steward signed); "
              "an unsigned folder fails. Without it, a signature file is well formed and said "
              "not checked, and an unsigned folder is said unsigned."),
)  # fmt: skip


def _manifest_checks(release: _Release):
    import jsonschema

    data = release.manifest
    out = []
    version = data.get(folder.FORMAT_KEY)
    readable = version == RELEASE_FORMAT
    out.append(
        _check(
            "files", "format", OK if readable else FAIL,
            f"{folder.FORMAT_KEY} {shown(repr(version), 60)}; this version reads {RELEASE_FORMAT}",
            {
                "format": version if isinstance(version, int | float) else shown(repr(version), 60),
                "reads": RELEASE_FORMAT,
            },
        )
    )  # fmt: skip
    errors = sorted(jsonschema.Draft202012Validator(schema()).iter_errors(data), key=str)
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(top)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        detail = f"at {shown(where, 80)}: {shown(first.message, 160)}{more}"
        out.append(_check("files", "schema", FAIL, detail))
        return out, False
    finite = all(math.isfinite(float(data["budget"][k])) for k in ("epsilon_total", "delta_total"))
    out.append(
        _check(
            "files", "schema", OK if finite else FAIL,
            "manifest.json follows dpcounts.release.manifest.SCHEMA"
            + ("" if finite else ", but its budget is not finite"),
        )
    )  # fmt: skip
    return out, readable and finite


def _not_checked(manifest: dict) -> Check:
    """The failure that ends a verification once the manifest is not one this version
    reads (its format or schema failed)."""
    return _check(
        "files", "not checked", FAIL,
        "the manifest is not one this version reads (format "
        f"{shown(repr(manifest.get(folder.FORMAT_KEY)), 60)}, schema of format "
        f"{RELEASE_FORMAT}): "
        "nothing else was checked",
    )  # fmt: skip


def _bounds_check(manifest: dict, over: list[str]) -> Check:
    """Whether the manifest's shape is within the verifier's bounds (``over``, what
    :func:`dpcounts.verify.readers.bounds` says it asks beyond them)."""
    return _check(
        "files", "bounds", FAIL if over else OK,
        ("; ".join(over) + ": more than this verifier reads; nothing else was checked")
        if over
        else f"{manifest['sets']} x {manifest['strata']} rows, {len(manifest['keys'])} "
             f"key(s): within the verifier's bounds ({MAX_ROWS} rows, {MAX_STRATA} "
             "strata)",
    )  # fmt: skip


#: The files a release lists, by name in the manifest's ``files``.
LISTED = ("synthetic", "hyperparameters", "prior", ENTRY)


def _file_checks(release: _Release):
    out = []
    listed = {}
    names = list(release.manifest["files"])
    unknown = [shown(repr(n), 60) for n in names if n not in LISTED]
    for name, entry in release.manifest["files"].items():
        try:
            listed.setdefault(release.file(name).name, []).append((name, entry))
        except ValueError as err:
            out.append(_check("files", "{file} path", FAIL, str(err), file=shown(name, 40)))
    twice = [shown(p, 80) for p, found in listed.items() if len(found) > 1]
    listed = {p: found[0] for p, found in listed.items()}
    out.append(
        _check(
            "files", "names", FAIL if unknown or twice else OK,
            (f"the manifest lists {', '.join(unknown[:5]) or 'no other file'} beyond "
             f"{', '.join(LISTED)}; files listed twice: {', '.join(twice[:5]) or 'none'}")
            if unknown or twice
            else f"the manifest lists {', '.join(n for n in LISTED if n in names)}, each once",
        )
    )  # fmt: skip
    entries = release.entries()
    irregular = [
        p.relative_to(release.path).as_posix()
        for p in entries
        if p.is_symlink() or not (regular_file(p) or p.is_dir())
    ]
    out.append(
        _check(
            "files", "regular files", FAIL if irregular else OK,
            (f"{len(irregular)} entr(y/ies) not a regular file or folder (a symbolic link may "
             f"point outside the folder): {shown(', '.join(irregular[:5]))}") if irregular
            else "every entry is a regular file or folder, no symbolic link",
            {"irregular": [shown(p) for p in irregular]},
        )
    )  # fmt: skip
    present = sorted(
        p.relative_to(release.path).as_posix() + ("/" if p.is_dir() and not p.is_symlink() else "")
        for p in entries
    )
    names_present = set(present)
    present = [p for p in present if p not in (folder.MANIFEST, SIGNATURE)]
    unlisted = [p for p in present if p not in listed]
    out.append(
        _check(
            "files", "nothing unlisted", FAIL if unlisted else OK,
            (f"{len(unlisted)} file(s) in the folder the manifest does not list: "
             f"{shown(', '.join(unlisted))}") if unlisted
            else f"the folder holds {len(present)} file(s) besides the manifest"
                 f"{' and its signature' if SIGNATURE in names_present else ''}, all listed",
            {"unlisted": [shown(p) for p in unlisted]},
        )
    )  # fmt: skip
    for file_name, (name, entry) in sorted(listed.items()):
        path = release.path / file_name
        entry_name = name
        name, file_name = shown(name, 40), shown(file_name, 80)
        if not regular_file(path):
            why = "missing" if not os.path.lexists(path) else "not a regular file"
            out.append(
                _check("files", "{file} sha256", FAIL, f"{file_name}: listed but {why}", file=name)
            )
            continue
        size, largest = path.stat().st_size, release.largest(name)
        if size > largest:
            out.append(
                _check("files", "{file} sha256", FAIL,
                       f"{file_name}: {size} bytes, more than the manifest's rows can need "
                       f"({largest}); not read", file=name)
            )  # fmt: skip
            continue
        actual = sha256_file(path)
        release.hashes[entry_name] = actual
        same = actual == entry["sha256"]
        detail = (
            f"{file_name}: sha256 {actual[:16]}... as listed"
            if same
            else f"{file_name}: sha256 {actual[:16]}..., listed {entry['sha256'][:16]}..."
        )
        out.append(
            _check("files", "{file} sha256", OK if same else FAIL, detail,
                   {"path": file_name, "sha256": actual, "listed": entry["sha256"]}, file=name)
        )  # fmt: skip
    out.append(_readme_check(release))
    return out, True


def _readme_check(release: _Release) -> Check:
    """Whether the listed README is the page :func:`readme_text` writes from the manifest
    (a release without one: said, not failed)."""
    import dpcounts

    manifest = release.manifest
    if ENTRY not in manifest["files"]:
        return _check("files", "readme", OK,
                      f"no {README} listed: a release made before dpcounts wrote one",
                      {"state": "absent"})  # fmt: skip
    try:
        path = release.file(ENTRY)
    except ValueError as err:  # a path outside the folder: failed by "{file} path" too
        return _check("files", "readme", FAIL, shown(err, 200), {"state": "unreadable"})
    shown_path = shown(path.name, 80)
    if not regular_file(path) or path.stat().st_size > MAX_README_BYTES:
        return _check("files", "readme", FAIL,
                      f"{shown_path}: listed but missing, not a regular file or more than "
                      f"{MAX_README_BYTES} bytes", {"state": "unreadable"})  # fmt: skip
    try:
        found = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return _check("files", "readme", FAIL, f"{shown_path}: not UTF-8 text",
                      {"state": "unreadable"})  # fmt: skip
    try:
        expected = readme_text(manifest)
    except (KeyError, TypeError, ValueError) as err:  # a field the schema lets through
        return _check("files", "readme", FAIL,
                      f"the page could not be written from the manifest: {shown(err, 120)}",
                      {"state": "unreadable"})  # fmt: skip
    if found == expected:
        return _check("files", "readme", OK,
                      f"{shown_path} is the page written from the manifest: its numbers are "
                      "the manifest's", {"state": "as written"})  # fmt: skip
    writer, reader = manifest["dpcounts_version"], dpcounts.__version__
    if writer != reader:
        return _check("files", "readme", WARNING,
                      f"{shown_path} differs from the page this version ({reader}) writes from "
                      f"the manifest; it was written by dpcounts {shown(writer, 40)}, so its "
                      "words may differ: read it beside manifest.json",
                      {"state": "other version"})  # fmt: skip
    return _check("files", "readme", FAIL,
                  f"{shown_path} is not the page written from the manifest: changed since "
                  "the release (its words or numbers may not be the manifest's)",
                  {"state": "changed"})  # fmt: skip


def _signature_checks(release: _Release):
    """The steward's signature (:mod:`dpcounts.release.signature`): without a key, whether
    the folder is signed (a well-formed signature file, not checked) or not; with ``--key``, the
    signature is the key's, of the manifest's bytes as they are now, and every file the
    signed manifest lists has the SHA-256 it lists (found by :func:`_file_checks`)."""
    from dpcounts.release.signature import SignatureError, message, read_signature

    key, path = release.key, release.path / SIGNATURE
    given = f"the given key {key.id}" if key is not None else ""
    if not os.path.lexists(path):
        if key is None:
            return [
                _check("files", "signature", OK,
                       f"unsigned: no {SIGNATURE}, so nothing shows the folder is as its "
                       "steward published it (dpcounts synthesize --sign-key)",
                       {"state": "unsigned"})
            ], True  # fmt: skip
        return [
            _check("files", "signature", FAIL,
                   f"no {SIGNATURE}: the folder is unsigned, so nothing shows it is what the "
                   f"steward of {given} published", {"state": "unsigned"})
        ], True  # fmt: skip
    if not regular_file(path):
        return [
            _check("files", "signature", FAIL, f"{SIGNATURE} is not a regular file",
                   {"state": "failed"})
        ], True  # fmt: skip
    try:
        found = read_signature(path)
    except SignatureError as err:
        return [_check("files", "signature", FAIL, shown(err, 200), {"state": "failed"})], True
    signer = found["key"].id
    if key is None:
        return [
            _check("files", "signature", OK,
                   f"{SIGNATURE} names the key {signer}; not checked: verify with --key PUBLIC, "
                   "the steward's public key obtained apart from the folder",
                   {"state": "not checked", "key_id": signer})
        ], True  # fmt: skip
    if key.path is not None and Path(key.path).resolve().is_relative_to(release.path.resolve()):
        return [
            _check("files", "signature", FAIL,
                   f"--key {shown(key.path, 120)} lies inside the release folder: a key the "
                   "folder brings proves nothing; give the steward's public key from elsewhere",
                   {"state": "failed", "key_id": signer})
        ], True  # fmt: skip
    if found["key"].raw != key.raw:
        return [
            _check("files", "signature", FAIL,
                   f"signed by the key {signer}, not by {given}",
                   {"state": "failed", "key_id": signer})
        ], True  # fmt: skip
    manifest_path = release.path / folder.MANIFEST
    if not regular_file(manifest_path) or manifest_path.stat().st_size > MAX_MANIFEST_BYTES:
        raise ValueError(
            f"{folder.MANIFEST} is not a regular file of at most {MAX_MANIFEST_BYTES} bytes"
        )
    manifest = manifest_path.read_bytes()
    if not key.verifies(found["signature"], message(manifest)):
        return [
            _check("files", "signature", FAIL,
                   f"the signature by {given} does not match {folder.MANIFEST}: the manifest "
                   "changed since the steward signed it (or the signature did)",
                   {"state": "failed", "key_id": signer})
        ], True  # fmt: skip
    listed = json.loads(manifest.decode("utf-8"))["files"]  # the signed listing
    changed = [
        shown(entry["path"], 80)
        for name, entry in sorted(listed.items())
        if release.hashes.get(name) != entry["sha256"]
    ]
    if changed:
        return [
            _check("files", "signature", FAIL,
                   f"the manifest is as signed by {given}, but {', '.join(changed[:5])} "
                   "do(es) not have the SHA-256 it lists (or could not be read): changed "
                   "since the steward signed",
                   {"state": "failed", "key_id": signer, "changed": changed})
        ], True  # fmt: skip
    return [
        _check("files", "signature", OK,
               f"signed by {given}: {folder.MANIFEST} and the {len(listed)} file(s) it lists "
               "are as the steward signed them, nothing changed since",
               {"state": "verified", "key_id": signer})
    ], True  # fmt: skip
