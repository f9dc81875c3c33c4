"""The batching transform of a whole ONNX model: the walk over its nodes, and the model
it gives with each output's form."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import onnx
from onnx import TensorProto, helper

from mdf_loops.backends.onnxruntime.batching.bodies import batched_info
from mdf_loops.backends.onnxruntime.batching.rules import RULES
from mdf_loops.backends.onnxruntime.batching.scope import (
    NotBatchable,
    Scope,
    Shape,
    known_shapes,
    refused,
)
from mdf_loops.backends.onnxruntime.guard import nesting_depth
from mdf_loops.model.signatures import LoopSignature
from mdf_loops.onnx.builder import NameAllocator, subgraphs
from mdf_loops.onnx.domains import RANDOM_OPERATORS

__all__ = ["BatchedModel", "OutputForm", "batch_model", "rewrite_nodes"]


@dataclass(frozen=True)
class OutputForm:
    """How an output of the batched model holds the settings' values: ``batched`` (the
    settings along the first axis) or one value every setting shares; ``lengths`` names
    the output with each setting's number of steps where its length differs between
    settings (the scan output of a loop that stops at a setting's own condition)."""

    batched: bool
    lengths: str | None = None


@dataclass(frozen=True)
class BatchedModel:
    """A model that runs ``size`` settings in one call, and the form of each output."""

    model: onnx.ModelProto
    size: int
    outputs: dict[str, OutputForm]


def batch_model(model: onnx.ModelProto, batched: Iterable[str], size: int) -> BatchedModel:
    """``model`` rewritten to run ``size`` settings at once: each input named in
    ``batched`` takes the settings along a new first axis (the others are shared).

    Raises :class:`NotBatchable` naming the node that has no rule
    (:mod:`~mdf_loops.backends.onnxruntime.batching.rules`).
    """
    inferred = _inferred(model)
    graph = inferred.graph
    batched = set(batched)
    unknown = batched - {value.name for value in graph.input}
    if unknown:
        raise NotBatchable(f"{sorted(unknown)} are not inputs of the model's graph")
    scope = Scope.of_graph(graph, size, NameAllocator.of_graph(graph))
    scope.batched.update(batched)
    rewrite_nodes(graph, scope)
    new = onnx.ModelProto()
    new.CopyFrom(inferred)
    out = new.graph
    del out.node[:]
    out.node.extend(scope.nodes)
    del out.value_info[:]
    inputs = [batched_info(v, size) if v.name in batched else v for v in graph.input]
    del out.input[:]
    out.input.extend(inputs)
    kept = [t for t in graph.initializer if t.name not in batched]
    del out.initializer[:]
    out.initializer.extend(kept)
    forms = _outputs(out, graph, scope)
    return BatchedModel(new, size, forms)


def _inferred(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with the shapes ONNX shape inference gives, and the ranks of loop outputs
    it leaves open (a carried value whose rank the body keeps, scan outputs), inferred
    again after each round until nothing is added."""
    for _ in range(1 + nesting_depth(model.graph)):
        try:
            model = onnx.shape_inference.infer_shapes(model)
        except Exception as exc:  # onnx's InferenceError and others: the model stays unbatched
            raise NotBatchable(f"ONNX shape inference fails on the model: {exc}") from None
        if not _add_loop_shapes(model.graph):
            break
    return model


def _add_loop_shapes(graph: onnx.GraphProto) -> bool:
    """Give the outputs of ``graph``'s loops (at every depth) the ranks their bodies keep,
    where shape inference gave none; whether any was added."""
    shapes = known_shapes(graph)
    added = False
    for node in graph.node:
        for g in subgraphs(node):
            added |= _add_loop_shapes(g)
        if node.op_type != "Loop" or node.domain not in ("", "ai.onnx"):
            continue
        body = next(subgraphs(node))
        signature = LoopSignature.from_onnx(node)
        inner = known_shapes(body)
        ins, outs = list(body.input), list(body.output)
        pairs = zip(ins[signature.body_carried], outs[signature.body_carried_outputs], strict=True)
        found: list[Shape | None] = [_kept(inner, given.name, value.name) for given, value in pairs]
        for value in outs[signature.body_scan_outputs]:
            shape = inner.get(value.name)
            found.append(None if shape is None else (None, *shape))
        kinds = [v.type.tensor_type.elem_type for v in outs[1:]]
        for name, shape, kind in zip(node.output, found, kinds, strict=False):
            if name and shape is not None and name not in shapes:
                _set_value_info(graph, name, kind, shape)
                added = True
    return added


def _kept(shapes: dict[str, Shape], given: str, returned: str) -> Shape | None:
    """The shape of a carried value whose rank the body keeps (dimensions that differ
    unknown), else None."""
    first, last = shapes.get(given), shapes.get(returned)
    if first is None or last is None or len(first) != len(last):
        return None
    return tuple(a if a == b else None for a, b in zip(first, last, strict=True))


def _set_value_info(graph: onnx.GraphProto, name: str, kind: int, shape: Shape) -> None:
    kept = [v for v in graph.value_info if v.name != name]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    graph.value_info.append(helper.make_tensor_value_info(name, kind, list(shape)))


def _outputs(out: onnx.GraphProto, graph: onnx.GraphProto, scope: Scope) -> dict[str, OutputForm]:
    """The batched graph's outputs (and the lengths of ragged ones); their forms by name."""
    forms: dict[str, OutputForm] = {}
    outputs = []
    for value in graph.output:
        if not scope.is_batched(value.name):
            forms[value.name] = OutputForm(False)
            outputs.append(value)
            continue
        info = batched_info(value, scope.size)
        lengths = scope.ragged.get(value.name)
        if lengths is not None:
            dims = info.type.tensor_type.shape.dim
            if len(dims) > 1:
                dims[1].Clear()
                dims[1].dim_param = "steps"
            name = scope.names.fresh(f"{value.name}_lengths")
            out.node.append(helper.make_node("Identity", [lengths], [name]))
            outputs.append(info)
            outputs.append(helper.make_tensor_value_info(name, TensorProto.INT64, [scope.size]))
            forms[value.name] = OutputForm(True, name)
            continue
        forms[value.name] = OutputForm(True)
        outputs.append(info)
    del out.output[:]
    out.output.extend(outputs)
    return forms


def rewrite_nodes(graph: onnx.GraphProto, scope: Scope) -> None:
    """Append ``graph``'s nodes to ``scope`` in their batched form: a node that no batched
    value reaches as it is, the others by their operator's rule."""
    for node in graph.node:
        used = [name for name in node.input if name]
        for g in subgraphs(node):
            used += sorted(outer_names(g))
        for name in used:
            if scope.is_ragged(name):
                raise refused(node, f"it uses '{name}', whose length differs between settings")
        if node.op_type in RANDOM_OPERATORS:  # one draw shared by a batch is not one per run
            raise refused(node, "it draws random numbers (a batch would share one draw)")
        if not any(scope.is_batched(name) for name in used):
            scope.nodes.append(node)
            continue
        rule = RULES.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if rule is None:
            raise refused(node, "the batching transform has no rule for this operator")
        rule(node, scope)


def outer_names(graph: onnx.GraphProto) -> set[str]:
    """The values ``graph`` (and its subgraphs) use from enclosing graphs."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    used: set[str] = set()
    for node in graph.node:
        used.update(name for name in node.input if name)
        for g in subgraphs(node):
            used |= outer_names(g)
        defined.update(node.output)
    used.update(v.name for v in graph.output)
    return used - defined
