"""The compiled keyed hash of the steward's index's pair fingerprint (issue #50): per
stratum, SipHash-2-4 of its (denominator, count) pair.

SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input PRF", 2012) is a
pseudorandom function of a 128-bit key, made for short messages: without the key its
outputs cannot be told from random ones, so the index's hashes of (population, count)
pairs cannot be matched against guessed pairs without the home's secret, from which the
key is derived (:func:`dpcounts.ledger.index.pair_fingerprint`). A message here is 16
bytes, the two numbers' 64-bit floats, little-endian; the loop is SipHash-2-4 of such a
message exactly (the tests check the reference test vector of 16 bytes). It runs in
compiled code, a few tens of nanoseconds a stratum, where a BLAKE2b call from Python
costs about a microsecond.
"""

from __future__ import annotations

import numba
import numpy as np

from dpcounts import compile_cache

#: Cache the machine code on disk when numba can write it somewhere (dpcounts.compile_cache).
CACHE = compile_cache.available(__file__)


@numba.njit(cache=CACHE, nogil=True)
def _rotl(x, b):  # pragma: no cover
    return (x << np.uint64(b)) | (x >> np.uint64(64 - b))


@numba.njit(cache=CACHE, nogil=True)
def _rounds(v0, v1, v2, v3, n):  # pragma: no cover
    for _ in range(n):
        v0 += v1
        v1 = _rotl(v1, 13)
        v1 ^= v0
        v0 = _rotl(v0, 32)
        v2 += v3
        v3 = _rotl(v3, 16)
        v3 ^= v2
        v0 += v3
        v3 = _rotl(v3, 21)
        v3 ^= v0
        v2 += v1
        v1 = _rotl(v1, 17)
        v1 ^= v2
        v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


@numba.njit(cache=CACHE, nogil=True)
def siphash_pairs(first, second, k0, k1):  # pragma: no cover
    """Per i, SipHash-2-4 under the key (``k0``, ``k1``) (its bytes 0-7 and 8-15,
    little-endian) of the 16-byte message whose words are ``first[i]`` and ``second[i]``
    (uint64, each its 8 bytes little-endian)."""
    n = first.shape[0]
    out = np.empty(n, dtype=np.uint64)
    c0 = np.uint64(0x736F6D6570736575) ^ k0
    c1 = np.uint64(0x646F72616E646F6D) ^ k1
    c2 = np.uint64(0x6C7967656E657261) ^ k0
    c3 = np.uint64(0x7465646279746573) ^ k1
    length = np.uint64(16) << np.uint64(56)  # the last block: the length, no tail bytes
    for i in range(n):
        v0, v1, v2, v3 = c0, c1, c2, c3
        m = first[i]
        v3 ^= m
        v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 2)
        v0 ^= m
        m = second[i]
        v3 ^= m
        v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 2)
        v0 ^= m
        v3 ^= length
        v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 2)
        v0 ^= length
        v2 ^= np.uint64(0xFF)
        v0, v1, v2, v3 = _rounds(v0, v1, v2, v3, 4)
        out[i] = v0 ^ v1 ^ v2 ^ v3
    return out
