"""The inputs of a model's graphs as :func:`mdf_loops.run` types them, checked up front.

``run`` reads each graph input's declaration (``metadata["onnx_type"]``, or the
port's ``type`` and ``shape``) and fits each default value to it
(:mod:`mdf_loops.model.inputs`); a declaration it cannot read or a default that
does not fit makes it refuse the model. :func:`input_problems` applies the same
functions to every top-level graph, so ``validate`` reports what ``run`` would
refuse, with ``run``'s message, at the port that holds it.
"""

from __future__ import annotations

from modeci_mdf.mdf import Graph, Model

from mdf_loops.errors import MdfLoopsError
from mdf_loops.model.inputs import declared_input, default_input, fit_input, graph_input_types
from mdf_loops.model.interface import graph_interface
from mdf_loops.validation.report import Problem, format_path

__all__ = ["input_problems"]


def input_problems(model: Model) -> list[Problem]:
    """Unreadable input declarations and defaults that do not fit them, in every top-level graph."""
    problems: list[Problem] = []
    for graph in model.graphs if isinstance(model.graphs, list) else []:
        if isinstance(graph, Graph):
            problems += _graph(graph)
    return problems


def _graph(graph: Graph) -> list[Problem]:
    try:
        inputs = graph_interface(graph).inputs
        owners = {port.id: (node.id, port) for node in graph.nodes for port in node.input_ports}
    except Exception:  # a malformed graph: the schema and safety checks report it
        return []
    problems = []
    for name, port_id in inputs.items():
        if port_id not in owners:
            continue
        node_id, port = owners[port_id]
        where = ("graphs", graph.id, "nodes", node_id, "input_ports", port_id)
        try:
            declared_input([port])
        except MdfLoopsError as exc:
            problems.append(Problem(format_path(where + ("metadata",)), str(exc)))
            continue
        has_default, value = default_input([port])
        try:
            declared = graph_input_types(graph, {name: port_id})[name]
        except Exception:  # a malformed call parameter: the schema and safety report it
            continue
        if has_default:
            try:
                fit_input(name, value, declared)
            except MdfLoopsError as exc:
                problems.append(Problem(format_path(where + ("default_value",)), str(exc)))
    return problems
