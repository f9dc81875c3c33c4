"""Defaults of an exported model's inputs as optional inputs, not initializers.

ONNX lets an initializer of an input's name be that input's default, and
onnxruntime runs such a model, but it logs a WARNING for each one when it loads
the model ("Initializer x0 appears in graph inputs and will not be treated as
constant value/weight"). :func:`optional_defaults` writes each such input as an
input of ``optional`` type instead, which a session may leave out::

    input x0: tensor, initializer x0 = d   ->   input x0: optional(tensor)
                                                x0' = If(OptionalHasElement(x0),
                                                         then: OptionalGetElement(x0),
                                                         else: Constant(d))
                                                (every use of x0 reads x0')

so a session run without ``x0`` computes with the default, one fed ``x0`` (an
array, as before) with that value, and loading logs nothing. The optional
operators need opset 15 (IR version 8); an older model keeps its initializers.
"""

from __future__ import annotations

import copy

import onnx
from onnx import helper

from mdf_loops.onnx.builder import NameAllocator, subgraphs

__all__ = ["optional_defaults"]

_MIN_OPSET = 15


def optional_defaults(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with each input's default as shown above (``model`` itself when none)."""
    graph = model.graph
    defaulted = {t.name for t in graph.initializer} & {i.name for i in graph.input}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if not defaulted or opset < _MIN_OPSET or defaulted & {o.name for o in graph.output}:
        return model
    result = copy.deepcopy(model)
    graph = result.graph
    names = NameAllocator.of_graph(graph)
    defaults = {t.name: t for t in graph.initializer if t.name in defaulted}
    renamed = {name: names.fresh(f"{name}_or_default") for name in defaults}
    _rename_uses(graph, renamed)
    prologue = []
    for value in graph.input:
        if value.name not in defaults:
            continue
        tensor_type = copy.deepcopy(value.type)
        given, got, default = (
            names.fresh(f"{value.name}_{hint}") for hint in ("given", "value", "default")
        )
        prologue += [
            helper.make_node("OptionalHasElement", [value.name], [given]),
            helper.make_node(
                "If",
                [given],
                [renamed[value.name]],
                then_branch=_branch(
                    "given",
                    helper.make_node("OptionalGetElement", [value.name], [got]),
                    tensor_type,
                ),
                else_branch=_branch(
                    "default",
                    helper.make_node("Constant", [], [default], value=defaults[value.name]),
                    tensor_type,
                ),
            ),
        ]
        value.type.CopyFrom(helper.make_optional_type_proto(tensor_type))
    kept = [t for t in graph.initializer if t.name not in defaults]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = prologue + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    result.ir_version = max(result.ir_version, 8)
    return result


def _branch(name: str, node: onnx.NodeProto, value_type: onnx.TypeProto) -> onnx.GraphProto:
    output = helper.make_value_info(node.output[0], value_type)
    return helper.make_graph([node], name, [], [output])


def _rename_uses(graph: onnx.GraphProto, renamed: dict[str, str]) -> None:
    """Rename the reads of ``renamed``'s names in ``graph`` and in the subgraphs that do not
    define a value of the same name themselves."""
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name in renamed:
                node.input[k] = renamed[name]
        for body in subgraphs(node):
            defined = {v.name for v in body.input} | {t.name for t in body.initializer}
            defined |= {o for n in body.node for o in n.output}
            inner = {k: v for k, v in renamed.items() if k not in defined}
            if inner:
                _rename_uses(body, inner)
