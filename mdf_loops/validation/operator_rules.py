"""The layout rules of Scan, Loop and If nodes, checked on a model document.

How many values a node passes, how many formal inputs and outputs its bodies
take and give, its scan axes and directions, and which outputs its ports read:
the layouts :mod:`mdf_loops.model.signatures` describes. :mod:`mdf_loops.validation.rules`
walks the document and calls :func:`layout_output_count` on each loop node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mdf_loops.model.convention import output_index, variadic_items
from mdf_loops.model.signatures import IfSignature, LoopSignature, ScanSignature
from mdf_loops.validation.calls import direction_problem
from mdf_loops.validation.document import (
    as_mapping,
    entries,
    integer_or_none,
    list_or_none,
    output_port_of,
    parameter_value,
    stated_rank,
)

__all__ = ["FoundBody", "Report", "layout_output_count", "check_output_indices"]

#: ``report(path, message)`` records one problem at ``path``
Report = Callable[[tuple, str], None]


@dataclass(frozen=True)
class FoundBody:
    """A loop body found in a node parameter."""

    attribute: str
    path: tuple
    graph: Mapping
    formal_inputs: list | None
    formal_outputs: list | None


def layout_output_count(
    op: str,
    report: Report,
    node: Mapping,
    path: tuple,
    parameters: Mapping,
    args: Mapping,
    bodies: dict[str, FoundBody],
) -> int | None:
    """Report the layout problems of the ``onnx::<op>`` node; the number of outputs its
    bodies give it (None when the problems leave it unknown)."""
    rules: dict[str, Callable] = {"Scan": _scan, "Loop": _loop, "If": _if}
    return rules[op](report, node, path, parameters, args, bodies)


def check_output_indices(
    report: Report, node: Mapping, path: tuple, call_id: str, op: str, count: int
) -> None:
    """Report the output ports that read an output the node does not give."""
    for port_id, port in entries(node.get("output_ports")):
        index = output_index(as_mapping(port).get("value"), call_id)
        if index is not None and index >= count:
            report(
                path + ("output_ports", port_id, "value"),
                f"reads output {index} of '{call_id}', but its body gives "
                f"onnx::{op} {_count(count, 'output')}",
            )


def _scan(report: Report, node, path, parameters, args, bodies) -> int | None:
    """Initial states then scan inputs, their axes and directions, the body's counts."""
    values = _arity(report, args, ScanSignature.VALUES_ARGUMENT, path)
    m = integer_or_none(parameter_value(parameters, "num_scan_inputs"))
    if m is None:
        report(path + ("parameters",), "onnx::Scan needs an integer parameter 'num_scan_inputs'")
    body = bodies.get("body")
    if values is None or m is None:
        return len(body.formal_outputs) if body and body.formal_outputs is not None else None
    if not 1 <= m <= len(values):
        report(
            path + ("parameters", "num_scan_inputs"),
            f"is {m}, but the node passes {_count(len(values), 'value')} (initial states, "
            "then at least one scan input)",
        )
        return None
    n = len(values) - m
    expected = ScanSignature(num_states=n, num_scan_inputs=m, num_scan_outputs=0)
    ports = as_mapping(node.get("input_ports"))
    _axes(
        report,
        parameters,
        path,
        "scan_input_axes",
        "scan_input_directions",
        m,
        [stated_rank(ports.get(v)) for v in values[expected.node_scan_inputs]],
    )
    if body is None:
        return None
    where = path + ("parameters", "body")
    if body.formal_inputs is not None and len(body.formal_inputs) != expected.num_body_inputs:
        report(
            where,
            f"expects {len(values)} formal inputs ({_count(n, 'state')} + "
            f"{_count(m, 'scan input')}), found {len(body.formal_inputs)}",
        )
    if body.formal_outputs is None:
        return None
    if len(body.formal_outputs) < expected.num_body_outputs:
        report(
            where,
            f"expects at least {_count(n, 'formal output')} (the new "
            f"{_count(n, 'state')}, then scan-output elements), found "
            f"{len(body.formal_outputs)}",
        )
        return None
    signature = ScanSignature(n, m, num_scan_outputs=len(body.formal_outputs) - n)
    outputs = range(signature.num_node_outputs)[signature.node_scan_outputs]
    _axes(
        report,
        parameters,
        path,
        "scan_output_axes",
        "scan_output_directions",
        len(outputs),
        [stated_rank(output_port_of(node, parameters, j)) for j in outputs],
    )
    return signature.num_node_outputs


def _loop(report: Report, node, path, parameters, args, bodies) -> int | None:
    """The loop-carried values and the body's counts (iteration, condition, carried)."""
    name = LoopSignature.CARRIED_ARGUMENT
    carried = _arity(report, args, name, path) if name in args else []
    body = bodies.get("body")
    if body is None or carried is None or body.formal_outputs is None:
        return None
    where, n = path + ("parameters", "body"), len(carried)
    expected = LoopSignature(num_carried=n, num_scan_outputs=0)
    if body.formal_inputs is not None and len(body.formal_inputs) != expected.num_body_inputs:
        report(
            where,
            f"expects {expected.num_body_inputs} formal inputs (iteration number, "
            f"condition, {_count(n, 'loop-carried value')}), found "
            f"{len(body.formal_inputs)}",
        )
    if len(body.formal_outputs) < expected.num_body_outputs:
        report(
            where,
            f"expects at least {expected.num_body_outputs} formal outputs "
            f"(condition, {_count(n, 'loop-carried value')}, then scan-output "
            f"elements), found {len(body.formal_outputs)}",
        )
        return None
    return LoopSignature(n, len(body.formal_outputs) - expected.num_body_outputs).num_node_outputs


def _if(report: Report, node, path, parameters, args, bodies) -> int | None:
    """Branches without formal inputs, returning as many values as each other."""
    for body in bodies.values():
        if body.formal_inputs and len(body.formal_inputs) != IfSignature.num_body_inputs:
            report(
                path + ("parameters", body.attribute),
                f"expects no formal inputs (a branch reads the enclosing graph "
                f"through outer_scope_inputs), found {len(body.formal_inputs)}",
            )
    then, other = (bodies.get(branch) for branch in IfSignature.BRANCHES)
    if then is None or then.formal_outputs is None:
        return None
    if (
        other is not None
        and other.formal_outputs is not None
        and len(other.formal_outputs) != len(then.formal_outputs)
    ):
        report(
            path + ("parameters", "else_branch"),
            f"returns {_count(len(other.formal_outputs), 'value')} but then_branch returns "
            f"{len(then.formal_outputs)}; both must return the If node's outputs",
        )
    return IfSignature(len(then.formal_outputs)).num_node_outputs


def _arity(report: Report, args: Mapping, name: str, path: tuple) -> list[str] | None:
    """The expressions a variadic argument lists, or None when it is not a list literal."""
    value = args.get(name)
    try:
        return variadic_items(value)
    except SyntaxError:
        report(path + ("parameters",), f"argument '{name}' = {value!r} is not a valid expression")
        return None


def _axes(report: Report, parameters, path, axes_name, directions_name, count, ranks) -> None:
    axes = list_or_none(parameter_value(parameters, axes_name))
    if axes is not None:
        if len(axes) != count:
            report(
                path + ("parameters", axes_name),
                f"has {_count(len(axes), 'entry', 'entries')}, expected {count}",
            )
        # strict=False: a wrong count is reported above; the entries given are checked too
        for k, (axis, rank) in enumerate(zip(axes, ranks, strict=False)):
            if rank is not None and integer_or_none(axis) is not None and not -rank <= axis < rank:
                report(
                    path + ("parameters", axes_name),
                    f"axis {axis} of entry {k} is out of range for a value of rank {rank}",
                )
    directions = list_or_none(parameter_value(parameters, directions_name))
    if directions is not None:
        if len(directions) != count:
            report(
                path + ("parameters", directions_name),
                f"has {_count(len(directions), 'entry', 'entries')}, expected {count}",
            )
        message = direction_problem(directions)
        if message:
            report(path + ("parameters", directions_name), message)


def _count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 state``, ``2 states``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
