"""The text of the pictures of :mod:`mdf_loops.render`: node and loop labels, short values,
wrapped expressions, and the constants folded into the nodes that read them."""

from __future__ import annotations

import html
from typing import Any

import numpy as np
from modeci_mdf.mdf import Graph, Node, Parameter

from mdf_loops.model.convention import (
    BODY_ATTRIBUTES,
    function_parameter,
    loop_bodies,
    output_index,
    variadic_items,
)
from mdf_loops.model.values import is_encoded_tensor

_LINE = 48  # longest label line, in characters


def loop_label(node: Node, op: str, call: Parameter) -> str:
    lines = [f"<b>{text(node.id)}</b>: onnx::{op}"]
    args = call.args or {}
    if op == "Loop":
        trip, condition = args.get("M"), args.get("cond")
        lines.append(f"trip count: {text(describe_argument(node, trip)) if trip else 'none'}")
        lines.append(
            f"condition: {text(describe_argument(node, condition)) if condition else 'none'}"
        )
        if not trip and not condition:
            lines.append("runs until the iteration limit")
    elif op == "If":
        lines.append(f"condition: {text(describe_argument(node, args.get('cond')))}")
    skipped = set(BODY_ATTRIBUTES[op]) | {call.id} | set(_argument_names(call))
    for parameter in node.parameters:
        if parameter.id not in skipped and not parameter.function:
            lines.append(f"{text(parameter.id)} = {text(short_value(parameter.value))}")
    return "".join(f"{line}<br align='left'/>" for line in lines)


def _argument_names(call: Parameter) -> list[str]:
    """The names a call's arguments list (the items of list arguments too)."""
    names = []
    for expression in (call.args or {}).values():
        try:
            names += variadic_items(expression) or [str(expression)]
        except SyntaxError:
            continue
    return names


def describe_argument(node: Node, expression: Any) -> str:
    """An argument as written, with the value of the constant parameter it names."""
    for parameter in node.parameters:
        if parameter.id == expression and parameter.value is not None and not parameter.function:
            return f"{expression} = {short_value(parameter.value)}"
    return str(expression)


def node_label(node: Node, call: Parameter | None, reads: dict[str, str] | None = None) -> str:
    lines = [f"<b>{text(node.id)}</b>"]
    if call is not None:
        if call.function.startswith("onnx::"):
            lines.append(text(call.function))
        else:
            arguments = ", ".join(f"{k}={v}" for k, v in (call.args or {}).items())
            lines.append(text(f"{call.function}({arguments})"))
    small = "<font point-size='9'>{}</font>"
    for function in getattr(node, "functions", None) or []:
        lines.append(small.format(text(f"{function.id} = {function.function or function.value}")))
    for parameter in node.parameters:
        if parameter is not call and not parameter.function:
            lines.append(
                small.format(f"{text(parameter.id)} = {text(short_value(parameter.value))}")
            )
    for port_id, value in (reads or {}).items():
        lines.append(small.format(_wrapped(f"{port_id} = {value}")))
    for port in node.output_ports:
        if call is None or (port.value != call.id and output_index(port.value, call.id) is None):
            lines.append(small.format(_wrapped(f"{port.id} = {port.value}")))
    return html_label("<br/>".join(lines))


def _wrapped(text: str) -> str:
    """HTML-escaped ``text`` broken into lines of at most ``_LINE`` characters at spaces
    (an expression is shown whole, never cut)."""
    words, lines, line = " ".join(str(text).split()).split(" "), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > _LINE:
            lines.append(line)
            line = "    " + word  # continuation lines are indented
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "<br/>".join(html.escape(item, quote=True) for item in lines)


def constant_values(graph: Graph) -> dict[tuple[str, str], str]:
    """``(receiver node, port) -> value`` for each edge that carries a constant: from an
    ``onnx::Constant`` node or a node of constant parameters with no inputs."""
    values: dict[tuple[str, str], str] = {}
    by_id = {n.id: n for n in graph.nodes}
    for edge in graph.edges:
        value = _constant_output(by_id.get(edge.sender), edge.sender_port)
        if value is not None:
            values[(edge.receiver, edge.receiver_port)] = value
    return values


def _constant_output(node: Node | None, port_id: str) -> str | None:
    if node is None or node.input_ports:
        return None
    port = next((p for p in node.output_ports if p.id == port_id), None)
    parameters = {p.id: p for p in node.parameters}
    call = function_parameter(node)
    if port is None:
        return None
    if call is not None:
        if call.function != "onnx::Constant" or port.value != call.id:
            return None
        held = [p for p in node.parameters if p is not call and p.value is not None]
        return short_value(held[0].value) if len(held) == 1 else None
    parameter = parameters.get(port.value) if isinstance(port.value, str) else None
    if (
        parameter is not None
        and parameter.value is not None
        and parameter.function is None
        and not isinstance(parameter.value, str)
        and not parameter.default_initial_value
    ):
        return short_value(parameter.value)
    return None


def parameters_read_by_bodies(node: Node, call: Parameter) -> list[Parameter]:
    """The loop node's parameters its bodies read as outer-scope values."""
    read: set[str] = set()
    for body in loop_bodies(node).values():
        read.update(str(x) for x in (body.metadata or {}).get("outer_scope_inputs") or [])
    ports = {p.id for p in node.input_ports}
    return [
        p
        for p in node.parameters
        if p.id in read and p.id not in ports and p is not call and not p.function
    ]


def short_value(value: Any) -> str:
    """A parameter value in a few characters: small values as written, arrays by type and shape."""
    if is_encoded_tensor(value):
        shape = ", ".join(str(d) for d in value["shape"])
        data = value["data"]
        return f"{value['dtype']}[{shape}]" + (f" {data}" if len(data) <= 4 else "")
    if isinstance(value, dict):
        return "{...}"
    if isinstance(value, (list, tuple)):
        try:
            array = np.asarray(value)
        except ValueError:  # ragged
            return f"list of {len(value)}"
        if array.dtype.kind in "biuf":
            if array.size > 4:
                return f"{array.dtype}[{', '.join(map(str, array.shape))}]"
            return np.array2string(array, precision=4, separator=", ")
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def text(value: Any) -> str:
    """HTML-escaped text, cut to one short line."""
    text = " ".join(str(value).split())
    if len(text) > _LINE:
        text = text[: _LINE - 3] + "..."
    return html.escape(text, quote=True)


def html_label(markup: str) -> str:
    return f"<{markup}>"


def int_parameter(node: Node, parameter_id: str, default: int) -> int:
    for parameter in node.parameters:
        if parameter.id == parameter_id:
            try:
                return int(parameter.value)
            except (TypeError, ValueError):
                return default
    return default
