"""Convolutions of the study sampler's tree (:mod:`dpcounts.sampling.study_mode`) by FFT:
scipy's own steps without its per-call overhead, the same bits.

Short convolutions are direct (:func:`dpcounts.sampling.tree_steps.direct_convolve`,
batched by padded width); those whose inputs are longer than :data:`DIRECT_CONVOLVE` use
the transforms below, batched by transform length.
"""

from __future__ import annotations

import functools

import numpy as np

#: Convolutions whose inputs are at most this long are done directly, batched by width.
DIRECT_CONVOLVE = 128


def fft_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The full linear convolution of two 1-D float arrays: what
    ``scipy.signal.fftconvolve(a, b)`` computes, by its own steps (the same FFT length,
    ``next_fast_len`` of the full size, and the same ``scipy.fft`` real transforms), so the
    same bits, without its per-call checks and array-API dispatch (half of its time at the
    sizes the tree convolves, paid hundreds of times per tree)."""
    from scipy import fft

    size = a.size + b.size - 1
    n = fft.next_fast_len(size, True)
    spectrum = fft.rfftn(a, [n], axes=[0]) * fft.rfftn(b, [n], axes=[0])
    return fft.irfftn(spectrum, [n], axes=[0])[:size]


def fft_convolve_many(lefts: list[np.ndarray], rights: list[np.ndarray]) -> list[np.ndarray]:
    """``[fft_convolve(a, b) for a, b in zip(lefts, rights)]``, the same bits, with one
    batched transform per FFT length instead of three per pair: pocketfft transforms each
    row of a 2-D array as it does a 1-D array (tests/test_sampling_large.py checks), and a
    tree level's long pairs share few lengths, so the per-call overhead of ``scipy.fft``
    (most of a pair's time at the sizes the tree convolves) is paid once per length."""
    rows = fft_convolve_rows(lefts, rights, clip=False)
    sizes = [a.size + b.size - 1 for a, b in zip(lefts, rights, strict=True)]
    return [row[:size] for row, size in zip(rows, sizes, strict=True)]


@functools.cache
def _real_transforms():
    """(forward, inverse): the real transforms over the last axis of a C-contiguous 2-D
    float64 (complex128) array that ``scipy.fft.rfft(x, n, axis=-1)`` and
    ``scipy.fft.irfft(x, n, axis=-1)`` end in, pocketfft's own entry points called with
    the arguments scipy passes (no normalisation forward, 1/n back, one worker), without
    scipy's dispatch and argument checks: most of a transform's time at the widths the
    tree convolves, paid thousands of times a study. Where scipy keeps them elsewhere,
    scipy.fft's public functions (the same bits, tests/test_sampling_large.py checks)."""
    try:
        from scipy.fft._pocketfft import pypocketfft
    except ImportError:  # pragma: no cover - another scipy layout: its public functions
        from scipy import fft

        return (
            lambda x: fft.rfft(x, x.shape[-1], axis=-1),
            lambda x, n: fft.irfft(x, n, axis=-1),
        )
    return (
        lambda x: pypocketfft.r2c(x, (-1,), True, 0, None, 1),
        lambda x, n: pypocketfft.c2r(x, (-1,), n, False, 2, None, 1),
    )


def fft_convolve_rows(
    lefts: list[np.ndarray], rights: list[np.ndarray], *, clip: bool = True
) -> np.ndarray:
    """The convolutions of :func:`fft_convolve_many` as the rows of one zero-padded 2-D
    array (as wide as the longest), negative round-off set to zero when ``clip``: what
    ``pad_rows([np.clip(c, 0.0, None) for c in fft_convolve_many(lefts, rights)], w)``
    holds, the same bits, each length's rows copied into place from its inverse transform
    (one forward transform for the lefts and rights of a length together)."""
    from scipy import fft

    forward, inverse = _real_transforms()
    sizes = np.array([a.size + b.size - 1 for a, b in zip(lefts, rights, strict=True)])
    lengths = np.array([fft.next_fast_len(int(size), True) for size in sizes], dtype=np.int64)
    out = np.zeros((sizes.size, int(sizes.max(initial=0))))
    for n in np.unique(lengths).tolist():
        pick = np.flatnonzero(lengths == n)
        both = pick.tolist()
        spectra = forward(pad_rows([lefts[i] for i in both] + [rights[i] for i in both], n))
        spectrum = spectra[: pick.size]
        spectrum *= spectra[pick.size :]
        width = min(n, out.shape[1])
        rows = inverse(spectrum, n)[:, :width]
        keep = np.arange(width)[None, :] < sizes[pick, None]
        out[pick, :width] = np.where(keep, rows, 0.0)
    if clip:
        np.clip(out, 0.0, None, out=out)
    return out


def pad_rows(arrays: list[np.ndarray], width: int) -> np.ndarray:
    """Stack 1-D arrays (each at most ``width`` long) into a zero-padded 2-D array."""
    lengths = np.array([arr.size for arr in arrays])
    out = np.zeros((len(arrays), width))
    out[np.arange(width)[None, :] < lengths[:, None]] = np.concatenate(arrays)
    return out
