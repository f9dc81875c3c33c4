"""Time loops: scheduling conditions, until, inputs, and the errors that refuse a model."""

from __future__ import annotations

import numpy as np
import pytest
from modeci_mdf.mdf import (Condition, ConditionSet, Edge, Function, Graph, InputPort, Model,
                            Node, OutputPort, Parameter, ParameterCondition)

import mdf_loops
from mdf_loops.backends.python import NotCompilable
from mdf_loops.errors import ModelError
from mdf_loops.timeloop.conditions import ConditionError

from stock_batch import StockJob, stock_run
from conftest import needs_input_port_fields

pytestmark = needs_input_port_fields  # time loops build ports with default_value/reduce

ES = "TimeScale.ENVIRONMENT_SEQUENCE"


def _counter(node_id: str, step: str = "1") -> Node:
    node = Node(id=node_id)
    node.parameters.append(Parameter(id="n", value=f"n + {step}", default_initial_value=0))
    node.output_ports.append(OutputPort(id="out", value="n"))
    return node


def _graph(node_specific=None, termination=None, trial=True) -> Model:
    a, b, c = _counter("A"), _counter("B", "x"), _counter("C")
    b.input_ports.append(InputPort(id="x"))
    terms = {"environment_state_update": Condition("AfterNPasses", n=1)} if trial else {}
    terms.update(termination or {})
    graph = Graph(id="g", nodes=[a, b, c],
                  edges=[Edge(id="ab", sender="A", sender_port="out", receiver="B",
                              receiver_port="x")],
                  conditions=ConditionSet(node_specific=node_specific or {}, termination=terms))
    return Model(id="conds", graphs=[graph])


CASES = {
    "every_n_calls": {"B": Condition("EveryNCalls", dependencies="A", n=1)},
    "at_pass_not": {"B": Condition("Not", condition=Condition("AtPass", n=3, time_scale=ES)),
                    "C": Condition("AtPass", n=0, time_scale=ES)},
    "all_any": {"B": Condition("All", dependencies=[
        Condition("AfterNCalls", dependencies="A", n=2, time_scale=ES),
        Condition("Any", dependencies=[Condition("EveryNPasses", n=3, time_scale=ES),
                                       Condition("BeforePass", n=6, time_scale=ES)])])},
    "after_pass_before_calls": {"B": Condition("AfterPass", n=2, time_scale=ES),
                                "C": Condition("BeforeNCalls", dependencies="B", n=3,
                                               time_scale=ES)},
}


_STOCK: dict[str, dict] = {}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("backend", ["python", "scheduler", "onnxruntime"])
def test_node_conditions_equal_stock(case, backend, tmp_path):
    model = _graph(CASES[case], {"environment_sequence": Condition(
        "AfterNCalls", dependencies="B", n=9, time_scale=ES)})
    path = tmp_path / "m.json"
    model.to_json_file(str(path))
    record = ["A.out", "B.out", "C.out"]
    if case not in _STOCK:  # one stock run per case, shared by the backends
        _STOCK[case] = stock_run(StockJob(path, 1.0, 20, record), tmp_path, None)
    stock = _STOCK[case]
    traces = mdf_loops.simulate(path, dt=1.0, steps=20, record=record, backend=backend)
    assert traces.steps < 20  # the termination condition ended it
    for ref in record:
        ours, theirs = traces[ref].astype(float), stock[ref]
        n = len(ours)
        known = ~np.isnan(theirs[:n])
        np.testing.assert_array_equal(ours[known], theirs[:n][known], err_msg=f"{case} {ref}")
        assert (theirs[n:] == theirs[n - 1]).all()


def test_until_and_run_time_inputs_equal_stock(tmp_path):
    node = Node(id="leak")
    node.input_ports.append(InputPort(id="drive", default_value=0.0))
    node.parameters.append(Parameter(id="x", default_initial_value=0.0,
                                     time_derivative="(-x + drive) / 2.0"))
    node.output_ports.append(OutputPort(id="x_out", value="x"))
    path = tmp_path / "leak.json"
    Model(id="leak", graphs=[Graph(id="g", nodes=[node])]).to_json_file(str(path))
    drive = np.sin(np.arange(200) / 7.0) + 1.0
    stock = stock_run(StockJob(path, 0.1, 200, ["leak.x"]), tmp_path, {"drive": drive})
    loop = mdf_loops.to_time_loop(path, dt=0.1, steps=200, record=["leak.x"],
                                  inputs={"drive": None}, until="leak.x > 0.5")
    for backend in ("python", "scheduler", "onnxruntime"):
        traces = mdf_loops.simulate(loop, inputs={"drive": drive}, backend=backend)
        crossed = int(np.argmax(stock["leak.x"] > 0.5))
        assert traces.steps == crossed + 1, backend
        np.testing.assert_allclose(traces["leak.x"], stock["leak.x"][:crossed + 1], rtol=1e-9)
    shorter = mdf_loops.simulate(loop, inputs={"drive": drive}, steps=5)
    np.testing.assert_array_equal(shorter["leak.x"], stock["leak.x"][:5])


@pytest.mark.parametrize("condition, named", [
    (Condition("TimeInterval", start=1), "TimeInterval"),
    (Condition("WhenFinished", dependencies="A"), "WhenFinished"),
    (Condition("JustRan", dependencies="A"), "JustRan"),
])
def test_unmappable_node_conditions_are_refused_by_name(condition, named):
    with pytest.raises(ConditionError, match=named):
        mdf_loops.to_time_loop(_graph({"C": condition}), dt=1.0, steps=5, record=["C.out"])


def test_multi_pass_trials_are_refused():
    model = _graph({"B": Condition("EveryNPasses", n=2)}, trial=False)
    with pytest.raises(ConditionError, match="AllHaveRun.*AfterNPasses"):
        mdf_loops.to_time_loop(model, dt=1.0, steps=5, record=["B.out"])


def test_threshold_ending_a_step_half_way_is_refused():
    model = _graph(termination={"environment_sequence": Condition(
        "Threshold", dependency="A", parameter="n", threshold=3, comparator=">=")})
    with pytest.raises(ConditionError, match="Threshold on 'A.n'.*last consideration set"):
        mdf_loops.to_time_loop(model, dt=1.0, steps=5, record=["B.out"])


@pytest.mark.parametrize("kwargs, message", [
    ({"dt": 1.0, "record": ["A.nope"]}, "node 'A' has no output port or parameter 'nope'"),
    ({"dt": 1.0, "record": ["Z.out"]}, "no node 'Z'"),
    ({"dt": 1.0, "record": ["A"]}, "expected 'node_id.port_or_parameter_id'"),
    ({"dt": 0.0, "record": ["A.out"]}, "dt must be a positive"),
    ({"dt": 1.0, "duration": 3.0, "record": ["A.out"]}, "steps or duration, not both"),
    ({"dt": 1.0, "record": ["A.out"], "inputs": {"q": np.zeros(9)}}, "input 'q'"),
    ({"dt": 1.0, "record": ["A.out"], "inputs": {"x": np.zeros(2)}}, "has 2 steps"),
])
def test_bad_arguments_name_what_is_wrong(kwargs, message):
    kwargs = {"steps": 5, **kwargs}
    with pytest.raises(ModelError, match=message):
        mdf_loops.to_time_loop(_graph(), **kwargs)


def test_a_parameter_without_a_value_is_refused():
    node = Node(id="N")
    node.parameters.append(Parameter(id="p", default_initial_value=1.0))
    node.output_ports.append(OutputPort(id="out", value="p"))
    model = Model(id="m", graphs=[Graph(id="g", nodes=[node])])
    with pytest.raises(ModelError, match="node 'N'.*'p'"):
        mdf_loops.to_time_loop(model, dt=1.0, steps=3, record=["N.out"])


def test_simulate_needs_dt_for_a_model_without_a_loop():
    with pytest.raises(ModelError, match="give dt"):
        mdf_loops.simulate(_graph(), steps=3)


def test_an_onnx_function_falls_back_from_python_to_onnxruntime(tmp_path):
    node = Node(id="N")
    node.parameters += [
        Parameter(id="x", default_initial_value=[1.0, 2.0], time_derivative="-x"),
        Parameter(id="y", function="onnx::Relu", args={"X": "x - 0.5"}),
    ]
    node.output_ports.append(OutputPort(id="out", value="y"))
    path = tmp_path / "f.json"
    Model(id="f", graphs=[Graph(id="g", nodes=[node])]).to_json_file(str(path))
    stock = stock_run(StockJob(path, 0.1, 30, ["N.out"]), tmp_path, None)
    with pytest.raises(NotCompilable, match="function 'onnx::Relu'"):
        mdf_loops.simulate(path, dt=0.1, steps=30, record=["N.out"], backend="python")
    traces = mdf_loops.simulate(path, dt=0.1, steps=30, record=["N.out"])
    assert traces.backend == "onnxruntime"  # the backend that ran it
    x = [np.array([1.0, 2.0])]
    for _ in range(29):
        x.append(x[-1] + (-x[-1]) * 0.1)
    expected = np.maximum(np.array(x) - 0.5, 0.0)
    np.testing.assert_allclose(traces["N.out"], expected, rtol=1e-12)
    exact = mdf_loops.simulate(path, dt=0.1, steps=30, record=["N.out"], backend="scheduler")
    np.testing.assert_allclose(exact["N.out"], expected, rtol=1e-12)
    # stock modeci-mdf runs onnx:: functions in float32 (docs/timeloops.md)
    np.testing.assert_allclose(stock["N.out"], expected, rtol=1e-6)
    assert not np.array_equal(stock["N.out"], expected)


def test_array_states_equal_stock(tmp_path):
    node = Node(id="pop")
    node.input_ports.append(InputPort(id="I", default_value=[1.0, 2.0, 0.5]))
    node.parameters += [Parameter(id="tau", value=5.0),
                        Parameter(id="v", default_initial_value=[0.0, 0.1, 0.2],
                                  time_derivative="(-v + I) / tau",
                                  conditions=[ParameterCondition(id="cap", test="v > 0.9",
                                                                 value="0.0")])]
    node.output_ports.append(OutputPort(id="v_out", value="v"))
    path = tmp_path / "vec.json"
    Model(id="vec", graphs=[Graph(id="g", nodes=[node])]).to_json_file(str(path))
    stock = stock_run(StockJob(path, 0.1, 80, ["pop.v_out"]), tmp_path, None)
    for backend in ("python", "scheduler", "onnxruntime"):
        traces = mdf_loops.simulate(path, dt=0.1, steps=80, record=["pop.v_out"], backend=backend)
        assert traces["pop.v_out"].shape == (80, 3)
        np.testing.assert_allclose(traces["pop.v_out"], stock["pop.v_out"],
                                   rtol=0 if backend != "onnxruntime" else 1e-9)


def test_a_cycle_of_edges_is_refused():
    model = _graph()
    model.graphs[0].edges.append(Edge(id="ba", sender="B", sender_port="out", receiver="A",
                                      receiver_port="back"))
    model.graphs[0].nodes[0].input_ports.append(InputPort(id="back"))
    with pytest.raises(ModelError, match="cycle among \\['A', 'B'\\]"):
        mdf_loops.to_time_loop(model, dt=1.0, steps=3, record=["A.out"])


def test_a_count_condition_within_its_own_consideration_set_is_refused():
    model = _graph({"C": Condition("EveryNCalls", dependencies="A", n=1)})
    with pytest.raises(ConditionError, match="node 'C'.*depends on 'A', which runs in the same "
                                             "consideration set"):
        mdf_loops.to_time_loop(model, dt=1.0, steps=5, record=["C.out"])


def test_a_time_loop_model_takes_steps_and_its_own_inputs_only():
    loop = mdf_loops.to_time_loop(_graph(), dt=1.0, steps=5, record=["A.out"])
    with pytest.raises(ModelError, match="time-loop model already: its dt, until, duration and "
                                         "record are fixed"):
        mdf_loops.simulate(loop, dt=1.0)
    with pytest.raises(ModelError, match="no input time series 'drive' \\(it reads \\[\\]\\)"):
        mdf_loops.simulate(loop, inputs={"drive": np.zeros(5)})


def _single(node: Node) -> Model:
    return Model(id="one", graphs=[Graph(id="g", nodes=[node])])


def test_step_nodes_refuse_what_has_no_stateless_form():
    clash = Node(id="N")
    clash.parameters.append(Parameter(id="n", value="n + 1", default_initial_value=0))
    clash.output_ports += [OutputPort(id="out", value="n"), OutputPort(id="n__value", value="n")]
    with pytest.raises(ModelError, match="node 'N': output port 'n__value' clashes with a name "
                                         "the time loop needs"):
        mdf_loops.to_time_loop(_single(clash), dt=1.0, steps=3, record=["N.out"])
    with_function = Node(id="N")
    with_function.parameters.append(Parameter(id="f", value="f + 1"))
    with_function.functions.append(Function(id="f", value="2 * 3"))
    with_function.output_ports.append(OutputPort(id="out", value="f"))
    with pytest.raises(ModelError, match="node 'N' function 'f': a parameter of the node has "
                                         "the same id"):
        mdf_loops.to_time_loop(_single(with_function), dt=1.0, steps=3, record=["N.out"])
