"""The constructs of modeci-mdf's own stateful example models, in models of our own,
simulated equal to stock modeci-mdf's loop (one subprocess without mdf_loops for all).

Each model reproduces what one of ModECI/MDF's ``examples/MDF`` files does (the files
themselves are not in this repository; ``test_external_models.py`` runs a folder of
them by hand): an integer counter (States.json), list-valued parameters read before
their first evaluation (RNN/IAF_net2.json), a parameter set only by conditions
(SwitchedRLC_Circuit.json), an input port nothing is sent to (FN.mdf.json), regimes whose
tests multiply booleans (NeuroML/PyNN/OneCell.mdf.yaml), a function parameter read by a time derivative before it
is evaluated (RNN/RNNs.json), a node's ``functions`` list (translation/*.json) and MDF
standard functions (``sin``, ``linear``, ``MatMul``).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_input_port_fields
from modeci_mdf.mdf import (
    Edge,
    Function,
    Graph,
    InputPort,
    Model,
    Node,
    OutputPort,
    Parameter,
    ParameterCondition,
)
from stock_batch import StockJob, stock_traces

import mdf_loops

pytestmark = needs_input_port_fields

DT, STEPS = 0.05, 25


def _when(name: str, test: str, value) -> ParameterCondition:
    return ParameterCondition(id=name, test=test, value=value)


def _model(name: str, *nodes: Node, edges=()) -> Model:
    return Model(id=name, graphs=[Graph(id=f"{name}_graph", nodes=list(nodes), edges=list(edges))])


def counter_and_sine() -> Model:
    counter = Node(id="counter", parameters=[
        Parameter(id="increment", value=1), Parameter(id="count", value="count + increment")],
        output_ports=[OutputPort(id="out", value="count")])
    sine = Node(id="sine", parameters=[
        Parameter(id="level", default_initial_value=0, time_derivative="6.283185 * rate / 0.4"),
        Parameter(id="rate", default_initial_value=1, time_derivative="-6.283185 * level / 0.4")],
        output_ports=[OutputPort(id="out", value="3 * level")])
    return _model("counter_and_sine", counter, sine)


def list_parameters() -> Model:
    drive = Node(id="drive", parameters=[Parameter(id="amp", value=[12.0, 9.0, 30.0])],
                 output_ports=[OutputPort(id="out", value="amp")])
    cells = Node(
        id="cells", input_ports=[InputPort(id="current", shape=(3,))],
        parameters=[
            Parameter(id="erev", value=[-70, -65, -70]),
            Parameter(id="v0", value=[-70, -60, -50]),
            Parameter(id="thresh", value=[-20, -20, -20]),
            Parameter(id="spiking", default_initial_value="0", conditions=[
                _when("on", "v >= thresh", "1"),
                _when("off", "v < thresh", "0")]),
            Parameter(id="v", default_initial_value="v0", time_derivative="-(v - erev) / 5 + current",
                      conditions=[_when("reset", "v > thresh", "erev")])],
        output_ports=[OutputPort(id="v_out", value="v"), OutputPort(id="spikes", value="spiking")])
    return _model("list_parameters", drive, cells,
                  edges=[Edge(id="e", sender="drive", sender_port="out", receiver="cells",
                              receiver_port="current")])


def conditions_only() -> Model:
    circuit = Node(id="rlc", parameters=[
        Parameter(id="Vs", conditions=[_when("off", "time < 0.5", "0"),
                                       _when("on", "time >= 0.5", 0.1)]),
        Parameter(id="time", default_initial_value=0, time_derivative="1"),
        Parameter(id="V", default_initial_value=0, time_derivative="i_C / 0.01"),
        Parameter(id="i_R", value="V / 10"),
        Parameter(id="i_L", default_initial_value=0, time_derivative="(Vs - V) / 1"),
        Parameter(id="i_C", value="i_L - i_R")],
        output_ports=[OutputPort(id="V_out", value="V"), OutputPort(id="Vs_out", value="Vs")])
    return _model("conditions_only", circuit)


def derivative_reads_function() -> Model:
    rnn = Node(id="rnn", parameters=[
        Parameter(id="W", value=[[0.5, -0.2], [0.1, 0.9]]),
        Parameter(id="t", default_initial_value=0, time_derivative="1"),
        Parameter(id="x", default_initial_value=[0.3, -0.4], time_derivative="-x + fb + drive"),
        Parameter(id="r", function="tanh", args={"variable0": "x", "scale": 1}),
        Parameter(id="fb", function="MatMul", args={"A": "W", "B": "r"}),
        Parameter(id="drive", function="sin", args={"variable0": "2 * t", "scale": 0.5})],
        output_ports=[OutputPort(id="x_out", value="x"), OutputPort(id="r_out", value="r")])
    return _model("derivative_reads_function", rnn)


def node_functions() -> Model:
    cell = Node(id="cell", parameters=[
        Parameter(id="dt", value=0.05), Parameter(id="scale", value=[2.0, 0.5]),
        Parameter(id="slope", value=[3.0, -1.0]),
        Parameter(id="V", default_initial_value=-1.0, value="V_next"),
        Parameter(id="W", default_initial_value=0.0, value="W_next"),
        Parameter(id="time", default_initial_value=0, value="time_next")],
        functions=[
            Function(id="V_next", value="V + dt * (V - V * V * V / 3 - W + 0.5)"),
            Function(id="W_next", value="W + dt * 0.08 * (V_next + a - b * W)",
                     args={"a": 0.7, "b": "0.8"}),
            Function(id="time_next", function="linear",
                     args={"variable0": "time", "slope": 1, "intercept": "dt"}),
            Function(id="scaled", value="scale * k", args={"k": "V"}),
            # an arg reads the parameter of its own name; a later arg reads the arg
            Function(id="lin", function="linear",
                     args={"variable0": "V", "slope": "slope + 1", "intercept": "slope"})],
        output_ports=[OutputPort(id="V_out", value="V"), OutputPort(id="t_out", value="time"),
                      OutputPort(id="lin_out", value="lin"),
                      OutputPort(id="scaled_out", value="scaled")])
    return _model("node_functions", cell)


def unset_input_port() -> Model:
    # nothing is sent to "drive" (FN.mdf.json's INPUT) nor "pair": modeci-mdf reads int zeros
    # on the first evaluation, float zeros after; "level" starts from it, "reading" adds to it
    cell = Node(id="cell", input_ports=[InputPort(id="drive"), InputPort(id="typed", type="int"),
                                        InputPort(id="pair", shape=(2,))],
                parameters=[Parameter(id="reading", value="drive + 1"),
                            Parameter(id="level", default_initial_value="drive",
                                      time_derivative="reading + typed - level")],
                output_ports=[OutputPort(id="reading_out", value="reading"),
                              OutputPort(id="level_out", value="level"),
                              OutputPort(id="drive_out", value="drive * 2"),
                              OutputPort(id="pair_out", value="pair * 2")])
    return _model("unset_input_port", cell)


def large_unset_input_port() -> Model:
    # as modeci-mdf's PyTorch exports without their inputs (a weight port of millions of
    # numbers): zeros of more numbers than the python backend writes into its code, and a
    # state of that shape; "sum" reads the port's zeros, int on the first evaluation
    cell = Node(id="cell", input_ports=[InputPort(id="weights", shape=LARGE_SHAPE)],
                parameters=[Parameter(id="acc", default_initial_value=np.ones(LARGE_SHAPE).tolist(),
                                      time_derivative="weights - acc"),
                            Parameter(id="sum", value="numpy.sum(weights)")],
                output_ports=[OutputPort(id="total", value="numpy.sum(acc)"),
                              OutputPort(id="top", value="numpy.max(acc)"),
                              OutputPort(id="sum_out", value="sum")])
    return _model("large_unset_input_port", cell)


LARGE_SHAPE = (120, 100)  # 12,000 numbers: more than the python backend's literals


def list_condition_value() -> Model:
    # NeuroML's exports write every constant as a list, a condition's value too ("[2.5]"):
    # the step once wrote it into a text that stock's engine cut at '[' ("'(' was never
    # closed" on the scheduler)
    cell = Node(id="cell", parameters=[
        Parameter(id="level", default_initial_value=[1.0], time_derivative="0.5 - level",
                  conditions=[_when("reset", "level < 0.8", [2.5])]),
        Parameter(id="flag", conditions=[_when("on", "level > 2", [1.0, 2.0])])],
        output_ports=[OutputPort(id="level_out", value="level")])
    return _model("list_condition_value", cell)


def regimes() -> Model:
    # NeuroML/PyNN's exports (OneCell.mdf.yaml): a regime flag, tests that multiply two
    # booleans (numpy's logical and), a spike time set only by conditions
    fires = "(REGIME_on == ACTIVE) * (v > thresh)"
    cell = Node(id="cell", parameters=[
        Parameter(id="ACTIVE", value=[1]), Parameter(id="thresh", value=[0.6]),
        Parameter(id="t", default_initial_value=0, time_derivative="1"),
        Parameter(id="v", default_initial_value=[0.0], time_derivative="REGIME_on * (2 - v)",
                  conditions=[_when("reset", fires, "0.1 * thresh")]),
        Parameter(id="spike_time", conditions=[_when("spiked", fires, "t")]),
        Parameter(id="REGIME_on", value="REGIME_on", default_initial_value="ACTIVE",
                  conditions=[_when("exit", f"{fires} + (t > 20)", 0),
                              _when("enter", "(REGIME_on == 0) * (t > spike_time + 0.2)", 1)])],
        output_ports=[OutputPort(id="v_out", value="v"), OutputPort(id="on", value="REGIME_on"),
                      OutputPort(id="spike_out", value="spike_time")])
    return _model("regimes", cell)


MODELS = {f.__name__: f for f in (counter_and_sine, list_parameters, conditions_only,
                                   derivative_reads_function, node_functions, unset_input_port,
                                   regimes, list_condition_value)}
RECORDS = {"counter_and_sine": ["counter.out", "counter.count", "sine.out"]}


def _record(model: Model) -> list[str]:
    return RECORDS.get(model.id) or [f"{n.id}.{p.id}" for n in model.graphs[0].nodes
                                     for p in n.output_ports]


#: models the python backend does not compile (``auto`` runs onnxruntime)
NOT_PYTHON = {f.__name__: f for f in (large_unset_input_port,)}


@pytest.fixture(scope="module")
def stock(tmp_path_factory) -> dict[str, dict]:
    """Every model through stock modeci-mdf's loop, in one interpreter without mdf_loops."""
    models = {name: build() for name, build in {**MODELS, **NOT_PYTHON}.items()}
    jobs = {name: StockJob(model, DT, STEPS, _record(model)) for name, model in models.items()}
    return stock_traces(jobs, tmp_path_factory.mktemp("stock_constructs"))


@pytest.mark.parametrize("backend", ["scheduler", "python", "onnxruntime", "auto"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_construct_equals_stock(name, backend, stock):
    model = MODELS[name]()
    traces = mdf_loops.simulate(model, dt=DT, steps=STEPS, record=_record(model), backend=backend)
    assert traces.backend == ("python" if backend == "auto" else backend)
    for ref in _record(model):
        ours, theirs = traces[ref], stock[name][ref]
        assert ours.shape == theirs.shape, (ref, ours.shape, theirs.shape)
        assert ours.dtype == theirs.dtype, (ref, ours.dtype, theirs.dtype)  # ints stay ints
        if backend == "onnxruntime":
            np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-300, err_msg=ref)
        else:
            np.testing.assert_array_equal(ours, theirs, err_msg=f"{name} {ref} on {backend}")


@pytest.mark.parametrize("backend", ["scheduler", "onnxruntime", "auto"])
def test_large_unset_port_equals_stock(backend, stock):
    model = large_unset_input_port()
    traces = mdf_loops.simulate(model, dt=DT, steps=STEPS, record=_record(model), backend=backend)
    assert traces.backend == ("onnxruntime" if backend == "auto" else backend)
    for ref in _record(model):
        ours, theirs = traces[ref], stock[model.id][ref]
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, ref
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0, err_msg=ref)


def test_large_unset_port_is_refused_by_name_on_python():
    with pytest.raises(mdf_loops.MdfLoopsError, match=r"node 'cell' 'weights__first': a "
                       r"constant of more than 10,000 numbers .*onnxruntime holds them"):
        mdf_loops.simulate(large_unset_input_port(), dt=DT, steps=3, backend="python")


def test_the_loop_holds_zeros_and_array_states_as_arrays():
    # a nested list costs a Python object, and a check, per number: a port of 36 million
    # zeros (ModECI's PyTorch/simple_pytorch_to_mdf.json) took minutes to simulate
    loop = mdf_loops.to_time_loop(large_unset_input_port(), dt=DT, steps=3)
    node = loop.graphs[0].nodes[0]
    params = {p.id: p.value for p in node.parameters}
    (body,) = params["body"].values()
    cell = next(n for n in body.nodes if any(p.id == "weights__first" for p in n.parameters))
    held = {p.id: p.value for p in cell.parameters}
    for name, dtype in (("weights__first", "int64"), ("weights__later", "float64")):
        assert isinstance(held[name], np.ndarray) and held[name].dtype == dtype, name
        assert held[name].shape == LARGE_SHAPE and not held[name].any(), name
    states = [v for k, v in params.items() if k.startswith("init__")]
    assert any(isinstance(v, np.ndarray) and v.shape == LARGE_SHAPE for v in states), states


def test_a_number_that_becomes_a_large_array_is_refused_by_name():
    # stock's first step reads the number (numpy.sum 1.0), the steps after the array;
    # carried as the array from the start, the first step's sum would be 12,000
    model = large_unset_input_port()
    model.graphs[0].nodes[0].parameters[0].default_initial_value = 1.0
    with pytest.raises(mdf_loops.MdfLoopsError, match=r"node 'cell' 'acc': a number on step 0 "
                       r"and an array of shape \(120, 100\) from step 1 on.*Give its "
                       r"default_initial_value as an array of shape \(120, 100\)"):
        mdf_loops.simulate(model, dt=DT, steps=3)


# ------------------------------------------------- an edge into a port with a default_value


def _edge_into_default(default, second_edge: bool = False) -> Model:
    # modeci-mdf orders two nodes by an edge only into a port without a default_value
    # (Graph.dependency_dict): with one, "source" and "sink" share a consideration set and
    # stock runs them in an order of memory addresses, unless another edge orders them
    source = Node(id="source", parameters=[Parameter(id="count", value="count + 1",
                                                     default_initial_value=0)],
                  output_ports=[OutputPort(id="out", value="count + 1")])
    sink = Node(id="sink", input_ports=[InputPort(id="inp", default_value=default),
                                        InputPort(id="other")],
                parameters=[Parameter(id="level", default_initial_value=1.0,
                                      time_derivative="inp - level")],
                output_ports=[OutputPort(id="level_out", value="level"),
                              OutputPort(id="inp_out", value="inp * 2")])
    edges = [Edge(id="e", sender="source", sender_port="out", receiver="sink",
                  receiver_port="inp")]
    if second_edge:  # into the port without a default: it orders the two
        edges.append(Edge(id="f", sender="source", sender_port="out", receiver="sink",
                          receiver_port="other"))
    return Model(id="edge_into_default", graphs=[Graph(id="g", nodes=[source, sink],
                                                         edges=edges)])


EDGE_RECORD = ["source.out", "sink.level_out", "sink.inp_out"]


@pytest.fixture(scope="module")
def stock_sender_first(tmp_path_factory) -> dict[str, np.ndarray]:
    """Stock's loop where the edge orders the nodes: the port without its default."""
    jobs = {"ordered": StockJob(_edge_into_default(None), DT, STEPS, EDGE_RECORD)}
    return stock_traces(jobs, tmp_path_factory.mktemp("edge_into_default"))["ordered"]


@pytest.mark.parametrize("backend", ["scheduler", "python", "onnxruntime"])
def test_an_edge_into_a_port_with_a_default_runs_its_sender_first(
    backend, stock_sender_first, caplog
):
    # read first, the port's 0.25 would make "inp * 2" a float: the probe must not see it
    traces = mdf_loops.simulate(_edge_into_default(0.25), dt=DT, steps=STEPS,
                                record=EDGE_RECORD, backend=backend)
    for ref in EDGE_RECORD:
        if backend == "python":
            assert traces[ref].dtype == stock_sender_first[ref].dtype, ref
        np.testing.assert_allclose(traces[ref], stock_sender_first[ref], rtol=1e-12, atol=0,
                                   err_msg=f"{ref} on {backend}")
    (warning,) = [r.getMessage() for r in caplog.records if "does not order" in r.getMessage()]
    assert ("graph 'g' node 'sink' input port 'inp': the edge from 'source.out' does not order "
            "the two nodes in modeci-mdf (the port has a default_value)") in warning
    assert "the time loop runs 'source' first" in warning


def test_no_warning_where_another_edge_orders_the_nodes(stock_sender_first, caplog):
    traces = mdf_loops.simulate(_edge_into_default(0.25, second_edge=True), dt=DT, steps=STEPS,
                                record=EDGE_RECORD, backend="python")
    np.testing.assert_array_equal(traces["sink.level_out"], stock_sender_first["sink.level_out"])
    assert not [r for r in caplog.records if "does not order" in r.getMessage()]


def test_a_receiver_that_stock_runs_first_is_refused_by_name():
    # "clock" orders "source" after it; "sink" has no ordering edge: stock's first
    # consideration set holds clock and sink, so sink reads source's value of the step before
    model = _edge_into_default(0.25)
    graph = model.graphs[0]
    graph.nodes.insert(0, Node(id="clock", parameters=[Parameter(id="t", value="1")],
                               output_ports=[OutputPort(id="tick", value="t")]))
    graph.nodes[1].input_ports.append(InputPort(id="tick"))
    graph.edges.append(Edge(id="c", sender="clock", sender_port="tick", receiver="source",
                            receiver_port="tick"))
    with pytest.raises(mdf_loops.MdfLoopsError, match=r"node 'sink' input port 'inp': the edge "
                       r"from 'source.out' does not order the two nodes .*stock runs 'sink' "
                       r"first, reading the value 'source' had the step before"):
        mdf_loops.simulate(model, dt=DT, steps=3)


# ------------------------------------------------- whole-number float results


def _whole_floats() -> Model:
    # modelspec's evaluate makes an expression's whole-number Python float an int:
    # "2 * half" is the int 3 on every step, so stock records int64; "count * half" is a
    # float on odd steps (float64)
    cell = Node(id="cell", parameters=[Parameter(id="half", value=1.5),
                                       Parameter(id="count", value="count + 1",
                                                 default_initial_value=0)],
                output_ports=[OutputPort(id="whole", value="2 * half"),
                              OutputPort(id="frac", value="half * 3"),
                              OutputPort(id="mixed", value="count * half")])
    return _model("whole_floats", cell)


WHOLE_RECORD = ["cell.whole", "cell.frac", "cell.mixed"]


@pytest.fixture(scope="module")
def stock_whole(tmp_path_factory) -> dict[str, np.ndarray]:
    jobs = {"whole": StockJob(_whole_floats(), DT, STEPS, WHOLE_RECORD)}
    return stock_traces(jobs, tmp_path_factory.mktemp("whole_floats"))["whole"]


@pytest.mark.parametrize("backend", ["python", "scheduler", "auto"])
def test_whole_number_floats_record_as_stock(backend, stock_whole):
    traces = mdf_loops.simulate(_whole_floats(), dt=DT, steps=STEPS, record=WHOLE_RECORD,
                                backend=backend)
    assert traces.backend == ("python" if backend == "auto" else backend)
    for ref in WHOLE_RECORD:
        assert traces[ref].dtype == stock_whole[ref].dtype, (ref, traces[ref].dtype)
        np.testing.assert_array_equal(traces[ref], stock_whole[ref], err_msg=ref)
