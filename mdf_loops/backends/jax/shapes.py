"""ONNX operators that move, select or build elements: shapes, slices, gathers, concatenation.

Shapes, axes and indices that decide an output's shape must be concrete
(:func:`~mdf_loops.backends.jax.values.concrete`); they are, whenever ONNX
computes them from shapes or constants.
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from mdf_loops.backends.jax.registry import op
from mdf_loops.backends.jax.values import concrete, xp_of
from mdf_loops.errors import CompileError


def _ints(call, value, what: str) -> list[int]:
    return [int(v) for v in concrete(value, call.where, what).reshape(-1)]


def _axes(call, given, rank: int, what: str = "axes") -> list[int] | None:
    """Axes from an input (newer opsets) or the attribute (older), made non-negative."""
    axes = _ints(call, given, what) if given is not None else call.attr("axes")
    if axes is None:
        return None
    return [a + rank if a < 0 else a for a in axes]


@op("Shape")
def _shape(call, x):
    shape = np.asarray(np.shape(x), np.int64)
    start, end = call.attr("start", 0), call.attr("end")
    return shape[start:end]


@op("Size")
def _size(call, x):
    return np.asarray(int(np.prod(np.shape(x))), np.int64)


@op("Reshape")
def _reshape(call, x, shape):
    target = _ints(call, shape, "the target shape")
    if not call.attr("allowzero", 0):
        target = [np.shape(x)[k] if d == 0 else d for k, d in enumerate(target)]
    return xp_of(x).reshape(x, target)


@op("Flatten")
def _flatten(call, x):
    axis = call.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return xp_of(x).reshape(x, (int(np.prod(x.shape[:axis])), -1))


@op("Transpose")
def _transpose(call, x):
    perm = call.attr("perm")
    return xp_of(x).transpose(x, perm if perm is not None else None)


@op("Squeeze")
def _squeeze(call, x, axes=None):
    axes = _axes(call, axes, x.ndim)
    xp = xp_of(x)
    return xp.squeeze(x) if axes is None else xp.squeeze(x, axis=tuple(axes))


@op("Unsqueeze")
def _unsqueeze(call, x, axes=None):
    given = _ints(call, axes, "axes") if axes is not None else list(call.attr("axes"))
    rank = x.ndim + len(given)
    xp = xp_of(x)
    for a in sorted(a + rank if a < 0 else a for a in given):
        x = xp.expand_dims(x, a)
    return x


@op("Concat")
def _concat(call, *xs):
    present = [x for x in xs if x is not None]
    return xp_of(*present).concatenate(present, axis=call.attr("axis"))


@op("Split")
def _split(call, x, split=None):
    axis = call.attr("axis", 0)
    axis = axis + x.ndim if axis < 0 else axis
    sizes = _ints(call, split, "split") if split is not None else call.attr("split")
    if sizes is None:
        n = call.attr("num_outputs") or call.n_outputs
        length = x.shape[axis]
        chunk = -(-length // n)
        sizes = [min(chunk, length - k * chunk) for k in range(n)]
    bounds = np.cumsum(sizes)[:-1].tolist()
    return tuple(xp_of(x).split(x, bounds, axis=axis))


@op("Slice")
def _slice(call, x, starts=None, ends=None, axes=None, steps=None):
    if call.opset < 10:
        starts, ends, axes = call.attr("starts"), call.attr("ends"), call.attr("axes")
    else:
        starts, ends = _ints(call, starts, "starts"), _ints(call, ends, "ends")
        axes = _ints(call, axes, "axes") if axes is not None else None
    axes = list(range(len(starts))) if axes is None else [a + x.ndim if a < 0 else a for a in axes]
    steps = _ints(call, steps, "steps") if steps is not None else [1] * len(starts)
    if not len(axes) == len(starts) == len(ends) == len(steps):
        raise CompileError(
            f"{call.where}: Slice has {len(starts)} starts, {len(ends)} ends, {len(axes)} axes "
            f"and {len(steps)} steps; give one of each per sliced axis"
        )
    index = [slice(None)] * x.ndim
    for a, s, e, k in zip(axes, starts, ends, steps, strict=True):
        index[a] = slice(s, e, k)
    return x[tuple(index)]


def _normalized(indices, size):
    xp = xp_of(indices)
    return xp.where(indices < 0, indices + size, indices)


@op("Gather")
def _gather(call, x, indices):
    axis = call.attr("axis", 0)
    axis = axis + x.ndim if axis < 0 else axis
    return xp_of(x, indices).take(x, _normalized(indices, x.shape[axis]), axis=axis)


@op("GatherElements")
def _gather_elements(call, x, indices):
    axis = call.attr("axis", 0)
    axis = axis + x.ndim if axis < 0 else axis
    return xp_of(x, indices).take_along_axis(x, _normalized(indices, x.shape[axis]), axis=axis)


@op("Expand")
def _expand(call, x, shape):
    target = np.broadcast_shapes(np.shape(x), tuple(_ints(call, shape, "the shape")))
    return xp_of(x).broadcast_to(x, target)


@op("Tile")
def _tile(call, x, repeats):
    return xp_of(x).tile(x, _ints(call, repeats, "repeats"))


@op("ConstantOfShape")
def _constant_of_shape(call, shape):
    value = call.attrs.get("value")
    fill = numpy_helper.to_array(value).reshape(()) if value is not None else np.float32(0)
    return np.full(_ints(call, shape, "the shape"), fill, dtype=fill.dtype)


@op("Range")
def _range(call, start, limit, delta):
    start, limit, delta = (
        concrete(v, call.where, "Range's bounds (they set its length)")
        for v in (start, limit, delta)
    )
    start, limit, delta = (v.reshape(-1)[0] for v in (start, limit, delta))
    count = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    steps = np.arange(count).astype(start.dtype)
    return (start + steps * delta).astype(start.dtype)


_SCATTER = {
    "none": ("set", None),
    "add": ("add", np.add),
    "mul": ("multiply", np.multiply),
    "max": ("max", np.maximum),
    "min": ("min", np.minimum),
}


def _scatter(call, data, index: tuple, updates):
    method, ufunc = _SCATTER[call.attr("reduction", "none")]
    if xp_of(data, updates, *index) is np:
        out = np.array(data, copy=True)
        if ufunc is None:
            out[index] = updates
        else:
            ufunc.at(out, index, updates)
        return out
    import jax.numpy as jnp

    return getattr(jnp.asarray(data).at[index], method)(updates)


@op("ScatterND")
def _scatter_nd(call, data, indices, updates):
    k = indices.shape[-1]
    flat = indices.reshape(-1, k)
    index = tuple(_normalized(flat[:, j], data.shape[j]) for j in range(k))
    return _scatter(call, data, index, xp_of(updates).reshape(updates, (-1,) + data.shape[k:]))


@op("ScatterElements", "Scatter")
def _scatter_elements(call, data, indices, updates):
    axis = call.attr("axis", 0)
    axis = axis + data.ndim if axis < 0 else axis
    xp = xp_of(indices)
    grid = list(xp.meshgrid(*[xp.arange(n) for n in indices.shape], indexing="ij"))
    grid[axis] = _normalized(indices, data.shape[axis])
    return _scatter(call, data, tuple(grid), updates)


@op("ai.onnx.ml::ArrayFeatureExtractor")
def _array_feature_extractor(call, x, indices):
    flat = indices.reshape(-1)
    shape = (1, flat.size) if x.ndim == 1 else tuple(x.shape[:-1]) + (flat.size,)
    return xp_of(x, flat).take(x, _normalized(flat, x.shape[-1]), axis=-1).reshape(shape)
