"""ONNX operators that combine elements: reductions, matrix products, softmax."""

from __future__ import annotations

import numpy as np

from mdf_loops.backends.jax.registry import op
from mdf_loops.backends.jax.values import concrete, xp_of

_REDUCE = {
    "ReduceSum": "sum",
    "ReduceMean": "mean",
    "ReduceMax": "max",
    "ReduceMin": "min",
    "ReduceProd": "prod",
    "ReduceL1": "l1",
    "ReduceL2": "l2",
    "ReduceSumSquare": "sumsquare",
    "ReduceLogSumExp": "logsumexp",
}

#: the opset from which each reduction takes its axes as an input, not an attribute
_AXES_INPUT_FROM = {"ReduceSum": 13}


def _reduce(kind: str):
    def lower(call, x, axes=None):
        xp = xp_of(x)
        keepdims = bool(call.attr("keepdims", 1))
        if axes is not None:
            axes = [int(a) for a in concrete(axes, call.where, "axes").reshape(-1)]
        else:
            axes = call.attr("axes")
        if not axes:
            if call.attr("noop_with_empty_axes", 0):
                return x
            axes = None
        axis = None if axes is None else tuple(a + x.ndim if a < 0 else a for a in axes)
        if kind == "l1":
            return xp.sum(xp.abs(x), axis=axis, keepdims=keepdims).astype(x.dtype)
        if kind == "l2":
            return xp.sqrt(xp.sum(x * x, axis=axis, keepdims=keepdims)).astype(x.dtype)
        if kind == "sumsquare":
            return xp.sum(x * x, axis=axis, keepdims=keepdims).astype(x.dtype)
        if kind == "logsumexp":
            return xp.log(xp.sum(xp.exp(x), axis=axis, keepdims=keepdims)).astype(x.dtype)
        return getattr(xp, kind)(x, axis=axis, keepdims=keepdims).astype(x.dtype)

    return lower


for _op, _kind in _REDUCE.items():
    op(_op)(_reduce(_kind))


@op("ArgMax", "ArgMin")
def _arg(call, x):
    xp = xp_of(x)
    axis, keepdims = call.attr("axis", 0), bool(call.attr("keepdims", 1))
    fn = xp.argmax if call.proto.op_type == "ArgMax" else xp.argmin
    if call.attr("select_last_index", 0):
        flipped = xp.flip(x, axis)
        result = x.shape[axis] - 1 - fn(flipped, axis=axis)
    else:
        result = fn(x, axis=axis)
    result = result.astype(np.int64)
    return xp.expand_dims(result, axis) if keepdims else result


def full_matmul(a, b):
    """``a @ b`` with float32 products as accurate as float32 allows, as ONNX's ``MatMul``
    and ``Gemm`` (and onnxruntime) compute them. JAX's default precision lets a GPU use
    TF32 (a 10-bit mantissa) for float32 matrix products, and a TPU bfloat16 passes:
    results that differ from onnxruntime's in the fourth digit."""
    xp = xp_of(a, b)
    if xp is np:
        return np.matmul(a, b)
    import jax

    return xp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)


@op("MatMul")
def _matmul(call, a, b):
    return full_matmul(a, b)


@op("Gemm")
def _gemm(call, a, b, c=None):
    a = a.T if call.attr("transA", 0) else a
    b = b.T if call.attr("transB", 0) else b
    y = np.asarray(call.attr("alpha", 1.0), a.dtype) * full_matmul(a, b)
    if c is not None:
        y = y + np.asarray(call.attr("beta", 1.0), a.dtype) * c
    return y.astype(a.dtype)


@op("Softmax", "LogSoftmax")
def _softmax(call, x):
    xp = xp_of(x)
    axis = call.attr("axis", -1 if call.opset >= 13 else 1)
    shifted = x - xp.max(x, axis=axis, keepdims=True)
    log_norm = xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))
    if call.proto.op_type == "LogSoftmax":
        return (shifted - log_norm).astype(x.dtype)
    return xp.exp(shifted - log_norm).astype(x.dtype)


@op("CumSum")
def _cumsum(call, x, axis):
    xp = xp_of(x)
    axis = int(concrete(axis, call.where, "axis").reshape(()))
    if call.attr("reverse", 0):
        x = xp.flip(x, axis)
    y = xp.cumsum(x, axis=axis).astype(x.dtype)
    if call.attr("exclusive", 0):
        y = y - x
    return xp.flip(y, axis) if call.attr("reverse", 0) else y


@op("TopK")
def _top_k(call, x, k):
    xp = xp_of(x)
    count = int(concrete(k, call.where, "k").reshape(()))
    axis = call.attr("axis", -1)
    axis = axis + x.ndim if axis < 0 else axis
    keys = -x if call.attr("largest", 1) else x  # a stable sort keeps the lower index first
    if xp is np:  # numpy 1.x has no stable=
        order = np.argsort(keys, axis=axis, kind="stable")
    else:
        order = xp.argsort(keys, axis=axis, stable=True)
    indices = xp.take(order, np.arange(count), axis=axis)
    return xp.take_along_axis(x, indices, axis=axis), indices.astype(np.int64)
