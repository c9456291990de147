"""A folder as a release: whether it is one (:func:`load_manifest`), and every check of
it, topic by topic (:func:`verify_release`, :func:`report`)."""

from __future__ import annotations

import json
from pathlib import Path

from dpcounts.release import folder
from dpcounts.verify.checks import FAIL, Check, UnregisteredCheck, _check
from dpcounts.verify.files import (
    _bounds_check,
    _file_checks,
    _manifest_checks,
    _not_checked,
    _signature_checks,
)
from dpcounts.verify.hyperparameters import _hyper_checks
from dpcounts.verify.metadata import _metadata_checks
from dpcounts.verify.promise import _promise_checks
from dpcounts.verify.readers import MAX_MANIFEST_BYTES, _give_back, _Release, bounds, regular_file
from dpcounts.verify.synthetic import _synthetic_checks
from dpcounts.verify.words import shown


class NotARelease(ValueError):
    """The folder does not exist or holds no dpcounts release (a usage error)."""


def load_manifest(path: Path) -> tuple[dict | None, str | None]:
    """(manifest, None); :class:`NotARelease` (one line, exit 2) when the folder is missing,
    is not a dpcounts release, or its manifest is no JSON object this verifier reads (not a
    regular file, too large, invalid or too deeply nested JSON)."""
    path = Path(path)
    expected = (
        "expected a dpcounts release folder, the public folder `dpcounts synthesize --out`\n"
        f"writes: {folder.MANIFEST} (with {folder.FORMAT_KEY!r}), synthetic.*, "
        "hyperparameters.*"
    )
    if not path.exists():
        raise NotARelease(f"{path}: no such folder;\n{expected}")
    if not path.is_dir():
        raise NotARelease(f"{path}: is not a folder;\n{expected}")
    manifest = path / folder.MANIFEST
    if manifest.is_symlink() or (manifest.exists() and not regular_file(manifest)):
        raise NotARelease(
            f"{manifest}: is not a regular file (a symbolic link, a folder or a device); "
            "expected the release's own manifest"
        )
    if not manifest.is_file():
        raise NotARelease(f"{path}: has no {folder.MANIFEST}, so it is not a release;\n{expected}")
    size = manifest.stat().st_size
    if size > MAX_MANIFEST_BYTES:
        raise NotARelease(
            f"{manifest}: {size} bytes, more than any manifest ({MAX_MANIFEST_BYTES}); "
            "expected a dpcounts release manifest"
        )
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as err:
        reason = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        raise NotARelease(
            f"{manifest}: is not valid JSON ({reason.splitlines()[0][:120]}); expected a "
            "dpcounts release manifest"
        ) from None
    if not isinstance(data, dict) or folder.FORMAT_KEY not in data:
        raise NotARelease(
            f"{manifest}: is JSON but not a dpcounts manifest (no {folder.FORMAT_KEY!r});\n"
            f"{expected}"
        )
    return data, None


def verify_release(path: Path, key=None) -> list[Check]:
    """Every check of the release in ``path``, in topic order (:data:`dpcounts.verify.TOPICS`);
    ``key``, the steward's public key (:class:`dpcounts.release.signature.PublicKey`, or a
    path to one), checks the folder's signature with it.

    Raises :class:`NotARelease` when ``path`` is missing or holds no dpcounts manifest;
    anything wrong inside a release is a failed :class:`Check`, never an exception.
    """
    path = Path(path)
    manifest, _ = load_manifest(path)
    if key is not None and not hasattr(key, "raw"):
        from dpcounts.release.signature import load_public_key

        key = load_public_key(Path(key))
    release = _Release(path, manifest, key)
    checks: list[Check] = []
    readable = _run(checks, "files", "manifest", _manifest_checks, release)
    if not readable:
        checks.append(_not_checked(manifest))
        return checks
    over = bounds(manifest)
    checks.append(_bounds_check(manifest, over))
    if over:
        return checks
    _run(checks, "files", "listed files", _file_checks, release)
    _run(checks, "files", "signature", _signature_checks, release)
    _run(checks, "synthetic", "synthetic", _synthetic_checks, release)
    _run(checks, "hyperparameters", "hyperparameters", _hyper_checks, release)
    _run(checks, "promise", "promise", _promise_checks, release)
    _run(checks, "metadata", "metadata", _metadata_checks, release)
    return checks


def _run(checks: list[Check], topic: str, name: str, function, release: _Release):
    """Append ``function(release)``'s checks; a file or field it cannot read is a failure
    of its topic, not a crash (a tampered release may hold anything)."""
    try:
        found, result = function(release)
    except UnregisteredCheck:  # a mistake of the verifier, not a finding about the folder
        raise
    except Exception as err:  # a verifier reports, whatever the folder holds
        reason = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
        checks.append(_check(topic, name, FAIL, f"could not be checked: {shown(reason, 300)}"))
        return False
    checks.extend(found)
    _give_back()  # what the topic's checks no longer hold
    return result


def report(path: Path, key=None) -> tuple[list[Check], dict | None]:
    """:func:`verify_release` (with the steward's public ``key``, if given) and the
    manifest it read (None if it does not parse)."""
    checks = verify_release(path, key)
    manifest, _ = load_manifest(path)
    return checks, manifest
