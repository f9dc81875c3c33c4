"""mdf_loops.validation.operator_rules: the layout of Scan, Loop and If nodes.

The oracle is ONNX itself: for every ONNX conformance case with control flow,
imported to MDF, the number of outputs the rules find the bodies give each loop
node is the number of outputs the ONNX node declares, with no problem reported.
"""

from __future__ import annotations

import json

import pytest

import mdf_loops
from conftest import control_flow_cases
from mdf_loops.model.convention import BODY_ATTRIBUTES, CONTROL_FLOW_FUNCTIONS
from mdf_loops.validation.operator_rules import FoundBody, check_output_indices, layout_output_count


def _bodies(op: str, parameters: dict, path: tuple) -> dict[str, FoundBody]:
    bodies = {}
    for attribute in BODY_ATTRIBUTES[op]:
        ((key, graph),) = parameters[attribute]["value"].items()
        meta = graph.get("metadata", {})
        bodies[attribute] = FoundBody(attribute, path + (attribute, key), graph,
                                      meta.get("formal_inputs"), meta.get("formal_outputs"))
    return bodies


def _layout_counts(model) -> tuple[list[int | None], list]:
    """The output count the rules find for each top-level loop node, and every problem."""
    problems: list = []
    report = lambda path, message: problems.append((path, message))  # noqa: E731
    counts = []
    ((_, document),) = json.loads(model.to_json()).items()
    for graph_id, graph in document["graphs"].items():
        for node_id, node in graph["nodes"].items():
            parameters = node.get("parameters", {})
            call = next((k for k, p in parameters.items()
                         if p.get("function") in CONTROL_FLOW_FUNCTIONS), None)
            if call is None:
                continue
            op = CONTROL_FLOW_FUNCTIONS[parameters[call]["function"]]
            path = ("graphs", graph_id, "nodes", node_id)
            bodies = _bodies(op, parameters, path)
            count = layout_output_count(op, report, node, path, parameters,
                                        parameters[call].get("args", {}), bodies)
            counts.append(count)
            if count is not None:
                check_output_indices(report, node, path, call, op, count)
    return counts, problems


@pytest.mark.parametrize("name", sorted(control_flow_cases()))
def test_the_outputs_found_are_those_the_onnx_node_declares(name):
    case = control_flow_cases()[name]
    expected = sorted(len(n.output) for n in case.model.graph.node
                      if n.op_type in ("Scan", "Loop", "If"))
    assert expected, "each case has a control-flow node at the top level"
    counts, problems = _layout_counts(mdf_loops.onnx_to_mdf(case.model))
    assert problems == []
    assert sorted(counts) == expected


def test_a_report_gets_the_path_and_message_of_each_problem():
    problems: list = []
    node = {"output_ports": {"out9": {"value": "call[9]"}}}
    check_output_indices(lambda p, m: problems.append((p, m)), node, ("n",), "call", "Scan", 2)
    assert problems == [(("n", "output_ports", "out9", "value"),
                         "reads output 9 of 'call', but its body gives onnx::Scan 2 outputs")]
