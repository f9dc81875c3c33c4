"""The model shapes the engine would hang or crash on (mdf_loops.safety.structure), part by part."""

from __future__ import annotations

import graph_scheduler.condition as scheduler_conditions
from conftest import expression_node
from modeci_mdf.mdf import Condition, ConditionSet, Edge, Graph

from mdf_loops.safety.structure import (
    condition_problems,
    edge_problems,
    field_of,
    listed_elements,
)

PATH = ("graphs", "main")


def _edge(edge_id, sender, receiver, sender_port="y", receiver_port="x", **parameters):
    return Edge(id=edge_id, sender=sender, sender_port=sender_port, receiver=receiver,
                receiver_port=receiver_port, parameters=parameters or None)


def test_listed_elements_reports_repeated_ids_and_keeps_the_elements():
    a, b = expression_node("a", ["x"], {"y": "x"}), expression_node("b", ["x"], {"y": "x"})
    items, problems = listed_elements(Graph(id="main", nodes=[a, b, a]), "nodes", PATH)
    assert items == [a, b, a]
    assert [str(p) for p in problems] == ["graphs.main.nodes: 'a' is defined more than once"]


def test_listed_elements_of_a_field_that_is_no_list_of_elements_is_empty():
    graph = Graph(id="main")
    graph.nodes = "a, b"  # type: ignore[assignment]
    items, problems = listed_elements(graph, "nodes", PATH)
    assert items == []
    assert [p.path for p in problems] == ["graphs.main.nodes"]
    assert "expected a list of elements with ids, found 'a, b'" in problems[0].message


def test_edge_problems_name_the_edge_and_what_is_missing():
    a, b = expression_node("a", ["x"], {"y": "x + 1"}), expression_node("b", ["x"], {"y": "x"})
    edges = [_edge("e1", "ghost", "b"), _edge("e2", "a", "b", receiver_port="nope"),
             _edge("e3", "a", "b", weight="x")]
    messages = [str(p) for p in edge_problems("main", [a, b], edges, PATH)]
    assert messages == [
        "graphs.main.edges.e1: sender 'ghost' is not a node of graph 'main'",
        "graphs.main.edges.e2: receiver port 'nope' is not one of the input ports of 'b'",
        "graphs.main.edges.e3.parameters.weight: weight 'x' is not a number",
    ]


def test_numeric_weights_and_an_ordered_chain_have_no_problems():
    a, b = expression_node("a", ["x"], {"y": "x + 1"}), expression_node("b", ["x"], {"y": "x"})
    c = expression_node("c", ["x"], {"y": "x"})
    edges = [_edge("e1", "a", "b", weight=2.5), _edge("e2", "b", "c", weight=[1, 2])]
    assert edge_problems("main", [a, b, c], edges, PATH) == []


def test_edges_no_root_node_leads_to_are_reported_once_and_only_without_a_dangling_edge():
    b, c = expression_node("b", ["x"], {"y": "x"}), expression_node("c", ["x"], {"y": "x"})
    cycle = [_edge("e2", "b", "c"), _edge("e3", "c", "b")]
    (problem,) = edge_problems("main", [b, c], cycle, PATH)
    assert problem.path == "graphs.main.edges"
    assert "edges ['e2', 'e3'] start at nodes no root node leads to" in problem.message
    dangling = edge_problems("main", [b, c], cycle + [_edge("e4", "ghost", "b")], PATH)
    assert [p.path for p in dangling] == ["graphs.main.edges.e4"]


def test_every_graph_scheduler_condition_is_known_and_others_are_reported_nested_too():
    known = [n for n in dir(scheduler_conditions)
             if isinstance(getattr(scheduler_conditions, n), type)
             and issubclass(getattr(scheduler_conditions, n), scheduler_conditions.Condition)]
    assert "EveryNCalls" in known and "AfterNCalls" in known
    graph = Graph(id="main", nodes=[expression_node("a", ["x"], {"y": "x"})])
    graph.conditions = ConditionSet(node_specific={f"a{k}": Condition(type=name)
                                                   for k, name in enumerate(known)})
    assert condition_problems(graph, PATH) == []
    nested = Condition(type="Any", dependencies=[{"type": "Always"}, {"type": "NoSuchCondition"}])
    graph.conditions = ConditionSet(termination={"environment_state_update": nested})
    messages = [str(p) for p in condition_problems(graph, PATH)]
    assert messages == ["graphs.main.conditions.termination.environment_state_update: "
                        "'NoSuchCondition' is not a scheduler condition"]


def test_a_graph_without_conditions_has_no_condition_problems():
    assert condition_problems(Graph(id="main"), PATH) == []


def test_field_of_reads_objects_and_dicts_alike():
    assert field_of({"type": "Always"}, "type") == "Always"
    assert field_of(Condition(type="Always"), "type") == "Always"
    assert field_of(object(), "type") is None
