"""Convolutions, pooling and padding in torch: ``Conv``, ``MaxPool``, ``AveragePool``, the
global pools, ``Pad``, ``PRelu`` and inference ``Dropout`` (what torch's CNN layers export to).

ONNX pads each spatial axis by ``pads = [begin_1, ..., begin_n, end_1, ..., end_n]``
(or ``auto_pad``: ``SAME_UPPER``/``SAME_LOWER`` keep ``ceil(size / stride)`` outputs,
the odd pad at the end or the beginning; ``VALID`` none), where torch's functions take
one symmetric padding: the input is padded explicitly (zeros for a convolution,
``-inf`` for a max pool) and the torch function runs with none. An average pool
divides each window's sum by its count of input elements (``count_include_pad=0``)
or of input and pad elements (``1``), both pooled the same way.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from mdf_loops.backends.torch.registry import op
from mdf_loops.backends.torch.values import ints

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def _spatial(call, x, kernel: list[int]) -> tuple[list[int], list[int], list[int]]:
    """``(strides, dilations, ONNX pads)`` of a node over ``x``'s spatial axes."""
    n = x.dim() - 2
    if n not in _CONV:
        raise ValueError(f"{n} spatial axes; torch convolves and pools 1 to 3")
    strides = list(call.attr("strides") or [1] * n)
    dilations = list(call.attr("dilations") or [1] * n)
    mode = call.attr("auto_pad", "NOTSET")
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * n)
        for i, size in enumerate(x.shape[2:]):
            out = math.ceil(size / strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size)
            small, large = total // 2, total - total // 2
            pads[i], pads[i + n] = (small, large) if mode == "SAME_UPPER" else (large, small)
    elif mode == "VALID":
        pads = [0] * (2 * n)
    else:
        pads = list(call.attr("pads") or [0] * (2 * n))
    return strides, dilations, pads


def _torch_pads(pads: list[int]) -> list[int]:
    """ONNX ``[b1, .., bn, e1, .., en]`` as ``F.pad``'s ``[bn, en, .., b1, e1]``."""
    n = len(pads) // 2
    return [p for i in reversed(range(n)) for p in (pads[i], pads[i + n])]


@op("Conv")
def _conv(call, x, w, b=None):
    strides, dilations, pads = _spatial(call, x, list(w.shape[2:]))
    x = F.pad(x, _torch_pads(pads)) if any(pads) else x
    convolve = _CONV[x.dim() - 2]
    return convolve(x, w, b, stride=strides, dilation=dilations, groups=call.attr("group", 1))


@op("MaxPool")
def _max_pool(call, x):
    if call.n_outputs > 1 and call.proto.output[1]:
        raise ValueError("the Indices output of MaxPool has no torch lowering")
    kernel = list(call.attr("kernel_shape"))
    strides, dilations, pads = _spatial(call, x, kernel)
    sizes = list(x.shape[2:])
    x = F.pad(x, _torch_pads(pads), value=-math.inf) if any(pads) else x
    pool = _MAX_POOL[x.dim() - 2]
    ceil_mode = bool(call.attr("ceil_mode", 0))
    pooled = pool(x, kernel, strides, 0, dilations, ceil_mode=ceil_mode)
    return _without_windows_in_the_end_pad(pooled, sizes, strides, pads) if ceil_mode else pooled


def _without_windows_in_the_end_pad(pooled, sizes: list[int], strides: list[int], pads: list[int]):
    """With ``ceil_mode``, a window that would start in the end padding is left out (as
    onnxruntime and torch do): torch saw the explicit padding as input."""
    for i, size in enumerate(sizes):
        keep = min(pooled.shape[2 + i], math.ceil((pads[i] + size) / strides[i]))
        pooled = pooled.narrow(2 + i, 0, keep)
    return pooled


@op("AveragePool")
def _average_pool(call, x):
    kernel = list(call.attr("kernel_shape"))
    strides, dilations, pads = _spatial(call, x, kernel)
    if any(d != 1 for d in dilations):
        raise ValueError("AveragePool with dilations has no torch lowering")
    pool = _AVG_POOL[x.dim() - 2]
    ceil_mode = bool(call.attr("ceil_mode", 0))
    if not any(pads):
        return pool(x, kernel, strides, 0, ceil_mode, count_include_pad=True)
    padded = F.pad(x, _torch_pads(pads))
    counted = torch.ones_like(x[:1, :1])
    counted = F.pad(counted, _torch_pads(pads), value=float(call.attr("count_include_pad", 0)))
    total = pool(padded, kernel, strides, 0, ceil_mode, count_include_pad=True)
    count = pool(counted, kernel, strides, 0, ceil_mode, count_include_pad=True)
    average = total / count  # both pooled alike: the divisor torch used cancels
    if ceil_mode:
        return _without_windows_in_the_end_pad(average, list(x.shape[2:]), strides, pads)
    return average


@op("GlobalAveragePool")
def _global_average_pool(call, x):
    return x.mean(dim=tuple(range(2, x.dim())), keepdim=True)


@op("GlobalMaxPool")
def _global_max_pool(call, x):
    return x.amax(dim=tuple(range(2, x.dim())), keepdim=True)


@op("PRelu")
def _prelu(call, x, slope):
    return torch.where(x < 0, x * slope, x)


@op("Dropout")
def _dropout(call, x, ratio=None, training_mode=None):
    if training_mode is not None and bool(training_mode):
        raise ValueError("Dropout in training mode draws random numbers: no torch lowering")
    return x if call.n_outputs == 1 else (x, torch.ones_like(x, dtype=torch.bool))


@op("Pad")
def _pad(call, x, pads=None, constant_value=None, axes=None):
    given = ints(pads) if pads is not None else list(call.attr("pads"))
    chosen = ints(axes) if axes is not None else list(range(x.dim()))
    chosen = [a % x.dim() for a in chosen]
    mode = call.attr("mode", "constant")
    n = len(chosen)
    if mode == "constant":
        full = [0] * (2 * x.dim())
        for k, axis in enumerate(chosen):
            full[axis], full[axis + x.dim()] = given[k], given[k + n]
        value = 0.0 if constant_value is None else constant_value.item()
        return F.pad(x, _torch_pads(full), value=value)
    for k, axis in enumerate(chosen):
        x = x.index_select(axis, _indices(mode, x.shape[axis], given[k], given[k + n], x.device))
    return x


def _indices(mode: str, size: int, begin: int, end: int, device) -> torch.Tensor:
    """The input positions of a padded axis: ``reflect`` mirrors without repeating the
    edge, ``edge`` repeats it, ``wrap`` wraps around."""
    at = torch.arange(-begin, size + end, device=device)
    if mode == "edge":
        return at.clamp(0, size - 1)
    if mode == "wrap":
        return at % size
    if mode == "reflect":
        period = max(2 * size - 2, 1)
        at = at % period
        return torch.where(at >= size, period - at, at)
    raise ValueError(f"Pad mode {mode!r} is not an ONNX mode")
