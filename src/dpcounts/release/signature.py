"""The steward's signature of a release: Ed25519 over the manifest, which lists every file.

A steward makes a key pair once (``dpcounts keygen --out DIR``: a private key readable by
its owner only, and a public key to hand out), signs every release with the private one
(``dpcounts synthesize --sign-key PRIVATE``) and publishes the public one apart from the
releases (a web page, a paper's supplement). The signature is :data:`SIGNATURE` in the
release folder, written inside the same partial folder as the rest and installed with it
(:func:`dpcounts.release.folder.install`), so a failed run publishes neither. It signs
:data:`DOMAIN` followed by the bytes of ``manifest.json``; the manifest lists every other
public file with its SHA-256, so ``dpcounts verify --key PUBLIC`` shows that no public file
and no manifest field changed since the steward signed, and that the steward of that key
signed it. Without ``--key`` the verifier says the folder is signed but does not check it:
a signature checked against a key the folder itself brings would prove nothing.

The private key is never in the release: a key inside ``--out`` is refused before
anything is spent, like one that others can read. Keys are PEM files (PKCS #8 for the
private key, unencrypted; SubjectPublicKeyInfo for the public one), so OpenSSL
(``openssl genpkey -algorithm ed25519``) makes and reads them too. The signing library,
``cryptography``, is imported only by the functions that sign or check.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

#: The signature's file in the release folder, beside the manifest it signs.
SIGNATURE = "signature.json"
#: The manifest it signs (:data:`dpcounts.release.folder.MANIFEST`).
SIGNED = "manifest.json"
#: The key of the signature file that marks it ours, and its format.
FORMAT_KEY = "dpcounts_signature_format"
SIGNATURE_FORMAT = 1
ALGORITHM = "Ed25519"
#: What is signed: these bytes, then the manifest's bytes as published.
DOMAIN = b"dpcounts release manifest signature, format 1\n"
#: The largest signature file or key file read (a real one is a few hundred bytes).
MAX_BYTES = 1 << 14
#: The files ``dpcounts keygen`` writes.
PRIVATE_NAME = "dpcounts-signing.key"
PUBLIC_NAME = "dpcounts-signing.pub"


class SignatureError(ValueError):
    """A key or signature file that cannot be used: the message names it and why."""


def key_id(public: bytes) -> str:
    """A public key's short name: ``ed25519:`` and 16 hex digits of its SHA-256."""
    return "ed25519:" + hashlib.sha256(public).hexdigest()[:16]


def message(manifest: bytes) -> bytes:
    """What the signature signs: :data:`DOMAIN`, then the manifest's bytes."""
    return DOMAIN + manifest


def _read_small(path: Path, what: str) -> bytes:
    """A regular file of at most :data:`MAX_BYTES`, else :class:`SignatureError`."""
    try:
        info = os.stat(path)
    except OSError as err:
        raise SignatureError(f"{what} {path}: {err.strerror or err}") from None
    if not stat.S_ISREG(info.st_mode):
        raise SignatureError(f"{what} {path}: is not a regular file")
    if info.st_size > MAX_BYTES:
        raise SignatureError(f"{what} {path}: {info.st_size} bytes, more than any key")
    try:
        return path.read_bytes()
    except OSError as err:
        raise SignatureError(f"{what} {path}: {err.strerror or err}") from None


@dataclass(frozen=True)
class PublicKey:
    """A steward's public key: its 32 raw bytes and the file it came from."""

    raw: bytes
    path: Path | None = None

    @property
    def id(self) -> str:
        return key_id(self.raw)

    def verifies(self, signature: bytes, signed: bytes) -> bool:
        """Whether ``signature`` is this key's Ed25519 signature of ``signed``."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, signed)
        except (InvalidSignature, ValueError):
            return False
        return True


class Signer:
    """A steward's private key, loaded (:func:`load_private_key`): it signs a folder."""

    def __init__(self, key, path: Path):
        self._key = key
        self.path = path

    @property
    def public(self) -> PublicKey:
        from cryptography.hazmat.primitives import serialization

        raw = self._key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        return PublicKey(raw)

    def sign_folder(self, folder: Path) -> Path:
        """Write :data:`SIGNATURE` into ``folder``, signing its manifest as it is now
        (written last of the public files, so the signature is the very last)."""
        manifest = (folder / SIGNED).read_bytes()
        public = self.public
        data = {
            FORMAT_KEY: SIGNATURE_FORMAT,
            "algorithm": ALGORITHM,
            "signs": SIGNED,
            "message": "the bytes " + json.dumps(DOMAIN.decode()) + f" then {SIGNED}'s bytes",
            "key_id": public.id,
            "public_key": base64.b64encode(public.raw).decode("ascii"),
            "signature": base64.b64encode(self._key.sign(message(manifest))).decode("ascii"),
        }
        path = folder / SIGNATURE
        path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        return path


def _inside(path: Path, folder: Path) -> bool:
    resolved, around = path.resolve(), folder.resolve()
    return resolved == around or resolved.is_relative_to(around)


def load_private_key(path: Path, out: Path | None = None) -> Signer:
    """The private key of ``--sign-key`` (:class:`SignatureError` naming what is wrong):
    never inside the release folder ``out``, readable by its owner only, an Ed25519 key
    in PEM (what ``dpcounts keygen`` writes)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = Path(path)
    if out is not None and _inside(path, out):
        raise SignatureError(
            f"--sign-key {path}: lies inside the release folder {out}, which is published "
            "whole; keep the private key outside every release (dpcounts keygen --out DIR)"
        )
    data = _read_small(path, "--sign-key")
    if b"PUBLIC KEY" in data:
        raise SignatureError(
            f"--sign-key {path}: is a public key; give the private key ({PRIVATE_NAME}), "
            "and hand the public one to reviewers (dpcounts verify --key)"
        )
    mode = os.stat(path).st_mode & 0o777
    if mode & 0o077:
        raise SignatureError(
            f"--sign-key {path}: others can read it (mode {mode:04o}); a signing key must be "
            f"its owner's alone: chmod 600 {path}"
        )
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as err:
        why = "it is encrypted" if "encrypted" in str(err).lower() else "not a PEM private key"
        raise SignatureError(
            f"--sign-key {path}: {why}; expected an unencrypted Ed25519 private key in PEM, "
            "as dpcounts keygen writes"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureError(
            f"--sign-key {path}: a {type(key).__name__.removeprefix('_')} key, not Ed25519"
        )
    return Signer(key, path)


def load_public_key(path: Path) -> PublicKey:
    """The public key of ``verify --key`` (:class:`SignatureError` naming what is wrong):
    an Ed25519 public key in PEM (``dpcounts keygen``'s ``.pub``)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    path = Path(path)
    data = _read_small(path, "--key")
    if b"PRIVATE KEY" in data:
        raise SignatureError(
            f"--key {path}: is a private key, which never leaves the steward; give the "
            f"public key ({PUBLIC_NAME})"
        )
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        raise SignatureError(
            f"--key {path}: not a PEM public key; expected the steward's Ed25519 public key, "
            "as dpcounts keygen writes"
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise SignatureError(
            f"--key {path}: a {type(key).__name__.removeprefix('_')} key, not Ed25519"
        )
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PublicKey(raw, path)


def make_keys(folder: Path) -> tuple[Path, Path]:
    """A new key pair in ``folder`` (made 0700 if new): :data:`PRIVATE_NAME` (0600, written
    only if absent) and :data:`PUBLIC_NAME`; returns their paths. An existing key is never
    replaced (its releases' signatures would no longer match any key handed out)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    folder = Path(folder)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    private, public = folder / PRIVATE_NAME, folder / PUBLIC_NAME
    for path in (private, public):
        if os.path.lexists(path):
            raise SignatureError(
                f"{path}: exists; a key is never replaced (releases signed with it would "
                "match no key); choose another --out"
            )
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )  # fmt: skip
    fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    os.chmod(private, 0o600)  # whatever the umask
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


def read_signature(path: Path) -> dict:
    """The signature file's fields, checked for shape (:class:`SignatureError` saying
    what is wrong): ours, Ed25519, of the manifest, a 32-byte key and a 64-byte signature.
    Not whether it holds: :meth:`PublicKey.verifies`."""
    data = _read_small(path, "the signature")
    try:
        found = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise SignatureError(f"{path.name} is not valid JSON") from None
    if not isinstance(found, dict) or found.get(FORMAT_KEY) != SIGNATURE_FORMAT:
        raise SignatureError(
            f"{path.name} is not a dpcounts signature of format {SIGNATURE_FORMAT}"
        )
    if found.get("algorithm") != ALGORITHM or found.get("signs") != SIGNED:
        raise SignatureError(f"{path.name} is not an {ALGORITHM} signature of {SIGNED}")
    raw = {}
    for name, size in (("public_key", 32), ("signature", 64)):
        value = found.get(name)
        try:
            raw[name] = base64.b64decode(value, validate=True) if isinstance(value, str) else b""
        except ValueError:
            raw[name] = b""
        if len(raw[name]) != size:
            raise SignatureError(f"{path.name}: {name} is not {size} bytes in base64")
    return {"key": PublicKey(raw["public_key"]), "signature": raw["signature"]}
