"""Convolutions, pooling and padding in torch: ``Conv``, ``MaxPool``, ``AveragePool``, the
global pools, ``Pad``, ``PRelu``, inference ``Dropout`` and ``BatchNormalization`` (what
torch's CNN layers export to).

Where the windows sit is :mod:`mdf_loops.backends.windows`' ONNX pads, where torch's
functions take one symmetric padding: the input is padded explicitly (zeros for a convolution,
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
from mdf_loops.backends.windows import pad_indices, windows

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def _torch_pads(pads: list[int]) -> list[int]:
    """ONNX ``[b1, .., bn, e1, .., en]`` as ``F.pad``'s ``[bn, en, .., b1, e1]``."""
    n = len(pads) // 2
    return [p for i in reversed(range(n)) for p in (pads[i], pads[i + n])]


@op("Conv")
def _conv(call, x, w, b=None):
    at = windows(call, x.shape[2:], w.shape[2:])
    x = F.pad(x, _torch_pads(at.pads)) if any(at.pads) else x
    convolve = _CONV[x.dim() - 2]
    return convolve(x, w, b, stride=at.strides, dilation=at.dilations, groups=call.attr("group", 1))


@op("MaxPool")
def _max_pool(call, x):
    if call.n_outputs > 1 and call.proto.output[1]:
        raise ValueError("the Indices output of MaxPool has no torch lowering")
    kernel = list(call.attr("kernel_shape"))
    at = windows(call, x.shape[2:], kernel)
    sizes = list(x.shape[2:])
    x = F.pad(x, _torch_pads(at.pads), value=-math.inf) if any(at.pads) else x
    pool = _MAX_POOL[x.dim() - 2]
    ceil_mode = bool(call.attr("ceil_mode", 0))
    pooled = pool(x, kernel, at.strides, 0, at.dilations, ceil_mode=ceil_mode)
    return _kept(pooled, sizes, at) if ceil_mode else pooled


def _kept(pooled, sizes: list[int], at):
    """Without the ``ceil_mode`` windows that start in the end padding: torch saw the
    explicit padding as input."""
    for i, size in enumerate(sizes):
        pooled = pooled.narrow(2 + i, 0, min(pooled.shape[2 + i], at.kept(i, size)))
    return pooled


@op("AveragePool")
def _average_pool(call, x):
    kernel = list(call.attr("kernel_shape"))
    at = windows(call, x.shape[2:], kernel)
    strides, pads = at.strides, at.pads
    if any(d != 1 for d in at.dilations):
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
        return _kept(average, list(x.shape[2:]), at)
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
        where = pad_indices(mode, x.shape[axis], given[k], given[k + n])
        x = x.index_select(axis, torch.as_tensor(where, device=x.device))
    return x


@op("BatchNormalization")
def _batch_normalization(call, x, scale, bias, mean, var):
    if call.attr("training_mode", 0) or call.n_outputs > 1:
        raise ValueError("BatchNormalization in training mode has no torch lowering")
    shape = (1, -1) + (1,) * (x.dim() - 2)
    inverse = torch.rsqrt(var.reshape(shape) + call.attr("epsilon", 1e-5))
    return (x - mean.reshape(shape)) * inverse * scale.reshape(shape) + bias.reshape(shape)
