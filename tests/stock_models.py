"""Loop-free MDF models covering what stock modeci-mdf does, for tests/backends/scheduler/test_stock_equivalence.py.

Each case builds a model with modeci-mdf's classes alone (this module must not
import mdf_loops: it also runs in a process without it) and says how to run it
through the stock ``EvaluableGraph``: the ``evaluate`` calls, and the output
ports to read after each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from modeci_mdf.mdf import (
    Condition,
    ConditionSet,
    Edge,
    Graph,
    InputPort,
    Model,
    Node,
    OutputPort,
    Parameter,
)

#: the step limit the run with ``import mdf_loops`` sets; the long run needs more steps
SMALL_LIMIT = 100
LONG_RUN_STEPS = 3 * SMALL_LIMIT


@dataclass
class Case:
    build: Callable[[], Model]
    evaluations: list[dict[str, Any]] = field(default_factory=lambda: [{}])
    outputs: list[tuple[str, str]] = field(default_factory=list)
    verbose: bool = False


def _node(node_id: str, inputs=(), parameters=(), outputs=()) -> Node:
    node = Node(id=node_id)
    for port in inputs:
        node.input_ports.append(port if isinstance(port, InputPort) else InputPort(id=port))
    for parameter in parameters:
        node.parameters.append(parameter)
    for port_id, value in outputs:
        node.output_ports.append(OutputPort(id=port_id, value=value))
    return node


def _model(name: str, *nodes: Node, edges=(), conditions: ConditionSet | None = None) -> Model:
    graph = Graph(id=f"{name}_graph")
    graph.nodes.extend(nodes)
    graph.edges.extend(edges)
    graph.conditions = conditions
    model = Model(id=name)
    model.graphs.append(graph)
    return model


def _edge(sender: str, sender_port: str, receiver: str, receiver_port: str, **parameters) -> Edge:
    return Edge(id=f"{sender}_{receiver}_{receiver_port}", sender=sender, sender_port=sender_port,
                receiver=receiver, receiver_port=receiver_port, parameters=parameters or None)


# ---------------------------------------------------------------- state and time


def stateful() -> Model:
    counter = _node("counter", parameters=[
        Parameter(id="count", value="count + 1", default_initial_value=0),
        Parameter(id="double", value="count * 2"),
        Parameter(id="ratio", value="count / 3"),
    ], outputs=[("count_out", "count"), ("double_out", "double"), ("ratio_out", "ratio")])
    accumulate = _node("accumulate", inputs=["step"], parameters=[
        Parameter(id="total", value="total + step", default_initial_value=[0.5, 1.5]),
        Parameter(id="trig", value="numpy.sin(total) + math.pi * numpy.exp(-total)"),
    ], outputs=[("total_out", "total"), ("trig_out", "trig")])
    return _model("stateful", counter, accumulate,
                  edges=[_edge("counter", "double_out", "accumulate", "step", weight=0.25)])


def time_derivative() -> Model:
    cell = _node("cell", parameters=[
        Parameter(id="tau", value=2.0),
        Parameter(id="drive", value=[0.5, -0.25]),
        Parameter(id="v", default_initial_value=[1.0, 2.0], time_derivative="(drive - v) / tau"),
        Parameter(id="w", default_initial_value=0, time_derivative="v[0] * 3"),
    ], outputs=[("v_out", "v"), ("w_out", "w")])
    return _model("time_derivative", cell)


# ---------------------------------------------------------------- graph-scheduler conditions


def _counter(node_id: str, inputs=()) -> Node:
    return _node(node_id, inputs=inputs, parameters=[
        Parameter(id="runs", value="runs + 1", default_initial_value=0),
    ], outputs=[("runs_out", "runs")])


def conditions() -> Model:
    a, b, c = _counter("A"), _counter("B", ["x"]), _counter("C", ["x"])
    node_specific = {
        "A": Condition(type="Always"),
        "B": Condition(type="EveryNCalls", dependencies="A", n=2),
        "C": Condition(type="AfterNCalls", dependencies="B", n=2),
    }
    termination = {"environment_state_update": Condition(type="AfterNCalls", dependencies="C", n=2)}
    return _model("conditions", a, b, c,
                  edges=[_edge("A", "runs_out", "B", "x"), _edge("B", "runs_out", "C", "x")],
                  conditions=ConditionSet(node_specific=node_specific, termination=termination))


def _threshold(name: str, threshold: int) -> Model:
    a = _node("A", parameters=[Parameter(id="level", value="level + 1", default_initial_value=0)],
              outputs=[("level_out", "level")])
    termination = {"environment_state_update": Condition(
        type="Threshold", dependency="A", parameter="level", threshold=threshold, comparator=">=")}
    return _model(name, a, conditions=ConditionSet(termination=termination))


# ---------------------------------------------------------------- onnx:: functions


def _onnx(node_id: str, function: str, args: dict, inputs=(), extra=()) -> Node:
    # named as modeci-mdf's PyTorch exporter names them ("onnx_" keeps it out of the op's kwargs)
    result = f"onnx_{function.split('::')[1]}_1"
    return _node(node_id, inputs=inputs,
                 parameters=[*extra, Parameter(id=result, function=function, args=args)],
                 outputs=[("out", result)])


def onnx_mixed_dtypes() -> Model:
    # a chain: graph-scheduler runs nodes of one step in an order of their ids in memory
    x = InputPort(id="x", shape=(2, 3), type="float32")
    add = _onnx("add", "onnx::Add", {"A": "x", "B": "offset"}, [x],
                [Parameter(id="offset", value=[[0.1, 0.2, 0.3]])])
    relu = _onnx("relu", "onnx::Relu", {"X": "y"}, ["y"])
    matmul = _onnx("matmul", "onnx::MatMul", {"A": "y", "B": "w"}, ["y"],
                   [Parameter(id="w", value=[[1.5], [-2.0], [0.25]])])
    return _model("onnx_mixed_dtypes", add, relu, matmul,
                  edges=[_edge("add", "out", "relu", "y"), _edge("relu", "out", "matmul", "y")])


def onnx_variadic_concat() -> Model:
    # the form modeci-mdf's PyTorch exporter writes: a list of quoted names
    concat = _onnx("Concat_62", "onnx::Concat", {"inputs": "['_59', '_61']"}, extra=[
        Parameter(id="_59", value=[[1.0, 2.0]]),
        Parameter(id="_61", value=[[3.0, 4.0], [5.0, 6.0]]),
        Parameter(id="axis", value=0)])
    return _model("onnx_variadic_concat", concat)


def onnx_seeded_random() -> Model:
    uniform = _onnx("uniform", "onnx::RandomUniform", {}, extra=[
        Parameter(id="high", value=2.0),
        Parameter(id="low", value=-1.0), Parameter(id="seed", value=7.0),
        Parameter(id="shape", value=[2, 3])])
    normal = _onnx("normal", "onnx::RandomNormal", {}, ["after"], extra=[
        Parameter(id="mean", value=0.5),
        Parameter(id="scale", value=3.0), Parameter(id="seed", value=11.0),
        Parameter(id="shape", value=[4])])
    # the edge orders the two nodes (its port is no input of RandomNormal)
    return _model("onnx_seeded_random", uniform, normal,
                  edges=[_edge("uniform", "out", "normal", "after")])


# ---------------------------------------------------------------- errors


def _failing(name: str, expression: str) -> Model:
    node = _node("bad", parameters=[
        Parameter(id="a", value=[1.0, 2.0]), Parameter(id="b", value=[1.0, 2.0, 3.0]),
        Parameter(id="broken", value=expression)], outputs=[("out", "broken")])
    return _model(name, node)


def onnx_shape_error() -> Model:
    return _model("onnx_shape_error", _onnx("matmul", "onnx::MatMul", {"A": "a", "B": "a"}, extra=[
        Parameter(id="a", value=[[1.0, 2.0, 3.0]])]))


def missing_variable() -> Model:
    return _model("missing_variable", _node("bad", parameters=[
        Parameter(id="p", value="q + 1")], outputs=[("out", "p")]))


# ---------------------------------------------------------------- the cases

_STEPS = [{}, {"time_increment": 0.05}, {"time_increment": 0.05}, {"time_increment": 0.1}]

CASES: dict[str, Case] = {
    "stateful": Case(stateful, [{}] * 4, [("counter", "count_out"), ("counter", "ratio_out"),
                                          ("accumulate", "total_out"), ("accumulate", "trig_out")]),
    "time_derivative": Case(time_derivative, _STEPS, [("cell", "v_out"), ("cell", "w_out")]),
    "conditions": Case(conditions, [{}, {}], [("A", "runs_out"), ("B", "runs_out"),
                                              ("C", "runs_out")]),
    "threshold": Case(lambda: _threshold("threshold", 5), [{}, {}], [("A", "level_out")]),
    "long_run": Case(lambda: _threshold("long_run", LONG_RUN_STEPS), [{}], [("A", "level_out")]),
    "onnx_mixed_dtypes": Case(onnx_mixed_dtypes, [
        {"initializer": {"x": np.arange(-3, 3, dtype=np.float32).reshape(2, 3) / 4}}],
        [("add", "out"), ("relu", "out"), ("matmul", "out")]),
    "onnx_variadic_concat": Case(onnx_variadic_concat, [{}], [("Concat_62", "out")]),
    "onnx_seeded_random": Case(onnx_seeded_random, [{}, {}], [("uniform", "out"),
                                                              ("normal", "out")]),
    "error_division_by_zero": Case(lambda: _failing("error_division_by_zero", "1 / 0")),
    "error_shape_mismatch": Case(lambda: _failing("error_shape_mismatch", "a + b")),
    "error_bad_index": Case(lambda: _failing("error_bad_index", "b[5]")),
    "error_onnx_shapes": Case(onnx_shape_error),
    "error_missing_variable": Case(missing_variable),
    "verbose_stateful": Case(stateful, [{}] * 2, [("accumulate", "total_out")], verbose=True),
    "verbose_conditions": Case(conditions, [{}], [("C", "runs_out")], verbose=True),
    "verbose_time_derivative": Case(time_derivative, _STEPS[:2], [("cell", "v_out")],
                                    verbose=True),
    "verbose_onnx": Case(onnx_mixed_dtypes, [
        {"initializer": {"x": np.ones((2, 3), np.float32)}}], [("matmul", "out")], verbose=True),
}
