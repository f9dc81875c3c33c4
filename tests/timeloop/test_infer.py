"""The inferred dtypes and shapes of a scalar graph's values against the stock engine's
probe (two steps of modeci-mdf's own engine): equal wherever the inference answers, on
the example models, the stock-construct models and random scalar models, trusted and
not; and what it leaves to the probe."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
from conftest import needs_input_port_fields
from modeci_mdf.mdf import (
    Edge,
    Graph,
    InputPort,
    Node,
    OutputPort,
    Parameter,
    ParameterCondition,
)
from probe_graphs import example_and_construct_graphs, random_array_graphs, random_scalar_graphs

from mdf_loops.errors import ModelError
from mdf_loops.safety.guarded_numpy import untrusted_expressions
from mdf_loops.timeloop.infer import infer_values
from mdf_loops.timeloop.lean_engine import lean_engine
from mdf_loops.timeloop.probe import build_engine, probe

pytestmark = needs_input_port_fields

DT = 0.05


def _inferred_and_stock(graph: Graph, trusted: bool):
    """The inference's answer (None: left to the probe) and the stock probe's values (or
    its ModelError)."""
    with nullcontext() if trusted else untrusted_expressions():
        lean = lean_engine(graph)
        ours = None if lean is None else infer_values(graph, lean.sets, DT)
        try:
            stock = probe(graph, DT, {}, build_engine(graph)).values
        except ModelError as exc:
            stock = exc
    return ours, stock


def _assert_equal(ours, stock, where: str) -> None:
    assert not isinstance(stock, ModelError), f"{where}: answered {ours} where stock fails: {stock}"
    assert ours.keys() == stock.keys(), where
    for key, value in stock.items():
        assert (ours[key].dtype, ours[key].shape) == (value.dtype, value.shape), f"{where} {key}"


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_inferred_types_equal_stock_on_examples_and_constructs(trusted):
    answered = []
    for name, graph in example_and_construct_graphs():
        ours, stock = _inferred_and_stock(graph, trusted)
        if ours is not None:
            _assert_equal(ours, stock, name)
            answered.append(name)
    assert {"fitzhugh_nagumo.json", "iaf_network.json"} <= set(answered)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # stock's, on a negative ** 0.5
@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_inferred_types_equal_stock_on_random_scalar_models(trusted):
    answered = 0
    for where, graph in random_scalar_graphs(1126, 60):
        ours, stock = _inferred_and_stock(graph, trusted)
        if ours is not None:
            _assert_equal(ours, stock, where)
            answered += 1
    assert answered >= 30


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_inferred_types_equal_stock_on_random_array_models(trusted):
    answered = 0
    for where, graph in random_array_graphs(1127, 60):
        ours, stock = _inferred_and_stock(graph, trusted)
        if ours is not None:
            _assert_equal(ours, stock, where)
            answered += any(v.shape for v in ours.values())
    assert answered >= 15  # models with arrays, answered


def _node(*parameters: Parameter, ports=(), outputs=("p",)) -> Graph:
    node = Node(
        id="n",
        input_ports=list(ports),
        parameters=list(parameters),
        output_ports=[OutputPort(id=f"o{k}", value=v) for k, v in enumerate(outputs)],
    )
    return Graph(id="g", nodes=[node])


@pytest.mark.parametrize(
    "graph, expected",
    [
        # a whole-number float an expression computes is an int (modelspec), a literal not
        (_node(Parameter(id="a", value=0.5), Parameter(id="p", value="a * 4")), "int64"),
        (_node(Parameter(id="p", value=2.0)), "float64"),
        (_node(Parameter(id="p", value="2.0")), "float64"),
        (_node(Parameter(id="a", value=2.0), Parameter(id="p", value="(a)")), "int64"),
        # a counter stays an int, even from modeci-mdf's default initial 0.0 (0.0 + 1
        # is a whole number), but not with a fraction
        (_node(Parameter(id="p", value="p + 1", default_initial_value=0)), "int64"),
        (_node(Parameter(id="p", value="p + 1")), "int64"),
        (_node(Parameter(id="p", value="p + 0.5")), "float64"),
        # a time derivative's numpy.add makes an int state a float
        (_node(Parameter(id="p", default_initial_value=0, time_derivative="1")), "float64"),
        (_node(Parameter(id="p", value="1 < 2")), "bool"),
        # and/or: one of the operands, of one type (IzhikevichTest's condition)
        (_node(Parameter(id="t", default_initial_value=0, time_derivative="1"),
               Parameter(id="p", value="t >= 0.05 and t < 2")), "bool"),
        (_node(Parameter(id="d", value=[0.1]),
               Parameter(id="t", default_initial_value=0, time_derivative="1"),
               Parameter(id="p", value="t >= d and t < d + 1")), "bool"),
        (_node(Parameter(id="t", default_initial_value=0, time_derivative="1"),
               Parameter(id="p", value="t < 0.01 or t > 5")), "bool"),
        (_node(Parameter(id="p", value="0.0 or 2.5")), "float64"),
        # numpy.exp and kin (NeuroML/PyNN's HH): numpy values, never made ints
        (_node(Parameter(id="p", value="numpy.exp(0)")), "float64"),
        (_node(Parameter(id="a", value=[1, 2]), Parameter(id="p", value="numpy.exp(a) * 2")),
         "float64"),
        (_node(Parameter(id="p", default_initial_value=1.0,
                         time_derivative="numpy.tanh(p) - numpy.sqrt(numpy.abs(p))")), "float64"),
        (_node(Parameter(id="p", value="numpy.abs(-2)")), "int64"),
        # standard functions (ModECI's RNN models): args in order, each seeing the ones
        # before it; a whole-number float result of Python numbers is an int (modelspec)
        (_node(Parameter(id="p", function="linear",
                         args={"variable0": 2, "slope": 0.5, "intercept": "variable0"})),
         "int64"),
        (_node(Parameter(id="w", value=[[0.0, 1.0], [2.0, 0.5]]),
               Parameter(id="p", function="MatMul", args={"A": "w", "B": [1, 2]})), "float64"),
        (_node(Parameter(id="x", default_initial_value=[0.5, -1.0], time_derivative="p - x"),
               Parameter(id="p", function="logistic",
                         args={"variable0": "x", "gain": 2, "bias": 0, "offset": 0})),
         "float64"),
        (_node(Parameter(id="p", function="sin", args={"variable0": 1, "scale": 2},
                         value="3")), "int64"),  # a value wins over a function
        # lists are numpy arrays (modelspec's numpy.array(list)), NeuroML's [0.0] included
        (_node(Parameter(id="p", value=[1.0, 2.0])), "float64"),
        (_node(Parameter(id="a", value=[0]), Parameter(id="p", value="a * 2")), "int64"),
        (_node(Parameter(id="a", value=[[1, 2], [3, 4]]), Parameter(id="p", value="a / 2")),
         "float64"),
        (_node(Parameter(id="p", default_initial_value=[-1.0], time_derivative="p * p - 1")),
         "float64"),
        (_node(Parameter(id="p", default_initial_value=[0, 0], time_derivative="1",
                         conditions=[ParameterCondition(id="c", test="p > 1", value=0)])),
         "float64"),
        # a parameter set only by conditions holds None, then 0.0 before the first test
        (_node(Parameter(id="t", default_initial_value=0, time_derivative="1"),
               Parameter(id="p", conditions=[ParameterCondition(id="c", test="t < 0.5",
                                                                value="0")])), "float64"),
        (_node(Parameter(id="p", conditions=[ParameterCondition(id="c", test="1 > 0",
                                                                value=1)])), "float64"),
        (
            _node(
                Parameter(
                    id="p",
                    default_initial_value=0,
                    time_derivative="1",
                    conditions=[ParameterCondition(id="c", test="p > 10", value=0)],
                ),
            ),
            "float64",
        ),
    ],
)
def test_inferred_types_of_small_cases(graph, expected):
    ours, stock = _inferred_and_stock(graph, trusted=False)
    assert str(stock[("n", "p")].dtype) == expected  # the oracle says so
    _assert_equal(ours, stock, expected)


@pytest.mark.parametrize(
    "parameters",
    [
        [Parameter(id="z", value=0), Parameter(id="p", value="1 / z")],  # stock fails
        [Parameter(id="p", value="1e308 * 10")],  # inf: trusted and untrusted differ
        [Parameter(id="p", value="1 < 2 and 3")],  # the type depends on the values
        [Parameter(id="p", function="change_goal", args={"pattern": 1, "curr_goal": 2})],
        [Parameter(id="p", function="onnx::Relu", args={"X": 1.0})],  # not a standard one
        [Parameter(id="p", value="numpy.exp(1 < 2)")],  # float16: not followed here
        [Parameter(id="p", value="numpy.exp(1.0, 2.0)")],  # not one value
        [Parameter(id="p", value="numpy.log1p(1.0)")],  # not among those followed
        [Parameter(id="a", value=[1.0, 2.0]), Parameter(id="p", value="a > 0 and a")],  # 2 truths
        [Parameter(id="p", value=[[1.0, 2.0], [3.0]])],  # ragged: not an array
        [Parameter(id="p", value=["a", "b"])],  # not numbers
        [Parameter(id="p", value=[0.5] * 5000)],  # more elements than followed here
        [Parameter(id="a", value=[1.0, 2.0]), Parameter(id="p", value="a + [[1.0]] * 3000")],
        [Parameter(id="a", value=[1.0, 2.0]), Parameter(id="b", value=[1.0, 2.0, 3.0]),
         Parameter(id="p", value="a + b")],  # shapes that do not broadcast: stock fails
        # read before its first evaluation: stock's None
        [Parameter(id="q", conditions=[ParameterCondition(id="c", test="1 > 0", value=1)]),
         Parameter(id="p", value="q + 1")],
        [Parameter(id="p", value="2 ** 70")],  # an int numpy would not hold
    ],
)
def test_what_the_inference_leaves_to_the_probe(parameters):
    graph = _node(*parameters)
    assert lean_engine(graph) is not None
    assert infer_values(graph, lean_engine(graph).sets, DT) is None


@pytest.mark.parametrize(
    "fields, expected",
    [  # the ports are made in the test: modeci-mdf 0.4.13's have no default_value
        ({"default_value": 2}, "int64"),  # a Python int: an int
        # modeci-mdf's numpy.full((), 0) on the first step, numpy.full((), 0.0) after
        ({}, "float64"),
        ({"type": "float"}, "float64"),  # numpy.full((), 0.0)
    ],
)
def test_an_input_port_that_nothing_is_sent_to_holds_what_stock_holds(fields, expected):
    port = InputPort(id="i", **fields)
    graph = _node(
        Parameter(id="p", value="i + 1"),
        Parameter(id="v", default_initial_value=1.0, time_derivative="i * 0.5 - v"),
        ports=[port],
        outputs=("p", "v", "i"),
    )
    for trusted in (True, False):
        ours, stock = _inferred_and_stock(graph, trusted)
        assert str(stock[("n", "p")].dtype) == expected  # the oracle says so
        _assert_equal(ours, stock, f"{port}")


def test_an_array_port_that_nothing_is_sent_to_holds_what_stock_holds():
    graph = _node(Parameter(id="p", value="i + 1"), ports=[InputPort(id="i", shape=(2,))],
                  outputs=("p", "i"))
    for trusted in (True, False):
        ours, stock = _inferred_and_stock(graph, trusted)
        assert stock[("n", "p")].shape == (2,)  # the oracle says so
        _assert_equal(ours, stock, "shape (2,)")


def _summing(senders: int, **port) -> Graph:
    """``senders`` source nodes, each sending its output to port ``i`` of node ``n``."""
    sources = [Node(id=f"s{k}", parameters=[Parameter(id="v", value=[1.5 + k])],
                    output_ports=[OutputPort(id="o", value="v")]) for k in range(senders)]
    node = _node(Parameter(id="p", value="i + 1"), ports=[InputPort(id="i", **port)],
                 outputs=("p", "i")).nodes[0]
    edges = [Edge(id=f"e{k}", sender=f"s{k}", sender_port="o", receiver="n", receiver_port="i")
             for k in range(senders)]
    return Graph(id="g", nodes=[*sources, node], edges=edges)


@pytest.mark.parametrize("senders", [0, 1])
@pytest.mark.parametrize("port", [{"reduce": "add"}, {"reduce": "multiply", "shape": (1,)},
                                  {"reduce": "add", "type": "int"}])
def test_a_port_that_sums_what_one_edge_or_none_sends_holds_what_stock_holds(senders, port):
    # NeuroML's exports: a summing port of shape (1,) that nothing is sent to
    graph = _summing(senders, **port)
    for trusted in (True, False):
        ours, stock = _inferred_and_stock(graph, trusted)
        _assert_equal(ours, stock, f"{port}, {senders} senders")


@pytest.mark.parametrize("sent", [[0.5, 1.5], 2.0])
def test_a_list_weight_times_an_array_is_numpys_product(sent):
    # RNNs.json weights an edge [[...]]; times a Python number a list would repeat
    source = Node(id="s", parameters=[Parameter(id="v", value=sent)],
                  output_ports=[OutputPort(id="o", value="v")])
    node = _node(Parameter(id="p", value="i + 1"), ports=[InputPort(id="i")]).nodes[0]
    edge = Edge(id="e", sender="s", sender_port="o", receiver="n", receiver_port="i",
                parameters={"weight": [[1.0, 0.0], [0.5, 2.0]]})
    graph = Graph(id="g", nodes=[source, node], edges=[edge])
    if isinstance(sent, list):
        for trusted in (True, False):
            ours, stock = _inferred_and_stock(graph, trusted)
            assert stock[("n", "p")].shape == (2, 2)  # the oracle says so
            _assert_equal(ours, stock, "list weight")
    else:
        assert infer_values(graph, [["s"], ["n"]], DT) is None


def test_a_port_that_sums_what_two_edges_send_is_left_to_the_probe():
    graph = _summing(2, reduce="add")  # stock adds the second into the first's array
    assert infer_values(graph, [["s0", "s1"], ["n"]], DT) is None
