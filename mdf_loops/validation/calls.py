"""The calls of a model that :func:`mdf_loops.run` refuses before evaluating anything.

Three rules, written once and applied by both :func:`mdf_loops.validate` (on a
model document, through :mod:`mdf_loops.validation.rules`) and :func:`mdf_loops.run`
(on the loaded model, :func:`check_calls`), so the two agree:

* a parameter's or function's ``function`` that names no registered function and
  no name the node defines (``"function": "linaer"``): modeci-mdf would evaluate
  the name as an expression and fail with text that names nothing;
* an argument an ``onnx::Scan``, ``onnx::Loop`` or ``onnx::If`` call does not
  take (``initial_state_and_scan_input``), and a required one that is missing;
* a scan direction other than 0 (forward) and 1 (backward), which a run would
  otherwise read as a direction;
* a parameter or output port whose value is one name the node does not define
  (except the text of a string attribute of an ONNX operator the node calls, a
  parameter ``"mode": "constant"`` beside ``onnx::Pad``:
  :func:`mdf_loops.onnx.attributes.is_attribute_text`);
* a graph written where a node belongs (what stock modeci-mdf's ``pytorch_to_mdf``
  writes for a loop), whose nodes a run would silently leave out (in a loaded model;
  in a file's document: :func:`mdf_loops.model.documents.graphs_as_nodes`).
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable, Mapping
from typing import Any

from modeci_mdf.mdf import Graph, Model, Node

from mdf_loops.errors import ModelError, Problem, did_you_mean
from mdf_loops.model.convention import CONTROL_FLOW_FUNCTIONS, body_graph
from mdf_loops.model.documents import format_path, graph_as_node, refuse
from mdf_loops.model.signatures import IfSignature, LoopSignature, ScanSignature
from mdf_loops.onnx.attributes import is_attribute_text, string_attributes
from mdf_loops.safety.checks import function_names, known_function

__all__ = [
    "CALL_ARGUMENTS",
    "REQUIRED_ARGUMENTS",
    "function_problem",
    "argument_problems",
    "name_problem",
    "direction_problem",
    "call_problems",
    "check_calls",
]

#: the arguments each control-flow call takes (ONNX's formal input names); its
#: attributes (``body``, ``num_scan_inputs``, ...) are parameters of the node
CALL_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "Scan": (ScanSignature.VALUES_ARGUMENT, ScanSignature.SEQUENCE_LENS_ARGUMENT),
    "Loop": (
        LoopSignature.TRIP_COUNT_ARGUMENT,
        LoopSignature.CONDITION_ARGUMENT,
        LoopSignature.CARRIED_ARGUMENT,
    ),
    "If": (IfSignature.CONDITION_ARGUMENT,),
}
#: the arguments without which a control-flow call cannot run
REQUIRED_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "Scan": (ScanSignature.VALUES_ARGUMENT,),
    "Loop": (),
    "If": (IfSignature.CONDITION_ARGUMENT,),
}


def function_problem(function: Any, scope: Iterable[str]) -> str | None:
    """Why ``function`` cannot be called in a node defining the names ``scope``, or None.

    A name (``linear``, ``onnx::Scan``) must be registered; a bare name that is not
    is read as an expression of the node, so it must be one of the node's names.
    Other text is an expression, checked by :mod:`mdf_loops.safety`.
    """
    if not isinstance(function, str):
        return None
    name = function.strip()
    is_name = name.isidentifier() or ("::" in name and " " not in name)
    if not is_name or known_function(name) or name in set(scope):
        return None
    hint = did_you_mean(name, function_names(), "registered functions")
    return f"unknown function '{name}'" + (
        hint or "; it is no registered function and no port, parameter or argument of the node"
    )


def name_problem(value: Any, scope: Iterable[str]) -> str | None:
    """Why a value that is one bare name (``"linaer"``) cannot be evaluated in a node
    defining the names ``scope``, or None (modeci-mdf fails on it, naming nothing)."""
    if not isinstance(value, str):
        return None
    name = value.strip()
    known = set(scope)
    if not name.isidentifier() or keyword.iskeyword(name) or name in known:
        return None
    return f"'{name}' is not a port, parameter or function of this node" + did_you_mean(name, known)


def argument_problems(function: Any, args: Any) -> list[tuple[str | None, str]]:
    """``(argument or None, message)`` for each argument a control-flow call does not take,
    and for each it needs and lacks (None: the problem is the ``args`` field itself)."""
    op = CONTROL_FLOW_FUNCTIONS.get(function) if isinstance(function, str) else None
    if op is None or not isinstance(args, Mapping):
        return []
    takes = CALL_ARGUMENTS[op]
    problems: list[tuple[str | None, str]] = []
    for name in args:
        if name not in takes:
            problems.append(
                (
                    str(name),
                    f"'{name}' is not an argument of {function}"
                    + did_you_mean(str(name), takes)
                    + f" ({function} takes {_names(takes)}; its attributes are "
                    "parameters of the node)",
                )
            )
    misspelled = {name for name in args if name not in takes}
    for name in REQUIRED_ARGUMENTS[op]:
        if name not in args and not misspelled:
            problems.append((None, f"{function} needs the argument '{name}'"))
    return problems


#: the attribute parameters of ``onnx::Scan`` that list a direction per value
DIRECTIONS = ("scan_input_directions", "scan_output_directions")


def direction_problem(directions: Any) -> str | None:
    """Why a list of scan directions is refused, or None."""
    if isinstance(directions, list) and any(
        isinstance(d, bool) or d not in (0, 1) for d in directions
    ):
        return f"entries must be 0 (forward) or 1 (backward), found {directions}"
    return None


def call_problems(model: Model) -> list[Problem]:
    """The problems of the rules above in a loaded model, bodies at every depth."""
    problems: list[Problem] = []
    for graph in _listed(model.graphs):
        _graph(graph, ("graphs", getattr(graph, "id", None)), problems, set())
    return problems


def check_calls(model: Model) -> None:
    """Raise :class:`ModelError` for the first problem :func:`call_problems` finds."""
    refuse(call_problems(model))


def _graph(graph: Any, path: tuple, problems: list[Problem], open_: set) -> None:
    if not isinstance(graph, Graph) or id(graph) in open_:  # a body within itself: safety's
        return
    open_.add(id(graph))
    for node in _listed(graph.nodes):
        if isinstance(node, Graph):
            problems.append(Problem(format_path(path + ("nodes", node.id)), graph_as_node(node.id)))
        elif isinstance(node, Node):
            _node(node, path + ("nodes", node.id), problems, open_)
    open_.discard(id(graph))


def _node(node: Node, path: tuple, problems: list[Problem], open_: set) -> None:
    calls = [("parameters", p) for p in _listed(node.parameters) if hasattr(p, "id")]
    calls += [("functions", f) for f in _listed(node.functions) if hasattr(f, "id")]
    named = _listed(node.input_ports) + [item for _, item in calls]
    scope = {str(item.id) for item in named if getattr(item, "id", None) is not None}
    functions = [getattr(item, "function", None) for _, item in calls]
    function = next((f for f in functions if isinstance(f, str)), None)
    attributes = string_attributes(functions)
    for port in _listed(node.output_ports):
        message = name_problem(getattr(port, "value", None), scope)
        if message:
            where = path + ("output_ports", getattr(port, "id", None), "value")
            problems.append(Problem(format_path(where), message))
    for field, item in calls:
        where = path + (field, item.id)
        args = getattr(item, "args", None)
        args = args if isinstance(args, Mapping) else {}
        message = function_problem(getattr(item, "function", None), scope | set(args))
        if message:
            problems.append(Problem(format_path(where + ("function",)), message))
        for argument, text in argument_problems(getattr(item, "function", None), args):
            at = where + ("args",) + ((argument,) if argument is not None else ())
            problems.append(Problem(format_path(at), text))
        value = getattr(item, "value", None)
        message = direction_problem(value) if item.id in DIRECTIONS else None
        if message and function == "onnx::Scan":
            problems.append(Problem(format_path(where), message))
        is_text = is_attribute_text(item.id, value, attributes, scope | set(args))
        message = name_problem(value, scope) if field == "parameters" and not is_text else None
        if message:
            problems.append(Problem(format_path(where + ("value",)), message))
        if isinstance(value, (Graph, Mapping)):
            try:
                body = body_graph(value)
            except ModelError:
                continue  # not a body (safety reports a malformed one)
            key = next(iter(value)) if isinstance(value, Mapping) else f"graph_{body.id}"
            _graph(body, where + ("value", key), problems, open_)


def _listed(items: Any) -> list:
    """A list field's entries; none for a field of another type (safety reports it)."""
    return items if isinstance(items, list) else []


def _names(names: Iterable[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)
