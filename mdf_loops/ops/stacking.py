"""Per-iteration scan-output elements stacked into one array, without per-step objects."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mdf_loops.errors import LoopError
from mdf_loops.ops.common import current_limits

__all__ = ["ScanOutputs"]


class ScanOutputs:
    """Collects the scan-output elements of each iteration along a new leading axis.

    With a known number of iterations the arrays are allocated once, at the first
    iteration; otherwise they grow geometrically. Elements must keep one shape;
    values are cast to the element type of the first iteration only if it can be
    done safely.
    """

    def __init__(self, capacity: int | None = None):
        self._capacity = capacity
        self._buffers: list[np.ndarray] | None = None
        self.count = 0

    def __len__(self) -> int:
        return 0 if self._buffers is None else len(self._buffers)

    def append(self, elements: Sequence, iteration: int) -> None:
        if self._buffers is None:
            first = [np.asarray(e) for e in elements]
            size = max(self._capacity or 16, 1)
            # a generous trip count must not allocate past the element limit up front
            largest = max(max((e.size for e in first), default=1), 1)
            size = min(size, max(1, current_limits().max_elements // largest))
            self._buffers = [np.empty((size,) + e.shape, e.dtype) for e in first]
        elif len(elements) != len(self._buffers):
            raise LoopError(
                f"body returned {len(elements)} scan outputs at iteration {iteration}, "
                f"{len(self._buffers)} before"
            )
        if self._buffers and self.count == self._buffers[0].shape[0]:
            self._grow()
        for j, (buffer, element) in enumerate(zip(self._buffers, elements, strict=True)):
            element = np.asarray(element)
            if element.shape != buffer.shape[1:]:
                raise LoopError(
                    f"scan output {j} changed shape from {buffer.shape[1:]} to {element.shape} "
                    f"at iteration {iteration}"
                )
            if element.dtype != buffer.dtype:
                raise LoopError(
                    f"scan output {j} changed element type from {buffer.dtype} to "
                    f"{element.dtype} at iteration {iteration}"
                )
            buffer[self.count] = element
        self.count += 1

    def _grow(self) -> None:
        assert self._buffers is not None, "grown only after the first iteration allocated"
        self._buffers = [np.concatenate([b, np.empty_like(b)]) for b in self._buffers]

    def arrays(self) -> list[np.ndarray]:
        """The stacked outputs, ``count`` long."""
        if self._buffers is None:
            return []
        if not self._buffers or self._buffers[0].shape[0] == self.count:
            return list(self._buffers)
        return [b[: self.count].copy() for b in self._buffers]
