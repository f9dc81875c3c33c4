"""Where the windows of ONNX's convolutions and pools sit, for the backends that lower
node by node (torch's ``convolution.py``, JAX's ``convolution.py``).

ONNX pads each spatial axis by ``pads = [begin_1, ..., begin_n, end_1, ..., end_n]``
(or ``auto_pad``: ``SAME_UPPER``/``SAME_LOWER`` keep ``ceil(size / stride)`` outputs,
the odd pad at the end or the beginning; ``VALID`` none). With ``ceil_mode`` a pool
takes ``ceil`` of the window count, leaving out a window that would start in the end
padding (as onnxruntime and torch do).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Windows", "windows", "pad_indices"]


@dataclass(frozen=True)
class Windows:
    """The windows of one node over one input."""

    strides: list[int]
    dilations: list[int]
    pads: list[int]  # ONNX order: every axis's begin, then every axis's end

    def begin(self, axis: int) -> int:
        return self.pads[axis]

    def end(self, axis: int) -> int:
        return self.pads[axis + len(self.strides)]

    def kept(self, axis: int, size: int) -> int:
        """How many ``ceil_mode`` windows start inside the input or the begin padding."""
        return math.ceil((self.begin(axis) + size) / self.strides[axis])

    def ceil_extra(self, axis: int, size: int, kernel: int) -> int:
        """The end padding ``ceil_mode`` adds so that the last window is whole."""
        span = (kernel - 1) * self.dilations[axis] + 1
        padded = size + self.begin(axis) + self.end(axis)
        count = math.ceil(max(padded - span, 0) / self.strides[axis]) + 1
        return max(0, (count - 1) * self.strides[axis] + span - padded)


def windows(call: Any, spatial: Sequence[int], kernel: Sequence[int]) -> Windows:
    """The windows of ``call``'s node (its attributes) over the ``spatial`` axes' sizes."""
    n = len(spatial)
    if not 1 <= n <= 3:
        raise ValueError(f"{n} spatial axes; convolutions and pools take 1 to 3")
    strides = list(call.attr("strides") or [1] * n)
    dilations = list(call.attr("dilations") or [1] * n)
    mode = call.attr("auto_pad", "NOTSET")
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * n)
        for i, size in enumerate(spatial):
            out = math.ceil(size / strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size)
            small, large = total // 2, total - total // 2
            pads[i], pads[i + n] = (small, large) if mode == "SAME_UPPER" else (large, small)
    elif mode == "VALID":
        pads = [0] * (2 * n)
    else:
        pads = list(call.attr("pads") or [0] * (2 * n))
    return Windows(strides, dilations, pads)


def pad_indices(mode: str, size: int, begin: int, end: int) -> np.ndarray:
    """The input positions of an axis of ``size`` padded by ``begin`` and ``end`` in a
    ``Pad`` ``mode`` other than constant: ``reflect`` mirrors without repeating the edge,
    ``edge`` repeats it, ``wrap`` wraps around."""
    at = np.arange(-begin, size + end)
    if mode == "edge":
        return np.clip(at, 0, size - 1)
    if mode == "wrap":
        return at % size
    if mode == "reflect":
        period = max(2 * size - 2, 1)
        at = at % period
        return np.where(at >= size, period - at, at)
    raise ValueError(f"Pad mode {mode!r} is not an ONNX mode")
