"""Convolutions, pooling and padding in JAX: ``Conv``, ``MaxPool``, ``AveragePool``, the
global pools, ``Pad``, ``PRelu``, inference ``Dropout`` and ``BatchNormalization``.

``lax.conv_general_dilated`` and ``lax.reduce_window`` take ONNX's pads as they are
(:mod:`mdf_loops.backends.windows`); ``ceil_mode`` pads the end for the last whole
window and leaves out windows that start in the end padding. An average pool divides
each window's sum by its count of input elements (``count_include_pad=0``) or of
input and pad elements (``1``). JAX is imported when a node runs.
"""

from __future__ import annotations

from mdf_loops.backends.jax.registry import op
from mdf_loops.backends.jax.values import concrete
from mdf_loops.backends.windows import pad_indices, windows


def _pool_geometry(call, x, kernel):
    """``(windows, per-axis (begin, end) pads with ceil_mode's extra)``."""
    at = windows(call, x.shape[2:], kernel)
    ceil_mode = bool(call.attr("ceil_mode", 0))
    pads = []
    for i, size in enumerate(x.shape[2:]):
        extra = at.ceil_extra(i, size, kernel[i]) if ceil_mode else 0
        pads.append((at.begin(i), at.end(i) + extra))
    return at, pads


def _kept(call, y, x, at):
    if not call.attr("ceil_mode", 0):
        return y
    index = tuple(
        slice(None, min(y.shape[2 + i], at.kept(i, s))) for i, s in enumerate(x.shape[2:])
    )
    return y[(slice(None), slice(None), *index)]


@op("Conv")
def _conv(call, x, w, b=None):
    import jax.numpy as jnp
    from jax import lax

    at = windows(call, x.shape[2:], w.shape[2:])
    n = len(at.strides)
    y = lax.conv_general_dilated(
        jnp.asarray(x),
        jnp.asarray(w, dtype=x.dtype),
        window_strides=at.strides,
        padding=[(at.begin(i), at.end(i)) for i in range(n)],
        rhs_dilation=at.dilations,
        feature_group_count=call.attr("group", 1),
    )
    return y if b is None else y + jnp.reshape(b, (1, -1) + (1,) * n)


@op("MaxPool")
def _max_pool(call, x):
    import jax.numpy as jnp
    from jax import lax

    if call.n_outputs > 1 and call.proto.output[1]:
        raise ValueError("the Indices output of MaxPool has no JAX lowering")
    kernel = list(call.attr("kernel_shape"))
    at, pads = _pool_geometry(call, x, kernel)
    x = jnp.asarray(x)
    y = lax.reduce_window(
        x,
        -jnp.inf,
        lax.max,
        (1, 1, *kernel),
        (1, 1, *at.strides),
        ((0, 0), (0, 0), *pads),
        window_dilation=(1, 1, *at.dilations),
    )
    return _kept(call, y, x, at)


@op("AveragePool")
def _average_pool(call, x):
    import jax.numpy as jnp
    from jax import lax

    kernel = list(call.attr("kernel_shape"))
    at, pads = _pool_geometry(call, x, kernel)
    if any(d != 1 for d in at.dilations):
        raise ValueError("AveragePool with dilations has no JAX lowering")
    x = jnp.asarray(x)
    windows_of = dict(window_dimensions=(1, 1, *kernel), window_strides=(1, 1, *at.strides))
    total = lax.reduce_window(x, 0.0, lax.add, padding=((0, 0), (0, 0), *pads), **windows_of)
    counted = jnp.ones((1, 1, *x.shape[2:]), x.dtype)
    if call.attr("count_include_pad", 0):  # ONNX's pads count, ceil_mode's extra does not
        counted = jnp.pad(
            counted,
            ((0, 0), (0, 0), *((at.begin(i), at.end(i)) for i in range(len(kernel)))),
            constant_values=1,
        )
        extra = [(0, e - at.end(i)) for i, (_, e) in enumerate(pads)]
        pads = extra
    count = lax.reduce_window(counted, 0.0, lax.add, padding=((0, 0), (0, 0), *pads), **windows_of)
    return _kept(call, total / count, x, at)


@op("GlobalAveragePool")
def _global_average_pool(call, x):
    import jax.numpy as jnp

    return jnp.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@op("GlobalMaxPool")
def _global_max_pool(call, x):
    import jax.numpy as jnp

    return jnp.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@op("PRelu")
def _prelu(call, x, slope):
    import jax.numpy as jnp

    return jnp.where(x < 0, x * slope, x)


@op("Dropout")
def _dropout(call, x, ratio=None, training_mode=None):
    import jax.numpy as jnp

    if training_mode is not None and bool(concrete(training_mode, call.where, "training_mode")):
        raise ValueError("Dropout in training mode draws random numbers: no JAX lowering")
    return x if call.n_outputs == 1 else (x, jnp.ones(x.shape, bool))


@op("Pad")
def _pad(call, x, pads=None, constant_value=None, axes=None):
    import jax.numpy as jnp

    given = [
        int(p)
        for p in (
            concrete(pads, call.where, "pads").reshape(-1)
            if pads is not None
            else call.attr("pads")
        )
    ]
    rank = x.ndim
    chosen = [
        int(a) % rank
        for a in (
            concrete(axes, call.where, "axes").reshape(-1) if axes is not None else range(rank)
        )
    ]
    n = len(chosen)
    mode = call.attr("mode", "constant")
    x = jnp.asarray(x)
    for k, axis in enumerate(chosen):
        begin, end = given[k], given[k + n]
        if mode == "constant":
            fill = 0 if constant_value is None else constant_value
            widths = [(0, 0)] * rank
            widths[axis] = (max(begin, 0), max(end, 0))
            x = jnp.pad(x, widths, constant_values=jnp.asarray(fill, x.dtype))
            stop = x.shape[axis] - max(-end, 0)
            x = _slice(x, axis, max(-begin, 0), stop)
        else:
            x = jnp.take(x, pad_indices(mode, x.shape[axis], begin, end), axis=axis)
    return x


def _slice(x, axis: int, start: int, stop: int):
    index = [slice(None)] * x.ndim
    index[axis] = slice(start, stop)
    return x[tuple(index)]


@op("BatchNormalization")
def _batch_normalization(call, x, scale, bias, mean, var):
    import jax.numpy as jnp

    if call.attr("training_mode", 0) or call.n_outputs > 1:
        raise ValueError("BatchNormalization in training mode has no JAX lowering")
    shape = (1, -1) + (1,) * (x.ndim - 2)
    inverse = 1 / jnp.sqrt(jnp.reshape(var, shape) + call.attr("epsilon", 1e-5))
    centred = x - jnp.reshape(mean, shape)
    return centred * inverse * jnp.reshape(scale, shape) + jnp.reshape(bias, shape)
