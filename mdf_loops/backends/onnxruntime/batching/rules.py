"""How each ONNX operator is rewritten when some of its inputs carry the batch axis: one
rule per operator type (:data:`RULES`).

A rule gets the node and the :class:`~.scope.Scope` (which inputs are batched, their
per-setting shapes), appends the node's batched form to the scope and marks which of
its outputs are batched. Operators without a rule refuse (:class:`~.scope.NotBatchable`).

* Element-wise operators broadcast from the right: a batched operand of per-setting rank
  ``r`` in an output of rank ``R`` gets ``R - r`` axes of length 1 after the batch axis,
  so that the batch axis meets the batch axis.
* Operators with axes shift the axes of a batched input by one (negative axes counted
  from the per-setting rank first); ``Size`` and ``Shape`` of a batched value give the
  per-setting answer.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import helper

from mdf_loops.backends.onnxruntime.batching.branches import batched_if, batched_scan
from mdf_loops.backends.onnxruntime.batching.loop import batched_loop
from mdf_loops.backends.onnxruntime.batching.scope import Scope, refused

__all__ = ["RULES", "Rule"]

Rule = Callable[[onnx.NodeProto, Scope], None]


def _elementwise(node: onnx.NodeProto, scope: Scope) -> None:
    """Broadcasting operators: batched operands of lower rank get axes after the batch."""
    ranks = [scope.rank(name, node) if name else 0 for name in node.input]
    output_rank = max(ranks, default=0)
    inputs = []
    for name, rank in zip(node.input, ranks, strict=True):
        if name and scope.is_batched(name) and rank < output_rank:
            name = scope.unsqueezed(name, list(range(1, 1 + output_rank - rank)))
        inputs.append(name)
    scope.keep(node, inputs, batched=True)


def _first_only(node: onnx.NodeProto, scope: Scope) -> None:
    """Operators applied to their first input alone (the others: unbatched settings)."""
    _others_shared(node, scope)
    scope.keep(node, list(node.input), batched=True)


def _others_shared(node: onnx.NodeProto, scope: Scope) -> None:
    """Refuse where an input other than the first differs between settings."""
    for name in node.input[1:]:
        if name and scope.is_batched(name):
            raise refused(node, f"input '{name}' differs between settings")


def _axis(node: onnx.NodeProto, rank: int, default: int = 0) -> int:
    """The node's ``axis`` attribute for a per-setting input of ``rank``, made positive."""
    axis = next((a.i for a in node.attribute if a.name == "axis"), default)
    if not -rank <= axis < max(rank, 1):
        raise refused(node, f"axis {axis} is outside the input's rank {rank}")
    return axis + rank if axis < 0 else axis


def _with_axis(node: onnx.NodeProto, scope: Scope, default: int = 0) -> None:
    """Operators with one ``axis`` over their first input (Softmax, ArgMax, CumSum...)."""
    _first_batched_only(node, scope)
    axis = _axis(node, scope.rank(node.input[0], node), default)
    scope.keep(node, list(node.input), batched=True, axis=axis + 1)


def _first_batched_only(node: onnx.NodeProto, scope: Scope) -> None:
    if not scope.is_batched(node.input[0]):
        raise refused(node, "only its first input may differ between settings")
    _others_shared(node, scope)


def _gather(node: onnx.NodeProto, scope: Scope) -> None:
    data, indices = node.input[0], node.input[1]
    axis = _axis(node, scope.rank(data, node))
    if scope.is_batched(data) and scope.is_batched(indices):
        raise refused(node, "both its data and its indices differ between settings")
    if scope.is_batched(data):
        scope.keep(node, list(node.input), batched=True, axis=axis + 1)
    elif axis == 0:  # indices [B, ...] pick along the first axis: the batch comes first
        scope.keep(node, list(node.input), batched=True)
    else:
        raise refused(node, f"its indices differ between settings and its axis is {axis}, not 0")


def _size(node: onnx.NodeProto, scope: Scope) -> None:
    """The per-setting size: the batched size divided by the batch size."""
    size = scope.emit("Size", [node.input[0]])
    count = scope.emit(
        "Constant", [], value=helper.make_tensor("v", onnx.TensorProto.INT64, [], [scope.size])
    )
    scope.nodes.append(helper.make_node("Div", [size, count], [node.output[0]]))


def _shape(node: onnx.NodeProto, scope: Scope) -> None:
    """The per-setting shape: ``start`` and ``end`` moved past the batch axis."""
    rank = scope.rank(node.input[0], node)
    attrs = {a.name: a.i for a in node.attribute}
    start = _clamped(attrs.get("start", 0), rank)
    end = _clamped(attrs.get("end", rank), rank)
    scope.keep(node, list(node.input), batched=False, start=start + 1, end=end + 1)


def _clamped(index: int, rank: int) -> int:
    return min(max(index + rank if index < 0 else index, 0), rank)


def _constant_axes(node: onnx.NodeProto, scope: Scope, position: int) -> list[int] | None:
    """The axes given as the node's input ``position`` (a constant) or its ``axes``
    attribute; None where it has neither."""
    if len(node.input) > position and node.input[position]:
        value = scope.constant(node.input[position])
        if value is None or scope.is_batched(node.input[position]):
            raise refused(node, "its axes are not a constant")
        return [int(a) for a in value.reshape(-1)]
    for attr in node.attribute:
        if attr.name == "axes":
            return list(attr.ints)
    return None


def _shifted(node: onnx.NodeProto, axes: list[int], rank: int) -> list[int]:
    for axis in axes:
        if not -rank <= axis < max(rank, 1):
            raise refused(node, f"axis {axis} is outside rank {rank}")
    return [(a + rank if a < 0 else a) + 1 for a in axes]


def _with_axes(node: onnx.NodeProto, scope: Scope, axes: list[int], position: int) -> None:
    """``node`` with its axes replaced by ``axes``, where it took them (input or attribute)."""
    has_input = len(node.input) > position and node.input[position]
    if has_input or not any(a.name == "axes" for a in node.attribute):
        inputs = list(node.input[:position]) + [scope.ints(axes)] + list(node.input[position + 1 :])
        scope.keep(node, inputs, batched=True)
    else:
        scope.keep(node, list(node.input), batched=True, axes=axes)


def _unsqueeze(node: onnx.NodeProto, scope: Scope) -> None:
    _first_batched_only(node, scope)
    axes = _constant_axes(node, scope, 1)
    if axes is None:
        raise refused(node, "it has no axes")
    rank = scope.rank(node.input[0], node) + len(axes)
    _with_axes(node, scope, _shifted(node, axes, rank), 1)


def _squeeze(node: onnx.NodeProto, scope: Scope) -> None:
    _first_batched_only(node, scope)
    axes = _constant_axes(node, scope, 1)
    if axes is None:
        raise refused(node, "it squeezes every axis of length 1 (no axes given)")
    _with_axes(node, scope, _shifted(node, axes, scope.rank(node.input[0], node)), 1)


def _reduce(node: onnx.NodeProto, scope: Scope) -> None:
    """Reductions: the given axes shifted; no axes (all of them) become the per-setting ones."""
    _first_batched_only(node, scope)
    rank = scope.rank(node.input[0], node)
    axes = _constant_axes(node, scope, 1)
    attrs = {a.name: a.i for a in node.attribute}
    if not axes:
        if axes is not None and attrs.get("noop_with_empty_axes", 0):
            scope.keep(node, list(node.input), batched=True)
            return
        axes = list(range(rank))
    _with_axes(node, scope, _shifted(node, axes, rank), 1)


def _concat(node: onnx.NodeProto, scope: Scope) -> None:
    """Concat along the shifted axis, unbatched inputs repeated over the batch."""
    rank = scope.rank(node.input[0], node)
    axis = _axis(node, rank)
    inputs = [
        name if scope.is_batched(name) else scope.expanded(name, scope.rank(name, node))
        for name in node.input
    ]
    scope.keep(node, inputs, batched=True, axis=axis + 1)


def _slice(node: onnx.NodeProto, scope: Scope) -> None:
    _first_batched_only(node, scope)
    rank = scope.rank(node.input[0], node)
    axes = _constant_axes(node, scope, 3)
    if axes is None:
        count = scope.shape(node.input[1], node)
        if len(count) != 1 or not isinstance(count[0], int):
            raise refused(node, "its starts have no known length")
        axes = list(range(count[0]))
    inputs = list(node.input) + [""] * (4 - len(node.input))
    inputs[3] = scope.ints(_shifted(node, axes, rank))
    scope.keep(node, inputs, batched=True)


def _transpose(node: onnx.NodeProto, scope: Scope) -> None:
    rank = scope.rank(node.input[0], node)
    perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), None)
    if perm is None:
        perm = list(reversed(range(rank)))
    scope.keep(node, list(node.input), batched=True, perm=[0] + [p + 1 for p in perm])


def _reshape(node: onnx.NodeProto, scope: Scope) -> None:
    """The batch axis in front of the new shape (its zeros copy the same axes as before)."""
    _first_batched_only(node, scope)
    shape = scope.emit("Concat", [scope.ints([scope.size]), node.input[1]], axis=0)
    scope.keep(node, [node.input[0], shape], batched=True)


def _expand(node: onnx.NodeProto, scope: Scope) -> None:
    _first_batched_only(node, scope)
    rank = scope.rank(node.input[0], node)
    length = scope.shape(node.input[1], node)
    if len(length) != 1 or not isinstance(length[0], int):
        raise refused(node, "its shape has no known length")
    data = scope.unsqueezed(node.input[0], list(range(1, 1 + length[0] - rank)))
    front = [scope.size] + [1] * max(rank - length[0], 0)
    shape = scope.emit("Concat", [scope.ints(front), node.input[1]], axis=0)
    scope.keep(node, [data, shape], batched=True)


def _matmul(node: onnx.NodeProto, scope: Scope) -> None:
    """Matrix products: batch axes aligned as for element-wise operators, where the
    per-setting product of a batched vector stays a product of the same vectors."""
    left, right = node.input[0], node.input[1]
    ranks = {name: scope.rank(name, node) for name in (left, right)}
    batched = {name for name in (left, right) if scope.is_batched(name)}
    if right in batched and ranks[right] == 1:
        _matrix_times_vectors(node, scope, ranks[left], left in batched)
        return
    if left in batched and ranks[left] == 1 and (right in batched or ranks[right] > 2):
        raise refused(node, "its left operand is a vector that differs between settings")
    top = max(ranks.values())
    inputs = [
        scope.unsqueezed(name, list(range(1, 1 + top - ranks[name])))
        if name in batched and ranks[name] >= 2
        else name
        for name in (left, right)
    ]
    scope.keep(node, inputs, batched=True)


def _matrix_times_vectors(node: onnx.NodeProto, scope: Scope, rank: int, both: bool) -> None:
    """A product with a vector per setting on the right: the vectors as columns of one
    matrix per setting (axes of length 1 where the left has more), squeezed after."""
    if both and rank == 1:
        raise refused(node, "it takes the dot product of two vectors that differ between settings")
    ones = max(rank - 2, 0)
    column = scope.unsqueezed(node.input[1], [*range(1, 1 + ones), ones + 2])
    product = scope.emit("MatMul", [node.input[0], column])
    scope.nodes.append(helper.make_node("Squeeze", [product, scope.ints([-1])], [node.output[0]]))
    scope.batched.add(node.output[0])


_ELEMENTWISE = (
    "Add Sub Mul Div Pow Mod Max Min Sum Mean Equal Less LessOrEqual Greater GreaterOrEqual "
    "And Or Xor Where BitShift BitwiseAnd BitwiseOr BitwiseXor"
)
_UNARY = (
    "Identity Cast Neg Abs Sqrt Exp Log Tanh Sigmoid Relu Not Floor Ceil Round Sign Sin Cos "
    "Tan Asin Acos Atan Sinh Cosh Asinh Acosh Atanh Reciprocal Erf Softplus Softsign IsNaN "
    "IsInf LeakyRelu Elu Selu Celu HardSigmoid HardSwish Mish Gelu BitwiseNot Clip CastLike"
)
_REDUCTIONS = (
    "ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum "
    "ReduceLogSumExp ReduceSumSquare"
)

#: the rule of each operator of the default ONNX domain, by operator type
RULES: dict[str, Rule] = {
    **{op: _elementwise for op in _ELEMENTWISE.split()},
    **{op: _first_only for op in _UNARY.split()},
    **{op: _reduce for op in _REDUCTIONS.split()},
    **{op: _with_axis for op in ("ArgMax", "ArgMin", "Flatten")},
    "Softmax": lambda node, scope: _with_axis(node, scope, default=-1),
    "LogSoftmax": lambda node, scope: _with_axis(node, scope, default=-1),
    "Gather": _gather,
    "Size": _size,
    "Shape": _shape,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": _concat,
    "Slice": _slice,
    "Transpose": _transpose,
    "Reshape": _reshape,
    "Expand": _expand,
    "MatMul": _matmul,
    "Loop": batched_loop,
    "Scan": batched_scan,
    "If": batched_if,
}
