"""A condition-free body's planned pass, checked against modeci-mdf's own
``EvaluableGraph.evaluate`` on a twin engine and against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Condition, ConditionSet, Edge, Graph

import mdf_loops
from mdf_loops.backends.scheduler.body import BodyRunner
from mdf_loops.backends.scheduler.lean_schedule import schedule_simply
from mdf_loops.backends.scheduler.planned_pass import PlannedPass
from mdf_loops.model.semantics import onnx_semantics
from mdf_loops.errors import IterationLimitError
from conftest import expression_node, mdf_body


def _diamond() -> Graph:
    """x -> a, b; (a, b) -> c, with a weighted edge: c = 0.5 (x + 1) + 3 x."""
    a = expression_node("a", ["x"], {"y": "x + 1"})
    b = expression_node("b", ["x"], {"y": "x * 3"})
    c = expression_node("c", ["p", "q"], {"z": "p + q"})
    edges = [
        Edge(id="ac", sender="a", sender_port="y", receiver="c", receiver_port="p",
             parameters={"weight": 0.5}),
        Edge(id="bc", sender="b", sender_port="y", receiver="c", receiver_port="q"),
    ]
    mdf_loops.register()
    return mdf_body("diamond", [a, b, c], ["x"], ["c.z"], edges=edges)


def _engine(graph: Graph) -> EvaluableGraph:
    with onnx_semantics():
        engine = EvaluableGraph(graph)
    schedule_simply(engine.scheduler, graph.nodes)
    return engine


def _bind(engine: EvaluableGraph, x) -> None:
    for node in ("a", "b"):
        engine.enodes[node].evaluable_inputs["x"].curr_value = x


@pytest.mark.parametrize("x", [np.array(2.0), np.array([1.0, -4.0, 0.25])])
def test_a_planned_pass_gives_what_the_engines_own_evaluate_gives(x):
    graph = _diamond()
    planned_engine, stock_engine = _engine(graph), _engine(graph)
    with onnx_semantics():
        planned = PlannedPass(planned_engine)
        for _ in range(3):  # replayed: the same result each time
            _bind(planned_engine, x)
            _bind(stock_engine, x)
            planned_engine.order_of_execution.clear()
            stock_engine.order_of_execution.clear()
            planned()
            stock_engine.evaluate()
            got = planned_engine.enodes["c"].evaluable_outputs["z"].curr_value
            want = stock_engine.enodes["c"].evaluable_outputs["z"].curr_value
            np.testing.assert_array_equal(got, want)
            np.testing.assert_allclose(got, 0.5 * (x + 1) + 3 * x)
            assert planned_engine.order_of_execution[-1] == "c"
            assert sorted(planned_engine.order_of_execution) == sorted(
                stock_engine.order_of_execution)


def test_a_pass_longer_than_max_iterations_stops_as_the_scheduler_would():
    graph = _diamond()
    with onnx_semantics():
        planned = PlannedPass(_engine(graph))  # two consideration sets: (a, b), then c
        assert len(planned.steps) == 2
        with mdf_loops.safety.limits(max_iterations=1), \
                pytest.raises(IterationLimitError, match="graph 'diamond'.*max_iterations"):
            planned()


def test_bodies_with_conditions_run_the_schedulers_pass_each_iteration():
    assert BodyRunner(_diamond(), "node 'loop'")._planned is not None
    conditioned = _diamond()
    conditioned.conditions = ConditionSet(
        node_specific={"c": Condition(type="EveryNCalls", dependencies="a", n=1)})
    runner = BodyRunner(conditioned, "node 'loop'")
    assert runner._planned is None
    (z,) = runner([np.array(1.0)], {})
    assert z == pytest.approx(0.5 * 2.0 + 3.0)
