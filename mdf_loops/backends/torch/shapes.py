"""Operators that build, index and rearrange tensors in torch (shapes, slices, gathers)."""

from __future__ import annotations

import numpy as np
import torch
from onnx import numpy_helper

from mdf_loops.backends.torch.registry import op
from mdf_loops.backends.torch.values import ints, tensor_of


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"axis {axis} is out of range for rank {rank}")
    return axis % max(rank, 1)


def _axes(call, given) -> list[int] | None:
    """Axes from the input (newer opsets) or the attribute (older ones); None when absent."""
    if given is not None:
        return ints(given)
    axes = call.attr("axes")
    return None if axes is None else [int(a) for a in axes]


@op("Shape")
def _shape(call, x):
    dims = list(x.shape)
    start, end = call.attr("start", 0), call.attr("end", len(dims))
    return torch.tensor(dims[slice(start, end)], dtype=torch.int64, device=x.device)


@op("Size")
def _size(call, x):
    return torch.tensor(x.numel(), dtype=torch.int64, device=x.device)


@op("Reshape")
def _reshape(call, x, shape=None):
    dims = ints(shape) if shape is not None else list(call.attr("shape"))
    if not call.attr("allowzero", 0):
        dims = [x.shape[k] if d == 0 else d for k, d in enumerate(dims)]
    return x.reshape(dims)


@op("Flatten")
def _flatten(call, x):
    axis = call.attr("axis", 1) % (x.dim() + 1) if x.dim() else 0
    return x.reshape(int(torch.Size(x.shape[:axis]).numel()), -1)


@op("Squeeze")
def _squeeze(call, x, axes=None):
    chosen = _axes(call, axes)
    if chosen is None:
        return x.reshape([d for d in x.shape if d != 1])
    dims = {_axis(a, x.dim()) for a in chosen}
    return x.reshape([d for k, d in enumerate(x.shape) if k not in dims])


@op("Unsqueeze")
def _unsqueeze(call, x, axes=None):
    chosen = _axes(call, axes) or []
    rank = x.dim() + len(chosen)
    dims = sorted(_axis(a, rank) for a in chosen)
    for d in dims:
        x = x.unsqueeze(d)
    return x


@op("Transpose")
def _transpose(call, x):
    perm = call.attr("perm")
    return x.permute(list(perm) if perm is not None else list(range(x.dim()))[::-1])


@op("Expand")
def _expand(call, x, shape):
    target = torch.broadcast_shapes(tuple(x.shape), tuple(ints(shape)))
    return x.expand(target)


@op("Tile")
def _tile(call, x, repeats):
    return x.repeat(ints(repeats)) if x.dim() else x


@op("Concat")
def _concat(call, *xs):
    return torch.cat(xs, dim=call.attr("axis"))


@op("Split")
def _split(call, x, split=None):
    axis = _axis(call.attr("axis", 0), x.dim())
    sizes = ints(split) if split is not None else call.attr("split")
    if sizes is None:
        count = call.attr("num_outputs", call.n_outputs)
        length = x.shape[axis]
        step = -(-length // count)
        sizes = [min(step, length - k * step) for k in range(count)]
    return tuple(torch.split(x, list(sizes), dim=axis))


def _indices(start: int, end: int, step: int, length: int) -> range:
    """The indices ``Slice`` takes along one axis (clamped as numpy clamps)."""
    return range(*slice(start, end, step).indices(length))


@op("Slice")
def _slice(call, x, starts=None, ends=None, axes=None, steps=None):
    if call.opset < 10:
        starts, ends, axes = call.attr("starts"), call.attr("ends"), call.attr("axes")
    starts, ends = ints(starts), ints(ends)
    axes_list = ints(axes) if axes is not None else list(range(len(starts)))
    steps_list = ints(steps) if steps is not None else [1] * len(starts)
    for start, end, axis, step in zip(starts, ends, axes_list, steps_list, strict=True):
        axis = _axis(axis, x.dim())
        picked = _indices(start, end, step, x.shape[axis])
        if step == 1:
            x = x.narrow(axis, picked.start, len(picked))
        else:
            index = torch.tensor(list(picked), dtype=torch.int64, device=x.device)
            x = x.index_select(axis, index)
    return x


def _positive(indices, length: int):
    return torch.where(indices < 0, indices + length, indices)


@op("Gather")
def _gather(call, x, indices):
    axis = _axis(call.attr("axis", 0), x.dim())
    flat = _positive(indices.reshape(-1).long(), x.shape[axis])
    picked = x.index_select(axis, flat)
    return picked.reshape(x.shape[:axis] + indices.shape + x.shape[axis + 1 :])


@op("GatherElements")
def _gather_elements(call, x, indices):
    axis = _axis(call.attr("axis", 0), x.dim())
    return torch.gather(x, axis, _positive(indices.long(), x.shape[axis]))


@op("GatherND")
def _gather_nd(call, x, indices):
    if call.attr("batch_dims", 0):
        raise ValueError("GatherND with batch_dims has no torch lowering")
    index = tuple(_positive(i.long(), x.shape[k]) for k, i in enumerate(indices.unbind(-1)))
    return x[index]


_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


@op("ScatterND")
def _scatter_nd(call, data, indices, updates):
    index = tuple(_positive(i.long(), data.shape[k]) for k, i in enumerate(indices.unbind(-1)))
    reduction = call.attr("reduction", "none")
    out = data.clone()
    if reduction == "none":
        return out.index_put(index, updates)
    if reduction == "add":
        return out.index_put(index, updates, accumulate=True)
    for k in range(updates.shape[0] if indices.dim() > 1 else 1):  # one update at a time
        where = tuple(i[k] for i in index) if indices.dim() > 1 else index
        current = out[where]
        value = updates[k] if indices.dim() > 1 else updates
        combined = {"mul": torch.mul, "max": torch.maximum, "min": torch.minimum}[reduction]
        out = out.index_put(where, combined(current, value))
    return out


@op("ScatterElements", "Scatter")
def _scatter_elements(call, data, indices, updates):
    axis = _axis(call.attr("axis", 0), data.dim())
    index = _positive(indices.long(), data.shape[axis])
    reduction = call.attr("reduction", "none")
    if reduction == "none":
        return torch.scatter(data, axis, index, updates)
    return torch.scatter_reduce(data, axis, index, updates, _REDUCE[reduction])


@op("ConstantOfShape")
def _constant_of_shape(call, shape):
    value = call.attrs.get("value")
    fill = tensor_of(np.zeros(1, np.float32) if value is None else numpy_helper.to_array(value))
    return torch.full(
        ints(shape), fill.reshape(-1)[0].item(), dtype=fill.dtype, device=shape.device
    )


@op("Range")
def _range(call, start, limit, delta):
    first, last, step = start.item(), limit.item(), delta.item()
    count = max(int(-(-(last - first) // step)), 0)
    steps = torch.arange(count, device=start.device)
    return (start + steps.to(start.dtype) * delta).to(start.dtype)


@op("CumSum")
def _cumsum(call, x, axis):
    dim = _axis(ints(axis)[0], x.dim())
    if call.attr("reverse", 0):
        x = x.flip(dim)
    result = torch.cumsum(x, dim=dim).to(x.dtype)
    if call.attr("exclusive", 0):
        result = result - x
    return result.flip(dim) if call.attr("reverse", 0) else result


@op("TopK")
def _topk(call, x, k):
    axis = _axis(call.attr("axis", -1), x.dim())
    largest = bool(call.attr("largest", 1))
    values, order = torch.sort(x, dim=axis, descending=largest, stable=True)
    count = ints(k)[0]
    return values.narrow(axis, 0, count), order.narrow(axis, 0, count)


@op("ai.onnx.ml::ArrayFeatureExtractor")
def _array_feature_extractor(call, x, indices):
    flat = indices.reshape(-1).long()
    return x.index_select(x.dim() - 1, flat)


@op("Compress")
def _compress(call, x, condition):
    axis = call.attr("axis")
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = _axis(axis, x.dim())
    kept = torch.nonzero(condition.reshape(-1)).reshape(-1)
    return x.index_select(axis, kept)


@op("NonZero")
def _nonzero(call, x):
    return torch.nonzero(x.reshape(1) if x.dim() == 0 else x).T.contiguous()
