"""The lean probe (modeci-mdf's nodes stepped without its scheduler) against the stock
engine's own: the same schedule plan and the same dtype and shape of every value, on the
example models, the stock-construct models and random small models, trusted and not;
the graphs it declines; and the errors, which stay stock's."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_input_port_fields
from modeci_mdf.mdf import (
    ConditionSet,
    Edge,
    Graph,
    InputPort,
    Model,
    Node,
    OutputPort,
    Parameter,
)
from probe_graphs import EXAMPLES, example_and_construct_graphs, random_scalar_graphs

import mdf_loops
from mdf_loops.errors import ModelError
from mdf_loops.model import mark_onnx_semantics
from mdf_loops.model.interface import load_model
from mdf_loops.safety.guarded_numpy import untrusted_expressions
from mdf_loops.timeloop.conditions import plan_schedule
from mdf_loops.timeloop.lean_engine import KNOWN_PARAMETERS, lean_engine, required_names
from mdf_loops.timeloop.probe import build_engine, probe

pytestmark = needs_input_port_fields

DT = 0.05


def _probed(graph: Graph, series: dict, lean: bool):
    """(plan, values) of the lean or the stock probe, or the ModelError it raises."""
    try:
        if lean:
            engine = lean_engine(graph)
            return (
                None if engine is None else (engine.plan, probe(graph, DT, series, engine).values)
            )
        engine = build_engine(graph)
        return plan_schedule(engine, graph.id), probe(graph, DT, series, engine).values
    except ModelError as exc:
        return exc


def _both(graph: Graph, trusted: bool, series=None):
    """What the lean probe answers (None where it declines), and what the stock one does."""
    series = series or {}
    with nullcontext() if trusted else untrusted_expressions():
        return _probed(graph, series, lean=True), _probed(graph, series, lean=False)


def _assert_same(ours, stock, where: str) -> None:
    assert ours is not None, f"{where}: the lean probe declined"
    if isinstance(stock, ModelError) or isinstance(ours, ModelError):
        assert type(ours) is type(stock), f"{where}: {ours!r} but stock {stock!r}"
        return  # the conversion then asks the stock engine, for its words
    assert ours[0] == stock[0], where
    assert ours[1].keys() == stock[1].keys(), where
    for key, value in stock[1].items():
        mine = ours[1][key]
        assert (mine.dtype, mine.shape) == (value.dtype, value.shape), f"{where} {key}"


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_lean_probe_equals_stock_on_examples_and_constructs(trusted):
    answered = []
    for name, graph in example_and_construct_graphs():
        ours, stock = _both(graph, trusted)
        if ours is not None:
            _assert_same(ours, stock, name)
            answered.append(name)
    # the condition-free ones, scalar and list-valued, with parameter conditions
    expected = {"fitzhugh_nagumo.json", "iaf_network.json", "hodgkin_huxley.json"}
    expected |= {"list_parameters", "conditions_only"}
    assert expected <= set(answered)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # stock's, on a negative ** 0.5
@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_lean_probe_equals_stock_on_random_scalar_models(trusted):
    answered = 0
    for where, graph in random_scalar_graphs(20261126, 50):
        ours, stock = _both(graph, trusted)
        if ours is not None:
            _assert_same(ours, stock, where)
            answered += not isinstance(stock, ModelError)
    assert answered >= 25


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
@pytest.mark.parametrize("function, args", [
    ("linear", {"variable0": "x", "slope": "2 * variable0", "intercept": 1}),  # arg reads arg
    ("MatMul", {"A": [[1.0, 0.5], [0.0, 2.0]], "B": "x"}),
    ("onnx::Relu", {"X": "x"}),  # an operator: the lean nodes step it, typed as stock types it
])
def test_lean_probe_of_a_function_parameter_equals_stock(function, args, trusted):
    node = Node(id="n", parameters=[
        Parameter(id="x", default_initial_value=[1.0, -2.0], time_derivative="f - x"),
        Parameter(id="f", function=function, args=args)],
        output_ports=[OutputPort(id="o", value="f")])
    graph = Graph(id="g", nodes=[node])
    ours, stock = _both(graph, trusted)
    _assert_same(ours, stock, function)


def test_lean_probe_with_input_series_equals_stock():
    graph = load_model(EXAMPLES / "iaf_network.json").graphs[0]
    series = {"I": np.array([1, 2, 3])}  # int series into the cells' float current
    ours, stock = _both(graph, trusted=False, series=series)
    _assert_same(ours, stock, "iaf_network with an input series")


def _chain(port_default=None, conditions=None, extra_edge=False) -> Graph:
    source = Node(
        id="a",
        parameters=[Parameter(id="x", value=1.5)],
        output_ports=[OutputPort(id="o", value="x")],
    )
    sink = Node(
        id="b",
        input_ports=[InputPort(id="i", default_value=port_default)],
        parameters=[Parameter(id="y", value="i * 2")],
        output_ports=[OutputPort(id="o", value="y")],
    )
    edges = [Edge(id="e", sender="a", sender_port="o", receiver="b", receiver_port="i")]
    if extra_edge:
        edges.append(Edge(id="f", sender="a", sender_port="o", receiver="b", receiver_port="i"))
    return Graph(id="g", nodes=[sink, source], edges=edges, conditions=conditions)


def test_lean_engine_plans_a_chain_and_declines_what_the_scheduler_decides():
    assert lean_engine(_chain()).sets == [["a"], ["b"]]
    # an edge into a port with a default is no dependency: the order is the scheduler's
    assert lean_engine(_chain(port_default=0.0)) is None
    assert lean_engine(_chain(extra_edge=True)) is None  # two edges into one port
    always = ConditionSet(node_specific={"b": {"type": "Always", "kwargs": {}}})
    assert lean_engine(_chain(conditions=always)) is None
    missing = Graph(id="g", nodes=[Node(id="n", parameters=[Parameter(id="p", value="q + 1")])])
    assert lean_engine(missing) is None  # modeci-mdf refuses the node, in its words
    marked = mark_onnx_semantics(_chain())
    assert lean_engine(marked) is None
    twins = _chain()
    twins.nodes.append(Node(id="a", parameters=[Parameter(id="x", value=2)]))
    assert lean_engine(twins) is None  # the engine keeps one node per id


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_a_model_that_fails_while_probed_keeps_stocks_error(trusted):
    """The lean probe fails at step 0 (an integer divided by zero); the stock engine then
    reports it in the words the conversion always used."""
    node = Node(
        id="n",
        parameters=[Parameter(id="z", value=0), Parameter(id="r", value="1 / z")],
        output_ports=[OutputPort(id="o", value="r")],
    )
    model = Model(id="m", graphs=[Graph(id="g", nodes=[node])])
    ours, stock = _both(model.graphs[0], trusted)
    assert isinstance(ours, ModelError) and str(ours) == str(stock)
    with pytest.raises(ModelError, match="step 0 fails on modeci-mdf's engine") as raised:
        mdf_loops.to_time_loop(model, dt=DT, steps=3, trusted=trusted)
    assert str(raised.value) == str(stock)


def test_a_node_reading_an_unknown_name_keeps_stocks_refusal():
    node = Node(id="n", parameters=[Parameter(id="p", value="q + 1")])
    model = Model(id="m", graphs=[Graph(id="g", nodes=[node])])
    with pytest.raises(ModelError, match=r"modeci-mdf cannot build it: (.|\n)*p: q"):
        mdf_loops.to_time_loop(model, dt=DT, steps=3, trusted=True)


#: texts whose ends modeci-mdf strips before it parses them, that do not parse, that hold
#: brackets (cut into pieces), and every string value of the example models
_TEXTS = [
    "level", "v_th", "_x1", "True", "None", "numpy", "a + b", "numpy.where(v >= t, 1, 0)",
    "-a", "- -a * b", "+(b)", "a,", " a ", "\ta + b", "a\n", "", " ", "a +", "* a, b",
    "(a)", ") + a", "a + (", "lambda q: q", "'s' + t", "a.b.c", "f(x)(y)", "a if b else c",
    "not a", "a and b or c", "1e-5 * v", "a % b ^ c & d", "x[0] + y", "numpy.array([a, 1])",
    "a[", "]a", "s = 1", "a; b", "é + b", "numpy.sin(x) * 2 / tau", "(a, b)", "{a: b}",
]


def _example_texts() -> list[str]:
    texts = []
    for path in sorted((Path(__file__).resolve().parents[2] / "examples").rglob("*.json")):
        stack = [json.loads(path.read_text())]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, str):
                texts.append(item)
    return sorted(set(texts))


def _outcome(function, text):
    try:
        return frozenset(function(text))
    except Exception as exc:  # noqa: BLE001  (stock's error, by type)
        return type(exc)


@pytest.mark.parametrize("texts", [_TEXTS, _example_texts()], ids=["edge cases", "examples"])
def test_required_names_are_modeci_mdfs(texts):
    """Read without the engine where a text has no brackets: the same names, or the same
    error, as modeci-mdf's own ``get_required_variables_from_expression``."""
    from modeci_mdf.execution_engine import get_required_variables_from_expression

    assert len(texts) > 30
    for text in texts:
        stock = _outcome(get_required_variables_from_expression, text)
        assert _outcome(required_names, text) == stock, text


def test_the_names_every_node_knows_are_modeci_mdfs():
    from modeci_mdf.execution_engine import KNOWN_PARAMETERS as stock

    assert KNOWN_PARAMETERS == frozenset(stock)


@pytest.mark.parametrize("name", ["fitzhugh_nagumo", "iaf_network", "hodgkin_huxley"])
def test_the_time_loop_model_is_the_one_the_stock_engine_plans(name, monkeypatch):
    """The whole conversion with the plan and types inferred (or probed without the
    scheduler) writes the model the stock engine's plan and probe make."""
    from mdf_loops.timeloop import convert

    path = EXAMPLES / f"{name}.json"
    ours = mdf_loops.to_time_loop(path, dt=DT, steps=5).to_json()
    monkeypatch.setattr(convert, "lean_engine", lambda graph: None)
    assert mdf_loops.to_time_loop(path, dt=DT, steps=5).to_json() == ours


@pytest.mark.parametrize(
    "fields",
    [
        {"value": 1.5},
        {"value": "a + 1"},
        {"value": "p + 1"},
        {"value": "p"},
        {"value": "numpy.where(p > 0, a, p)"},
        {"value": [1, 2]},
        {"default_initial_value": 0.0},
        {"time_derivative": "-p", "default_initial_value": 1.0},
        {"function": "linear", "args": {"variable0": "p", "slope": 1, "intercept": 0}},
        {"value": "pa + 1"},
    ],
)
def test_is_stateful_is_modeci_mdfs(fields):
    from mdf_loops.timeloop.lean_engine import is_stateful

    parameter = Parameter(id="p", **fields)
    assert is_stateful(parameter) is parameter.is_stateful()
