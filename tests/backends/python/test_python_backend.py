"""The python backend of time loops (mdf_loops/backends/python/): values and refusals.

The oracle is the loop written by hand in numpy (Newton's law of cooling, forward
Euler, the update modeci-mdf's engine applies); the stock-engine comparisons of every
example are in tests/timeloop/test_timeloop.py.
"""

from __future__ import annotations

import ast

import numpy as np
import pytest
from modeci_mdf.mdf import Edge, Graph, InputPort, Model, Node, OutputPort, Parameter

import mdf_loops
from mdf_loops.backends.python import NotCompilable, compile_time_loop
from mdf_loops.backends.python.scalar_types import python_type, specialize
from mdf_loops.errors import ModelError
from mdf_loops.model.convention import body_graph, wrap_body
from conftest import needs_input_port_fields

pytestmark = needs_input_port_fields  # time loops build ports with default_value/reduce

DT, K, AMBIENT, T0 = 0.1, 0.3, 20.0, 90.0


def _cooling(node_id: str = "body") -> Model:
    node = Node(id=node_id)
    node.input_ports.append(InputPort(id="ambient", default_value=AMBIENT))
    node.parameters += [
        Parameter(id="k", value=K),
        Parameter(id="T", default_initial_value=T0, time_derivative="-k * (T - ambient)"),
    ]
    node.output_ports.append(OutputPort(id="temp", value="T"))
    return Model(id="cool", graphs=[Graph(id="g", nodes=[node])])


def _numpy_cooling(steps: int) -> np.ndarray:
    temps = np.empty(steps)
    temps[0] = T0
    for k in range(1, steps):
        temps[k] = temps[k - 1] + (-K * (temps[k - 1] - AMBIENT)) * DT
    return temps


def _time_loop(node_id: str = "body", steps: int = 50) -> Model:
    return mdf_loops.to_time_loop(_cooling(node_id), dt=DT, steps=steps,
                                  record=[f"{node_id}.temp"])


def _edit_body(model: Model, edit) -> Model:
    """``model`` with its Loop body changed by ``edit(body)`` (a model no converter makes)."""
    params = {p.id: p for p in model.graphs[0].nodes[0].parameters}
    body = body_graph(params["body"].value)
    edit(body)
    params["body"].value = wrap_body(body)
    return model


def test_simulate_on_python_equals_the_numpy_loop():
    traces = mdf_loops.simulate(_time_loop(steps=50), backend="python")
    assert traces.backend == "python"
    np.testing.assert_allclose(traces.time, np.arange(50) * DT, rtol=1e-12)
    np.testing.assert_allclose(traces["body.temp"], _numpy_cooling(50), rtol=1e-12)


def test_the_compiled_function_folds_the_first_step_and_records_arrays():
    compiled = compile_time_loop(_time_loop())
    source = compiled.code.source
    assert "numpy.where" not in source and "first" not in source
    assert compiled.code.n_carried == 1
    # the time, iteration * DT on every step, is left out of the loop and made after it
    assert compiled.code.time_step == DT and "s0" not in source.split(":", 1)[1]
    time, temps = compiled.new_scans(7)
    cond, carried, done = compiled.run(0, 7, True, T0, time, temps)
    assert cond is True and done == 7 and len(time) == 0
    np.testing.assert_array_equal(compiled.time(done, time), [k * DT for k in range(7)])
    assert compiled.code.scan_codes == ("d", "d")  # float64 scalars: written into arrays
    assert "s1[iteration] = " in source and "append" not in source
    np.testing.assert_allclose(np.asarray(temps), _numpy_cooling(7), rtol=1e-12)
    # in chunks: each continues from the carried values the last returned
    time, temps = compiled.new_scans(7)
    cond, carried, done = compiled.run(0, 3, True, T0, time, temps)
    assert done == 3
    assert compiled.run(3, 7, cond, *carried, time, temps)[2] == 7
    np.testing.assert_array_equal(np.asarray(temps), _numpy_cooling(7))
    empty = compiled.new_scans(0)
    assert compiled.run(0, 0, True, T0, *empty)[2] == 0
    assert len(empty[1]) == 0  # no steps, nothing recorded
    assert compiled.time(0, empty[0]).dtype == np.float64


def test_a_loop_that_a_condition_can_end_records_its_time_and_counts_its_steps():
    # until: the condition can change, so the loop tests it each step and appends the time
    model = mdf_loops.to_time_loop(_cooling(), dt=DT, steps=50, record=["body.temp"],
                                   until="body.temp < 80")
    compiled = compile_time_loop(model)
    assert compiled.code.time_step is None
    expected = _numpy_cooling(50)
    stop = int(np.argmax(expected < 80)) + 1  # the step where it holds is the last
    time, temps = compiled.new_scans(50)
    cond, _, done = compiled.run(0, 50, True, T0, time, temps)
    assert (cond, done) == (False, stop)
    np.testing.assert_array_equal(compiled.time(done, np.asarray(time)[:done]),
                                  [k * DT for k in range(stop)])
    np.testing.assert_allclose(np.asarray(temps)[:done], expected[:stop], rtol=1e-12)


def test_a_node_id_that_is_no_identifier_is_refused():
    # to_time_loop refuses a stateful node so named: its carried names are made of ids
    with pytest.raises(ModelError, match="node 'cell-1' parameter 'T': a time loop carries"):
        _time_loop("cell-1")
    # the writer refuses a body that names a node so (a model no converter makes)
    extra = Node(id="cell-1", parameters=[Parameter(id="k", value="2.0 * 3")],
                 output_ports=[OutputPort(id="out", value="k")])
    model = _edit_body(_time_loop(), lambda body: body.nodes.append(extra))
    with pytest.raises(NotCompilable, match="node 'cell-1' '.*': not a Python identifier"):
        compile_time_loop(model)


def test_a_graph_of_more_than_the_loop_node_is_refused():
    model = _time_loop()
    model.graphs[0].nodes.append(Node(id="extra"))
    with pytest.raises(NotCompilable, match="graph 'g_time_loop': expected the single node "
                                            "'simulation'"):
        compile_time_loop(model)


def test_a_cycle_in_the_body_is_refused():
    def cycle(body: Graph) -> None:
        clock = next(n for n in body.nodes if n.id == "clock")
        clock.input_ports.append(InputPort(id="back"))
        body.edges.append(Edge(id="back", sender="body", sender_port="temp", receiver="clock",
                               receiver_port="back"))

    with pytest.raises(NotCompilable, match="graph 'g_step': its edges form a cycle"):
        compile_time_loop(_edit_body(_time_loop(), cycle))


def test_a_stateful_parameter_in_the_body_is_refused():
    def stateful(body: Graph) -> None:
        node = next(n for n in body.nodes if n.id == "body")
        node.parameters[0].time_derivative = "1.0"

    with pytest.raises(NotCompilable, match="node 'body' parameter 'T__old': stateful in a body"):
        compile_time_loop(_edit_body(_time_loop(), stateful))


def test_a_default_that_is_no_number_is_refused():
    def text_default(body: Graph) -> None:
        node = next(n for n in body.nodes if n.id == "body")
        node.input_ports[0].default_value = "warm"

    with pytest.raises(NotCompilable, match="node 'body' 'ambient': value 'warm' is not a number"):
        compile_time_loop(_edit_body(_time_loop(), text_default))


def test_python_type_names_exact_builtin_types_only():
    assert [python_type(v) for v in (1.5, 2, True, np.float64(1.5), "x")] == [
        "float", "int", "bool", None, None]


def test_specialize_turns_a_selection_between_known_floats_into_a_conditional():
    source = "a = 1.5\nb = a * 2\nc = _where(a > b, a, b)\nd = _where(a > b, a, u)\n"
    statements = ast.parse(source).body
    types = specialize(statements, {"u": None})
    assert types == {"u": None, "a": "float", "b": "float", "c": "float", "d": None}
    written = ast.unparse(ast.Module(body=statements, type_ignores=[]))
    assert "c = a if a > b else b" in written and "d = _where(a > b, a, u)" in written
    scope = {"_where": np.where, "u": np.float64(7.0)}
    exec(written, scope)  # noqa: S102 - the test's own code
    assert scope["c"] == np.where(1.5 > 3.0, 1.5, 3.0) and type(scope["c"]) is float
    assert scope["d"] == 7.0


def test_a_large_constant_goes_to_onnxruntime_not_into_the_code(caplog):
    """A weight of more than LARGEST_LITERAL numbers is refused by the python backend by
    name (written as a literal, it took seconds to parse and compile); auto runs it on
    onnxruntime with the values of the loop written in numpy."""
    from mdf_loops.backends.python.writer import LARGEST_LITERAL

    side = int(LARGEST_LITERAL**0.5) + 1
    weights = np.arange(side * side, dtype=float).reshape(side, side) / side**2
    node = Node(id="n", parameters=[
        Parameter(id="W", value=weights.tolist()),
        Parameter(id="x", default_initial_value=1.0, time_derivative="-x * numpy.mean(W)"),
    ], output_ports=[OutputPort(id="o", value="x")])
    model = Model(id="big", graphs=[Graph(id="g", nodes=[node])])
    with pytest.raises(NotCompilable, match=r"node 'n' 'W': a constant of more than 10,000"):
        mdf_loops.simulate(model, dt=0.1, steps=5, record=["n.x"], backend="python")
    with caplog.at_level("INFO", logger="mdf_loops"):
        traces = mdf_loops.simulate(model, dt=0.1, steps=5, record=["n.x"])
    assert traces.backend == "onnxruntime"
    assert "does not compile to Python" in caplog.text and "'W'" in caplog.text
    x, expected = 1.0, [1.0]
    for _ in range(4):
        x = x + (-x * weights.mean()) * 0.1
        expected.append(x)
    np.testing.assert_allclose(traces["n.x"], expected, rtol=1e-12)
