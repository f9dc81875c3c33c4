"""Reductions and arg-reductions in torch (axes from the attribute or, newer opsets, an input)."""

from __future__ import annotations

import torch

from mdf_loops.backends.torch.registry import op
from mdf_loops.backends.torch.values import ints

#: reduce ops whose axes moved from an attribute to an input, and the opset that moved them
_AXES_INPUT_SINCE = {"ReduceSum": 13}
_AXES_INPUT_DEFAULT = 18


def _reduce_axes(call, x, axes) -> list[int] | None:
    """The axes to reduce, or None for all (``noop_with_empty_axes``: [] for none)."""
    since = _AXES_INPUT_SINCE.get(call.proto.op_type, _AXES_INPUT_DEFAULT)
    if call.opset >= since:
        chosen = ints(axes) if axes is not None else []
    else:
        chosen = list(call.attr("axes") or [])
    if not chosen:
        return [] if call.attr("noop_with_empty_axes", 0) else None
    return sorted({a % max(x.dim(), 1) for a in chosen})


def _reducer(name: str):
    def reduce(call, x, axes=None):
        dims = _reduce_axes(call, x, axes)
        if dims == []:
            return x
        dims = list(range(x.dim())) if dims is None else dims
        return _apply(name, x, dims, bool(call.attr("keepdims", 1)))

    return reduce


def _apply(name: str, x, dims: list[int], keep: bool):
    if name == "ReduceSum":
        return torch.sum(x, dim=dims, keepdim=keep).to(x.dtype)
    if name == "ReduceMean":
        return torch.mean(x, dim=dims, keepdim=keep)
    if name == "ReduceMax":
        return torch.amax(x, dim=dims, keepdim=keep) if x.numel() else _empty(x, dims, keep)
    if name == "ReduceMin":
        return torch.amin(x, dim=dims, keepdim=keep) if x.numel() else _empty(x, dims, keep)
    if name == "ReduceProd":
        result = x
        for d in sorted(dims, reverse=True):
            result = torch.prod(result, dim=d, keepdim=keep)
        return result.to(x.dtype)
    if name == "ReduceSumSquare":
        return torch.sum(x * x, dim=dims, keepdim=keep).to(x.dtype)
    if name == "ReduceL1":
        return torch.sum(torch.abs(x), dim=dims, keepdim=keep).to(x.dtype)
    if name == "ReduceL2":
        return torch.sqrt(torch.sum(x * x, dim=dims, keepdim=keep)).to(x.dtype)
    if name == "ReduceLogSum":
        return torch.log(torch.sum(x, dim=dims, keepdim=keep))
    return torch.logsumexp(x, dim=dims, keepdim=keep)  # ReduceLogSumExp


def _empty(x, dims: list[int], keep: bool):
    raise ValueError(f"cannot reduce an empty tensor of shape {tuple(x.shape)} over axes {dims}")


for _name in (
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceSumSquare",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
):
    op(_name)(_reducer(_name))


@op("ArgMax", "ArgMin")
def _arg(call, x):
    axis = call.attr("axis", 0) % max(x.dim(), 1)
    keep = bool(call.attr("keepdims", 1))
    source = x.flip(axis) if call.attr("select_last_index", 0) else x
    fn = torch.argmax if call.proto.op_type == "ArgMax" else torch.argmin
    index = fn(source, dim=axis, keepdim=keep)
    if call.attr("select_last_index", 0):
        index = x.shape[axis] - 1 - index
    return index.to(torch.int64)
