"""Random streams that do not depend on job order, core count or cluster.

Every job of the workflow names the cell of the design it computes (for example
``("study1", "scenario", 4, "mechanism", "md", "chunk", 3)``); its generator is
``SeedSequence(seed, spawn_key=stable_key(*labels))``. The key is a hash of the labels'
text, so the same cell always gets the same stream and different cells get independent
ones.
"""

from __future__ import annotations

import hashlib

import numpy as np


def stable_key(*labels: object) -> tuple[int, ...]:
    """Four 32-bit words from the SHA-256 of the labels' ``repr``, stable across runs."""
    text = "\x1f".join(repr(label) for label in labels).encode()
    digest = hashlib.sha256(text).digest()
    return tuple(int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4))


def job_rng(seed: int, *labels: object) -> np.random.Generator:
    """The generator of one job: ``SeedSequence(seed, spawn_key=stable_key(*labels))``."""
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=stable_key(*labels)))
