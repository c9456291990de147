"""Where a release's randomness comes from: a cryptographically secure generator.

A DP guarantee assumes the adversary cannot predict the mechanism's random draws. A
seed is therefore a secret as strong as the data: with a small seed (``42``) and all but
one event known, trying every seed and every candidate dataset until the release is
reproduced recovers the missing event. So a release draws from ChaCha20 (``randomgen``'s
``ChaCha`` bit generator with 20 rounds, which plugs into ``numpy.random.Generator``)
keyed with 256 bits from the operating system's secure source (``secrets``), and the key
is never written anywhere public. Each stream of the release (the sanitised prior's noise,
synthetic set ``k``) has its own key, ``SHA-256(root key, stream label)``, so streams are
independent and a set does not depend on how many sets were asked for.

A user seed is accepted only as ``test_seed``: the release is then reproducible, and the
manifest marks it "reproducible test, not for publication".
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

import numpy as np

#: ChaCha rounds: 20 is the cryptographic strength (randomgen's default is fewer).
CHACHA_ROUNDS = 20
#: Bits of operating-system entropy in a root key.
KEY_BITS = 256


@dataclass(frozen=True)
class RootKey:
    """The secret from which every random stream of one release is derived."""

    key: int
    from_test_seed: bool

    @classmethod
    def fresh(cls) -> RootKey:
        """256 bits from the operating system's secure source."""
        return cls(secrets.randbits(KEY_BITS), from_test_seed=False)

    @classmethod
    def from_seed(cls, seed: int) -> RootKey:
        """A reproducible key from a user seed: for tests only, never for publication."""
        if isinstance(seed, bool) or int(seed) != seed or seed < 0:
            raise ValueError(f"a test seed must be a whole number >= 0, got {seed!r}")
        digest = hashlib.sha256(f"dpcounts-test-seed:{int(seed)}".encode()).digest()
        return cls(int.from_bytes(digest, "big"), from_test_seed=True)

    def generator(self, stream: str) -> np.random.Generator:
        """An independent ChaCha20 generator for the named stream (e.g. ``"set:3"``)."""
        from randomgen import ChaCha

        material = self.key.to_bytes(KEY_BITS // 8, "big") + b"|" + stream.encode()
        stream_key = int.from_bytes(hashlib.sha256(material).digest(), "big")
        return np.random.Generator(ChaCha(key=stream_key, counter=0, rounds=CHACHA_ROUNDS))

    def commitment(self, salt: str) -> str:
        """SHA-256 of ``salt:key``: hiding (the salt is secret) and binding (SHA-256)."""
        return hashlib.sha256(f"{salt}:{self.key}".encode()).hexdigest()


def describe(root: RootKey) -> str:
    """The manifest's sentence about the randomness (no secret in it)."""
    import randomgen

    source = (
        "a user-given test seed (NOT secret: this release is a reproducible test, not for "
        "publication)"
        if root.from_test_seed
        else f"{KEY_BITS} bits from the operating system's secure source"
    )
    return (
        f"ChaCha{CHACHA_ROUNDS} (randomgen {randomgen.__version__}) keyed per stream with "
        f"SHA-256 of a root key from {source}"
    )
