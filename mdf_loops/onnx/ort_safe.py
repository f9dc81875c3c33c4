"""Rewrites that keep onnxruntime from killing the process on valid ONNX models.

onnxruntime (1.31) dies of SIGFPE, taking the calling Python process with it, in
two places a valid model can reach with ordinary inputs:

* **Scan axes of empty values.** A Scan moves a scan axis other than 0 with its
  own internal transpose, which divides by zero when the tensor has no
  elements (a zero-length sequence scanned along axis 1, or empty per-iteration
  outputs stacked along axis 1). Separate ``Transpose`` nodes handle empty
  tensors, so the axis moves out of the Scan::

      Scan(x; scan_input_axes=[a])          Transpose(x; perm=[a, ...]) -> Scan(axis 0)
      Scan(...; scan_output_axes=[b]) -> y  Scan(axis 0) -> Transpose(perm=[1..b, 0, ...]) -> y

* **The smallest integer divided by -1.** ``Div`` and ``Mod`` of the smallest
  int32/int64 by -1 overflow, which the processor traps. The divisor -1 is
  replaced by 1, and the quotient negated where it was -1::

      Div(a, b) -> Where(b == -1, -Div(a, b'), Div(a, b'))    b' = Where(b == -1, 1, b)
      Mod(a, b) -> Mod(a, b')                                 (anything mod +-1 is 0)

  Negation wraps, so the smallest integer divided by -1 stays itself, as in
  numpy.

:func:`make_safe` applies both, at every depth of subgraphs; the values are
unchanged. It then applies :mod:`mdf_loops.onnx.zero_steps`, so
that loops running zero times give the reference answer instead of failing.
Moving an axis needs the rank of the value, and guarding a division
its element type: ONNX shape inference supplies both.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import onnx
from onnx import TensorProto, helper

from mdf_loops.errors import ModelError
from mdf_loops.model.signatures import ScanSignature
from mdf_loops.onnx.builder import NameAllocator, all_nodes, subgraphs
from mdf_loops.onnx.zero_steps import probe_zero_steps

__all__ = ["make_safe", "scan_axes_to_zero"]

_DEFAULT_DOMAINS = ("", "ai.onnx")
_SIGNED_32_64 = (TensorProto.INT32, TensorProto.INT64)


def make_safe(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model``, rewritten so onnxruntime cannot crash on it (see the module docstring).

    Returns ``model`` itself when it has no Scan with a non-zero axis and no
    ``Div`` or ``Mod`` (else a copy, with shape inference's types). Raises
    :class:`~mdf_loops.errors.ModelError` when the rank of a value whose scan axis
    must move is unknown. Then loops that may run zero times get the reference
    answer (:mod:`mdf_loops.onnx.zero_steps`): onnxruntime never
    runs a zero-length Scan.
    """
    return probe_zero_steps(_rewrite(model, axes=True, division=True))


def scan_axes_to_zero(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every Scan on axis 0 between ``Transpose`` nodes (the first rewrite only)."""
    return _rewrite(model, axes=True, division=False)


def _rewrite(model: onnx.ModelProto, *, axes: bool, division: bool) -> onnx.ModelProto:
    if not any(
        (axes and _scan_with_axes(node)) or (division and _is_division(node))
        for node in all_nodes(model.graph)
    ):
        return model
    try:
        rewritten = onnx.shape_inference.infer_shapes(model)
    except Exception as exc:  # onnx raises InferenceError and friends
        raise ModelError(f"ONNX shape inference failed: {exc}") from exc
    _Rewriter(NameAllocator.of_graph(rewritten.graph), axes, division).graph(rewritten.graph, {})
    return rewritten


def _scan_with_axes(node: onnx.NodeProto) -> bool:
    return (
        node.op_type == "Scan"
        and node.domain in _DEFAULT_DOMAINS
        and any(
            a.name in ("scan_input_axes", "scan_output_axes") and any(a.ints)
            for a in node.attribute
        )
    )


def _is_division(node: onnx.NodeProto) -> bool:
    return node.op_type in ("Div", "Mod") and node.domain in _DEFAULT_DOMAINS


@dataclass(frozen=True)
class _Tensor:
    elem: int  # TensorProto element type, 0 when unknown
    rank: int | None


def _tensors(graph: onnx.GraphProto) -> dict[str, _Tensor]:
    """What shape inference knows of the values of ``graph`` (not of its subgraphs)."""
    known = {t.name: _Tensor(t.data_type, len(t.dims)) for t in graph.initializer}
    for info in itertools.chain(graph.input, graph.value_info, graph.output):
        if not info.type.HasField("tensor_type"):
            continue
        tensor = info.type.tensor_type
        known[info.name] = _Tensor(
            tensor.elem_type, len(tensor.shape.dim) if tensor.HasField("shape") else None
        )
    return known


class _Rewriter:
    def __init__(self, names: NameAllocator, axes: bool, division: bool):
        self.names = names
        self.axes = axes
        self.division = division

    def graph(self, graph: onnx.GraphProto, outer: dict[str, _Tensor]) -> None:
        known = {**outer, **_tensors(graph)}
        nodes = []
        for node in graph.node:
            for g in subgraphs(node):
                self.graph(g, known)
            if self.axes and _scan_with_axes(node):
                nodes.extend(self.scan(node, known))
            elif self.division and _is_division(node) and _signed_integer(node, known):
                nodes.extend(self.divide(node, _element_type(node, known) or 0))
            else:
                nodes.append(node)
        del graph.node[:]
        graph.node.extend(nodes)

    # -- Scan axes

    def scan(self, node: onnx.NodeProto, known: dict[str, _Tensor]) -> list:
        attrs = {a.name: a for a in node.attribute}
        if "num_scan_inputs" not in attrs or "body" not in attrs:
            return [node]  # opset 8's Scan has no axes
        body = attrs["body"].g
        signature = ScanSignature.from_onnx(node, opset=9)  # scan axes exist from opset 9
        where = node.name or f"the Scan producing {list(node.output)}"
        before, after = [], []
        if "scan_input_axes" in attrs:
            for k, axis in enumerate(attrs["scan_input_axes"].ints):
                if axis == 0:
                    continue
                position = signature.node_scan_inputs.start + k
                name = node.input[position]
                rank = _rank(known.get(name), f"scan input {k} ('{name}') of {where}")
                axis %= rank
                moved = self.names.fresh(f"{name}_axis0")
                before.append(
                    helper.make_node(
                        "Transpose",
                        [name],
                        [moved],
                        perm=[axis] + [d for d in range(rank) if d != axis],
                    )
                )
                node.input[position] = moved
        if "scan_output_axes" in attrs:
            in_body = _tensors(body)
            for j, axis in enumerate(attrs["scan_output_axes"].ints):
                if axis == 0:
                    continue
                element = body.output[signature.body_scan_outputs.start + j].name
                rank = 1 + _rank(in_body.get(element), f"scan output {j} ('{element}') of {where}")
                axis %= rank
                position = signature.node_scan_outputs.start + j
                name = node.output[position]
                stacked = self.names.fresh(f"{name}_axis0")
                after.append(
                    helper.make_node(
                        "Transpose",
                        [stacked],
                        [name],
                        perm=list(range(1, axis + 1)) + [0] + list(range(axis + 1, rank)),
                    )
                )
                node.output[position] = stacked
        for name in ("scan_input_axes", "scan_output_axes"):
            if name in attrs:
                count = len(attrs[name].ints)
                del attrs[name].ints[:]
                attrs[name].ints.extend([0] * count)
        return before + [node] + after

    # -- integer division

    def divide(self, node: onnx.NodeProto, elem: int) -> list:
        """The guarded division; ``elem``: the element type of both operands (constants of
        that type, not CastLike, which onnxruntime cannot fold and logs a warning of)."""
        a, b = node.input
        fresh = self.names.fresh
        minus_one, one, is_minus_one, divisor = (
            fresh("minus_one"),
            fresh("one"),
            fresh("divisor_is_minus_one"),
            fresh("divisor"),
        )
        nodes = [
            helper.make_node(
                "Constant", [], [minus_one], value=helper.make_tensor("v", elem, [], [-1])
            ),
            helper.make_node("Constant", [], [one], value=helper.make_tensor("v", elem, [], [1])),
            helper.make_node("Equal", [b, minus_one], [is_minus_one]),
            helper.make_node("Where", [is_minus_one, one, b], [divisor]),
        ]
        divided = onnx.NodeProto()
        divided.CopyFrom(node)
        divided.input[1] = divisor
        if node.op_type == "Mod":
            return nodes + [divided]
        quotient, negated = fresh("quotient"), fresh("negated")
        divided.output[0] = quotient
        return nodes + [
            divided,
            helper.make_node("Neg", [quotient], [negated]),
            helper.make_node("Where", [is_minus_one, negated, quotient], [node.output[0]]),
        ]


def _signed_integer(node: onnx.NodeProto, known: dict[str, _Tensor]) -> bool:
    return _element_type(node, known) in _SIGNED_32_64


def _element_type(node: onnx.NodeProto, known: dict[str, _Tensor]) -> int | None:
    """The element type of a division's operands and result, where inference knows it."""
    tensor = known.get(node.output[0]) or known.get(node.input[0])
    return None if tensor is None else tensor.elem


def _rank(tensor: _Tensor | None, what: str) -> int:
    if tensor is None or tensor.rank is None:
        raise ModelError(
            f"the rank of {what} is unknown, and onnxruntime cannot scan it "
            "along a non-zero axis safely"
        )
    return tensor.rank
