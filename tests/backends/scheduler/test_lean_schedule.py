"""The lean graph-scheduler settings of condition-free bodies, checked against graph-scheduler's own.

And the engine's direct path for ``onnx::`` function parameters, checked
against numpy and against the stock path it replaces.
"""

from __future__ import annotations

import copy

import graph_scheduler
import numpy as np
import pytest
from graph_scheduler import TimeScale
from graph_scheduler.time import Time
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.functions.standard import mdf_functions
from modeci_mdf.mdf import Condition, ConditionSet, Edge, Graph, InputPort, Node, OutputPort, Parameter

import mdf_loops
from mdf_loops.backends.scheduler.lean_schedule import CountingTime, schedule_simply
from mdf_loops.backends.scheduler.body import BodyRunner
from mdf_loops.model.semantics import onnx_semantics
from conftest import expression_node, mdf_body


# ---------------------------------------------------------------- clock


def _fields(time: Time) -> dict:
    return {name: value for name, value in vars(time).items() if not name.startswith("absolute")}


def test_counting_time_increments_like_graph_scheduler_time(rng):
    stock, lean = Time(), CountingTime()
    scales = list(TimeScale)
    for _ in range(500):
        scale = scales[rng.integers(len(scales))]
        stock._increment_by_time_scale(scale)
        lean._increment_by_time_scale(scale)
        assert _fields(lean) == _fields(stock)
    assert _fields(stock)["life"] > 0  # the walk reached every scale


def test_counting_time_copies_are_independent():
    time = CountingTime()
    time._increment_by_time_scale(TimeScale.PASS)
    snapshot = copy.copy(time)
    time._increment_by_time_scale(TimeScale.PASS)
    assert (snapshot.pass_, time.pass_) == (1, 2)
    assert type(snapshot) is CountingTime


# ---------------------------------------------------------------- scheduler


def _diamond() -> dict:
    # a -> b, a -> c, (b, c) -> d, plus an unconnected e
    return {"a": set(), "b": {"a"}, "c": {"a"}, "d": {"b", "c"}, "e": set()}


def _passes(scheduler: graph_scheduler.Scheduler, calls: int) -> list:
    runs = []
    for _ in range(calls):
        runs.append([set(step) for step in scheduler.run()])
    return runs


def test_lean_scheduler_runs_the_same_steps_as_the_default_one():
    stock = graph_scheduler.Scheduler(graph=_diamond())
    lean = graph_scheduler.Scheduler(graph=_diamond())
    schedule_simply(lean, lean.nodes)
    assert _passes(lean, 4) == _passes(stock, 4)
    assert _fields(lean.get_clock(None).time) == _fields(stock.get_clock(None).time)
    for scale in TimeScale:
        assert lean.counts_total[None][scale] == stock.counts_total[None][scale]


def test_lean_scheduler_conditions_print_as_graph_schedulers_do():
    scheduler = graph_scheduler.Scheduler(graph=_diamond())
    schedule_simply(scheduler, scheduler.nodes)
    assert {str(c) for c in scheduler.conditions.conditions.values()} == {"Always()"}
    assert {str(c) for c in scheduler.termination_conds.values()} == {"AllHaveRun()", "Never()"}


def _chain_body(conditions: ConditionSet | None = None) -> Graph:
    first = expression_node("first", ["x"], {"y": "x + 1"})
    second = expression_node("second", ["y"], {"z": "y * 2"})
    edge = Edge(id="e", sender="first", sender_port="y", receiver="second", receiver_port="y")
    body = mdf_body("chain", [first, second], ["x"], ["second.z"], edges=[edge])
    body.conditions = conditions
    return body


def test_body_without_conditions_gets_the_lean_schedule_and_the_right_values():
    runner = BodyRunner(_chain_body(), "node 'loop'")
    scheduler = runner._engine.scheduler
    assert type(scheduler.get_clock(None).time) is CountingTime
    for x in (0.0, 1.5, -3.0):
        (z,) = runner([np.array(x)], {})
        assert z == (x + 1) * 2
    # graph-scheduler ran one pass, when the body's order was planned; the calls replay it
    assert runner._planned is not None
    assert scheduler.get_clock(None).time.environment_state_update == 1


def test_body_with_conditions_keeps_them_and_graph_schedulers_clock():
    conditions = ConditionSet(node_specific={"second": Condition(type="EveryNCalls",
                                                                 dependencies="first", n=1)})
    runner = BodyRunner(_chain_body(conditions), "node 'loop'")
    scheduler = runner._engine.scheduler
    assert type(scheduler.get_clock(None).time) is Time
    assert type(scheduler.conditions.conditions[runner._engine.graph.nodes[1]]).__name__ \
        == "EveryNCalls"
    (z,) = runner([np.array(2.0)], {})
    assert z == 6.0


# ---------------------------------------------------------------- onnx:: parameters


def _function_node(function: str, args: dict) -> Graph:
    """A graph with one node calling ``function``, marked for ONNX semantics."""
    node = Node(id="f")
    node.input_ports.append(InputPort(id="x"))
    node.parameters.append(Parameter(id="out", function=function, args=args))
    node.output_ports.append(OutputPort(id="y", value="out"))
    graph = Graph(id="g")
    graph.nodes.append(node)
    return mdf_loops.model.mark_onnx_semantics(graph)


def _evaluate(graph: Graph, x: np.ndarray) -> np.ndarray:
    engine = EvaluableGraph(graph)
    engine.evaluate(initializer={"x": x})
    return engine.enodes["f"].evaluable_outputs["y"].curr_value


def test_onnx_function_args_see_the_args_before_them(rng):
    x = rng.standard_normal(4).astype(np.float32)
    result = _evaluate(_function_node("onnx::Add", {"A": "x", "B": "A * 3"}), x)
    np.testing.assert_allclose(result, x + 3 * x, rtol=1e-6)
    assert result.dtype == np.float32


def test_a_function_registered_over_an_onnx_name_is_used(monkeypatch, rng):
    # a user's own entry under an onnx:: name takes the engine's ordinary path
    monkeypatch.setitem(mdf_functions, "onnx::Add", {
        "description": "subtract instead", "arguments": ["A", "B"],
        "expression_string": "A - B", "function": None,
    })
    x = rng.standard_normal(3)
    result = _evaluate(_function_node("onnx::Add", {"A": "x", "B": "x * 2"}), x)
    np.testing.assert_allclose(result, x - 2 * x)


def test_onnx_function_errors_still_name_the_node():
    graph = _function_node("onnx::MatMul", {"A": "x", "B": "x"})
    with pytest.raises(mdf_loops.errors.EvaluationError, match=r"node 'f'.*MatMul"):
        _evaluate(graph, np.ones((2, 3), np.float32))


# ---------------------------------------------------------------- per-graph costs


def test_elements_format_by_id_under_onnx_semantics_but_keep_their_full_repr():
    node = Node(id="cell", parameters=[Parameter(id="w", value=[[1.0, 2.0], [3.0, 4.0]])])
    assert f"{node}" == str(node)  # stock formatting outside ONNX semantics
    with onnx_semantics():
        assert f"{node}" == "Node(id='cell')"
        assert "{0} and {1}".format(node, Graph(id="g")) == "Node(id='cell') and Graph(id='g')"
        assert "[[1.0, 2.0], [3.0, 4.0]]" in repr(node) and "[[1.0, 2.0]" in str(node)
        with pytest.raises(TypeError):
            f"{node:>10}"  # as for any object without a format of its own
    try:
        mdf_loops.unregister()
        assert "[[1.0, 2.0], [3.0, 4.0]]" in f"{node}"
    finally:
        mdf_loops.register()


def test_graph_scheduler_time_units_parse_as_without_the_cache():
    from graph_scheduler.scheduler import _parse_absolute_unit
    from mdf_loops.backends.scheduler.replacements import STOCK

    for given in ("1 ms", "2.5 s", ("1", "us"), (4, "ms")):
        value, unit = given if isinstance(given, tuple) else (given, None)
        assert _parse_absolute_unit(value, unit) == STOCK["absolute_unit"](value, unit)
    assert _parse_absolute_unit("1 ms") is _parse_absolute_unit("1 ms")


# ---------------------------------------------------------------- bodies with conditions


def test_a_conditioned_body_reads_its_time_tree_and_keeps_only_the_current_update():
    # AtPass(0) reads graph-scheduler's time tree at the current environment state update
    conditions = ConditionSet(node_specific={
        "first": Condition(type="AtPass", n=0),
        "second": Condition(type="EveryNCalls", dependencies="first", n=1)})
    runner = BodyRunner(_chain_body(conditions), "node 'loop'")
    for x in range(300):
        (z,) = runner([np.array(float(x))], {})
        assert z == (x + 1) * 2
    clock = runner._engine.scheduler.get_clock(None)
    updates = clock.history.children[-1].children
    assert len(updates) == 301  # indices keep counting updates, as conditions expect
    assert sum(u is not None for u in updates) <= 2
    assert clock.time.environment_state_update == 300
