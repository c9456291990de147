"""Where a release-mode tree goes when it would be large (:class:`Spill`), and the store
of its values as the build makes them (:class:`Values`): in memory, or in an unlinked file
mapped for the draws (issue #36)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Spill:
    """Where a release-mode tree goes when it would be large: a file in ``directory``
    (made private, mode 0700, if it does not exist), created already unlinked (the system
    removes it when the process ends, however it ends: nothing is left behind by a killed
    release) and mapped into memory for the draws, which read it one level at a time. The
    tree goes there when its forecast, 16 bytes an entry times :data:`_TREE_PER_LEAF` times
    the leaves' stored entries, exceeds ``bytes``."""

    directory: Path
    bytes: float


#: A release tree's entries per leaf entry, for :class:`Spill`'s decision: the national
#: tables of issue #36 have 6.0 (1M strata) and about 4.8 (10M).
_TREE_PER_LEAF = 6.0


class Values:
    """The tree's values, level by level in node-id order: chunks in memory joined at the
    end, or written to an unlinked file (:class:`Spill`) and mapped at the end.

    The leaves arrive in chunks (:meth:`~dpcounts.sampling.release_mode.ReleaseSampler.
    _build`), so the choice is made as they come: the store moves to the file (what it held
    first, in order) as soon as the leaf entries seen so far forecast a tree above
    ``spill.bytes``, the test of :class:`Spill` on all the leaves, met at the first chunk
    that meets it."""

    def __init__(self, spill: Spill | None):
        self.chunks_hi, self.chunks_lo, self.files, self.maps, self.size = [], [], None, None, 0
        self.spill, self.leaf_entries = spill, 0

    def append(self, hi: np.ndarray, lo: np.ndarray, leaves: bool = False) -> None:
        if leaves:
            self.leaf_entries += hi.size
            if (
                self.files is None
                and self.spill is not None
                and 16.0 * _TREE_PER_LEAF * self.leaf_entries > self.spill.bytes
            ):
                self._to_file()
        if self.files is None:
            self.chunks_hi.append(hi)
            self.chunks_lo.append(lo)
            return
        for file, values in zip(self.files, (hi, lo), strict=True):
            file.write(memoryview(np.ascontiguousarray(values, dtype=np.float64)).cast("B"))
        self.size += hi.size

    def _to_file(self) -> None:
        import tempfile

        Path(self.spill.directory).mkdir(mode=0o700, parents=True, exist_ok=True)
        self.files = [tempfile.TemporaryFile(dir=self.spill.directory) for _ in range(2)]
        held = list(zip(self.chunks_hi, self.chunks_lo, strict=True))
        self.chunks_hi, self.chunks_lo = [], []
        for hi, lo in held:
            self.append(hi, lo)

    def finish(self) -> tuple[np.ndarray, np.ndarray]:
        """The values (hi, lo) as flat arrays: in memory, or views of the file's maps."""
        if self.files is None:
            return join_chunks(self.chunks_hi), join_chunks(self.chunks_lo)
        self.maps = []
        for file in self.files:
            file.flush()
            self.maps.append(np.memmap(file, dtype=np.float64, mode="r+", shape=(self.size,)))
            file.close()  # the map keeps the (unlinked) file alive
        return np.asarray(self.maps[0]), np.asarray(self.maps[1])


def join_chunks(chunks: list[np.ndarray]) -> np.ndarray:
    """The chunks one after another, each freed once copied: the peak is about one copy of
    the whole (a fresh large array takes memory only as it is written), not two."""
    out = np.empty(sum(chunk.size for chunk in chunks))
    position = 0
    for i in range(len(chunks)):
        size = chunks[i].size
        out[position : position + size] = chunks[i]
        chunks[i] = None  # the list held the last reference
        position += size
    return out
