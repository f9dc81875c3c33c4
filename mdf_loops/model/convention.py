"""The loop-node convention: how Scan, Loop and If live in an MDF model.

A loop node is an ordinary MDF :class:`~modeci_mdf.mdf.Node` (see
``docs/representation.md`` and ``schemas/loop-node.schema.json``):

* a function parameter ``Parameter(function="onnx::Scan" | "onnx::Loop" | "onnx::If",
  args=...)`` whose args bind the operator's formal inputs; a variadic input is a
  list expression, e.g. ``{"initial_state_and_scan_inputs": "[h0, x]"}``;
* one parameter per ONNX attribute, named after it; a graph attribute (``body``,
  ``then_branch``, ``else_branch``) holds ``{"graph_<id>": Graph}``, the form
  modeci-mdf's own ONNX importer writes;
* output ports ``<function parameter>[i]`` for the operator's i-th output.

A body is a nested MDF :class:`~modeci_mdf.mdf.Graph` whose ``metadata`` names its
signature, because ONNX binds body inputs and outputs by position:

* ``formal_inputs``: input-port ids, in order; each binds every port with that id;
* ``formal_outputs``: ``"node.port"`` output ports, in order;
* ``outer_scope_inputs``: input-port ids the body reads from the enclosing graph;
  the loop node carries an input port (or parameter) of the same id.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from modeci_mdf.mdf import Graph, Node, Parameter

from mdf_loops.errors import ModelError
from mdf_loops.model.compat import input_default
from mdf_loops.model.references import is_python_name

__all__ = [
    "BODY_ATTRIBUTES",
    "CONTROL_FLOW_FUNCTIONS",
    "BodySignature",
    "body_graph",
    "wrap_body",
    "body_signature",
    "set_body_signature",
    "function_parameter",
    "loop_bodies",
    "variadic_items",
    "quoted_name",
    "output_reference",
    "output_index",
    "port_type",
]

#: Graph-valued attributes of each control-flow operator.
BODY_ATTRIBUTES: Mapping[str, tuple[str, ...]] = {
    "Scan": ("body",),
    "Loop": ("body",),
    "If": ("then_branch", "else_branch"),
}

#: MDF function names of the control-flow operators.
CONTROL_FLOW_FUNCTIONS: Mapping[str, str] = {f"onnx::{op}": op for op in BODY_ATTRIBUTES}


@dataclass(frozen=True)
class BodySignature:
    """Ordered formal inputs and outputs of a body graph, and its outer-scope reads."""

    formal_inputs: tuple[str, ...]
    formal_outputs: tuple[tuple[str, str], ...]
    outer_scope_inputs: tuple[str, ...] = ()

    def to_metadata(self) -> dict:
        return {
            "formal_inputs": list(self.formal_inputs),
            "formal_outputs": [f"{n}.{p}" for n, p in self.formal_outputs],
            "outer_scope_inputs": list(self.outer_scope_inputs),
        }


def body_graph(value: Any, where: str = "body") -> Graph:
    """The body ``Graph`` held by a graph-attribute parameter value.

    Accepts the stored form ``{"graph_<id>": Graph | dict}`` (as written by
    modeci-mdf's importer, or as read back from JSON/YAML), a ``Graph``, or a
    graph dict.
    """
    if isinstance(value, Graph):
        return value
    if isinstance(value, Mapping):
        if len(value) == 1:
            ((key, inner),) = value.items()
            if isinstance(key, str) and key.startswith("graph_"):
                return body_graph(inner, where)
        if "id" in value and ("nodes" in value or "metadata" in value):
            try:
                return Graph.from_dict(dict(value))
            except Exception as exc:  # modelspec/cattrs raise many types
                raise ModelError(f"{where}: not a valid MDF graph ({exc})") from exc
    missing_id = isinstance(value, Mapping) and "id" not in value and "nodes" in value
    raise ModelError(
        f"{where}: expected a body graph as {{'graph_<id>': Graph}}, "
        + (
            'got a graph without \'id\' (write "id": "<id>" in it)'
            if missing_id
            else f"got {type(value).__name__}"
        )
    )


def wrap_body(graph: Graph) -> dict:
    """The parameter value that stores ``graph`` as a body."""
    return {f"graph_{graph.id}": graph}


def set_body_signature(
    graph: Graph,
    formal_inputs: list[str] | tuple[str, ...],
    formal_outputs: list[str] | tuple[str, ...],
    outer_scope_inputs: list[str] | tuple[str, ...] = (),
) -> Graph:
    """Write the signature into ``graph.metadata`` (outputs as ``"node.port"``)."""
    signature = BodySignature(
        tuple(formal_inputs),
        tuple(_split_output_ref(ref, graph.id) for ref in formal_outputs),
        tuple(outer_scope_inputs),
    )
    graph.metadata = {**(graph.metadata or {}), **signature.to_metadata()}
    return graph


def _split_output_ref(ref: Any, graph_id: str) -> tuple[str, str]:
    if isinstance(ref, (list, tuple)) and len(ref) == 2:
        return str(ref[0]), str(ref[1])
    if isinstance(ref, str) and ref.count(".") == 1:
        node, port = ref.split(".")
        return node, port
    raise ModelError(f"graph '{graph_id}': formal output {ref!r} must be 'node_id.port_id'")


def body_signature(graph: Graph) -> BodySignature:
    """Read and check the signature of a body graph.

    Raises :class:`ModelError` naming the graph when the metadata is missing, an
    output port does not exist, or an unconnected input port is neither a formal
    input nor an outer-scope input (it would silently read zeros).
    """
    meta = graph.metadata or {}
    where = f"graph '{graph.id}'"
    if "formal_inputs" not in meta or "formal_outputs" not in meta:
        raise ModelError(
            f"{where}: a loop body needs metadata 'formal_inputs' and "
            "'formal_outputs' (ONNX binds body inputs and outputs by position)"
        )
    for key in ("formal_inputs", "formal_outputs", "outer_scope_inputs"):
        if not isinstance(meta.get(key) or [], (list, tuple)):
            raise ModelError(
                f"{where}: metadata '{key}' must be a list, not {type(meta[key]).__name__}"
            )
    formal_inputs = tuple(str(x) for x in meta["formal_inputs"])
    outer = tuple(str(x) for x in meta.get("outer_scope_inputs") or ())
    outputs = tuple(_split_output_ref(r, graph.id) for r in meta["formal_outputs"])
    if len(set(formal_inputs)) != len(formal_inputs):
        raise ModelError(f"{where}: formal_inputs repeat a name: {list(formal_inputs)}")
    clash = set(formal_inputs) & set(outer)
    if clash:
        raise ModelError(f"{where}: {sorted(clash)} listed both as formal and outer-scope inputs")
    nodes = {n.id: n for n in graph.nodes}
    for node_id, port_id in outputs:
        node = nodes.get(node_id)
        if node is None or all(p.id != port_id for p in node.output_ports):
            raise ModelError(
                f"{where}: formal output '{node_id}.{port_id}' is not an output port "
                f"of the body (nodes: {sorted(nodes)})"
            )
    bound = set(formal_inputs) | set(outer)
    received = {(e.receiver, e.receiver_port) for e in graph.edges}
    for node in graph.nodes:
        for port in node.input_ports:
            if (node.id, port.id) in received or port.id in bound:
                continue
            if input_default(port) is not None:
                continue
            raise ModelError(
                f"{where}: input port '{node.id}.{port.id}' has no incoming edge and is "
                "neither in formal_inputs nor in outer_scope_inputs"
            )
    return BodySignature(formal_inputs, outputs, outer)


def function_parameter(node: Node) -> Parameter | None:
    """The parameter of ``node`` that calls a function, if any."""
    for p in node.parameters:
        if p.function:
            return p
    return None


def loop_bodies(node: Node) -> dict[str, Graph]:
    """The body graphs of a control-flow node, by attribute name ({} for others)."""
    fp = function_parameter(node)
    if fp is None or fp.function not in CONTROL_FLOW_FUNCTIONS:
        return {}
    op = CONTROL_FLOW_FUNCTIONS[fp.function]
    params = {p.id: p for p in node.parameters}
    bodies = {}
    for attr in BODY_ATTRIBUTES[op]:
        if attr not in params:
            raise ModelError(f"node '{node.id}': {fp.function} needs a '{attr}' parameter")
        bodies[attr] = body_graph(params[attr].value, f"node '{node.id}' parameter '{attr}'")
    return bodies


def variadic_items(expression: Any) -> list[str] | None:
    """The items of a variadic argument written as a list expression ``"[h0, x]"``.

    None when the argument is not a list literal (its length is then unknown);
    raises SyntaxError for text that is not an expression.
    """
    if isinstance(expression, list):
        return [str(e) for e in expression]
    if not isinstance(expression, str):
        return None
    text = expression.strip()
    if is_python_name(text):
        return None  # one name (a list held by a port or parameter): no parse
    if text[:1] == "[" and text[-1:] == "]":
        names = [item.strip() for item in text[1:-1].split(",")]
        if all(is_python_name(name) for name in names):  # "[h0, x]": the items as unparsed
            return names
    tree = ast.parse(text, mode="eval").body
    if isinstance(tree, (ast.List, ast.Tuple)):
        return [ast.unparse(e) for e in tree.elts]
    return None


def quoted_name(item: str) -> str | None:
    """The name in a variadic item written as a string literal (``"'_59'"``), else None.

    modeci-mdf's ``pytorch_to_mdf`` writes a variadic argument as ``"['_59', '_61']"``,
    and its engine binds each quoted name the node knows to that name's value; the
    scheduler and the exporter read such an item the same way.
    """
    text = item.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" and is_python_name(text[1:-1]):
        return text[1:-1]
    return None


def output_reference(expression: Any) -> tuple[str, int] | None:
    """``(call id, i)`` for an output-port value ``"<call id>[i]"``, else None."""
    if not isinstance(expression, str):
        return None
    try:
        tree = ast.parse(expression.strip(), mode="eval").body
    except SyntaxError:
        return None
    if (
        isinstance(tree, ast.Subscript)
        and isinstance(tree.value, ast.Name)
        and isinstance(tree.slice, ast.Constant)
        and type(tree.slice.value) is int
    ):
        return tree.value.id, tree.slice.value
    return None


def output_index(expression: Any, call_id: str | None) -> int | None:
    """``i`` for an output-port value ``"<call_id>[i]"``, else None."""
    reference = output_reference(expression)
    return reference[1] if reference is not None and reference[0] == call_id else None


def port_type(*dims: int | str, dtype: str | np.dtype = "float64") -> dict:
    """Port metadata declaring an ONNX tensor type.

    ``InputPort(id="x", metadata=port_type("steps", 3))``.

    ``dtype``: a numpy dtype or its name. A str dimension is a free size.
    modeci-mdf's own ``shape`` field reads a missing shape as ``()``, so it cannot
    say "unknown"; the exporter and ``mdf-loops run`` read this declaration instead.
    """
    elem = _ELEMENT_TYPES.get(dtype)
    if elem is None:
        from onnx import helper

        from mdf_loops.model.values import dtype_from_name

        numpy_dtype = dtype if isinstance(dtype, np.dtype) else dtype_from_name(dtype)
        elem = int(helper.np_dtype_to_tensor_dtype(numpy_dtype))
    shape = [_dimension(d) for d in dims]
    tensor_type = {"elemType": elem, "shape": {"dim": shape} if shape else {}}
    return {"onnx_type": {"tensorType": tensor_type}}


#: ``TensorProto`` element types of the dtypes most ports declare, by name and by numpy
#: dtype (fixed by the ONNX standard; the others are asked of onnx)
_ELEMENT_TYPES: dict[str | np.dtype, int] = {
    "float32": 1,
    "int32": 6,
    "int64": 7,
    "bool": 9,
    "float64": 11,
}
_ELEMENT_TYPES.update({np.dtype(name): elem for name, elem in list(_ELEMENT_TYPES.items())})


def _dimension(size: int | str) -> dict:
    """One dimension as protobuf's JSON form of an ONNX ``TensorShapeProto.Dimension``
    writes it (an int64 as text)."""
    if isinstance(size, str):
        return {"dimParam": size}
    if isinstance(size, int):
        return {"dimValue": str(int(size))}
    raise ModelError(f"a dimension is a size or a name, found {size!r:.40}")
