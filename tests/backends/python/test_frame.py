"""The loop function built as a syntax tree (mdf_loops/backends/python/frame.py, source.py):
its lines, its text made on demand, and the tree guarded twice without being changed.

The oracles: the text ``ast.unparse`` makes of the tree (which statement a line holds),
Python's own integers and the numpy loop of Newton's law of cooling.
"""

from __future__ import annotations

import ast
import traceback

import numpy as np
import pytest
from modeci_mdf.mdf import Edge, Graph, InputPort, Model, Node, OutputPort, Parameter

import mdf_loops
from mdf_loops.backends.python.compiled import LoopSource, compile_time_loop, time_loop_source
from mdf_loops.backends.python.untrusted import float_kinds, guarded_time_loop
from mdf_loops.errors import SizeLimitError
from conftest import needs_input_port_fields

pytestmark = needs_input_port_fields  # time loops build ports with default_value/reduce

DT, K, AMBIENT, T0 = 0.1, 0.3, 20.0, 90.0


def _model(parameters: list[Parameter], output: str) -> Model:
    node = Node(id="body")
    node.input_ports.append(InputPort(id="ambient", default_value=AMBIENT))
    node.parameters += parameters
    node.output_ports.append(OutputPort(id="out", value=output))
    graph = Graph(id="g", nodes=[node])
    return mdf_loops.to_time_loop(Model(id="m", graphs=[graph]), dt=DT, steps=20,
                                  record=["body.out"])


def _cooling(derivative: str = "-k * (T - ambient)") -> Model:
    return _model([Parameter(id="k", value=K),
                   Parameter(id="T", default_initial_value=T0, time_derivative=derivative)],
                  "T")


def _numpy_cooling(steps: int) -> list[float]:
    temps = [T0]
    for _ in range(1, steps):
        temps.append(temps[-1] + (-K * (temps[-1] - AMBIENT)) * DT)
    return temps


def test_the_text_made_on_demand_defines_the_function_the_tree_does():
    code = time_loop_source(_cooling())
    assert isinstance(code.definition, ast.Module)
    text = code.source
    assert text.startswith("def time_loop(") and code.source is text  # made once
    for definition in (code.definition, text):  # the tree, then the text parsed
        loop = guarded_time_loop(LoopSource(definition, code.n_carried, code.scan_codes,
                                            code.time_step))
        time, temps = loop.new_scans(12)
        loop.run(0, 12, True, T0, time, temps)
        assert np.asarray(temps).tolist() == _numpy_cooling(12)


def test_a_trusted_error_points_at_its_statement_in_the_text():
    compiled = compile_time_loop(_cooling("-k * (T - ambient) / (T - 100.0)"))
    with pytest.raises(ZeroDivisionError) as caught:  # the steps after the first, at T 100
        compiled.run(1, 5, True, 100.0, *compiled.new_scans(5))
    line = traceback.extract_tb(caught.value.__traceback__)[-1].lineno
    assert "/ (c0 - 100.0)" in compiled.code.source.splitlines()[line - 1]


def test_the_trusted_compile_renumbers_a_copy_and_leaves_the_tree_as_made():
    # the statements share nodes: renumbering them in place would move one statement's
    # nodes to another's line; the tree kept with the loop is the one time_loop_source made
    model = _cooling()
    compiled = compile_time_loop(model)
    made = time_loop_source(model).definition
    assert (ast.dump(compiled.code.definition, include_attributes=True)
            == ast.dump(made, include_attributes=True))


def test_the_tree_guarded_for_floats_is_guarded_again_unchanged_for_integers():
    # x squared each step: proven a float for a float x; an integer x runs the function
    # guarded from the same tree with every operator checked, and grows past the limit
    code = time_loop_source(_model([Parameter(id="x", default_initial_value=3.0,
                                              value="x * x")], "x"))
    assert float_kinds(code.definition, 1)[1] == {0: "float"}  # the proof covers x
    before = ast.dump(code.definition, include_attributes=True)
    loop = guarded_time_loop(code)
    # the steps after the first (the first starts from the model's own initial value);
    # x is recorded as stock holds it, an int64 (3.0 * 3.0 is 9 in modelspec): the
    # float run records into lists, which take any value at a step
    assert code.scan_codes[1:] == ("q",)
    _, carried, _ = loop.run(1, 4, True, 1.5, [], [None] * 4)
    assert carried == [1.5 ** 8]
    _, carried, _ = loop.run(1, 4, True, 3, *loop.new_scans(4))
    assert carried == [3 ** 8] and type(carried[0]) is int
    with pytest.raises(SizeLimitError, match=r"^node 'body' 'x' \(python backend\), "
                                             r"iteration 14: "):  # 3 ** 2 ** 14: 26,000 bits
        loop.run(1, 24, True, 3, [], [None] * 24)
    assert ast.dump(code.definition, include_attributes=True) == before


def test_each_statement_of_the_guarded_tree_has_a_line_of_its_own():
    code = time_loop_source(_cooling())
    lines = [s.lineno for s in ast.walk(code.definition) if isinstance(s, ast.stmt)]
    assert len(lines) == len(set(lines))


@pytest.mark.parametrize("weight", [-2.0, 0.5, -3])
def test_an_edge_weight_is_the_number_it_reads_as(weight):
    # a negative weight parses as a negated literal: the tree holds what its text parses to
    source = Node(id="A", parameters=[Parameter(id="a", default_initial_value=T0,
                                                time_derivative="-a")],
                  output_ports=[OutputPort(id="out", value="a")])
    sink = Node(id="B", input_ports=[InputPort(id="x")],
                output_ports=[OutputPort(id="out", value="x")])
    edge = Edge(id="e", sender="A", sender_port="out", receiver="B", receiver_port="x",
                parameters={"weight": weight})
    model = Model(id="m", graphs=[Graph(id="g", nodes=[source, sink], edges=[edge])])
    traces = mdf_loops.simulate(model, dt=DT, steps=6, record=["A.out", "B.out"],
                                backend="python")
    expected = [T0]
    for _ in range(5):
        expected.append(expected[-1] + (-expected[-1]) * DT)
    np.testing.assert_array_equal(traces["A.out"], expected)
    np.testing.assert_array_equal(traces["B.out"], [weight * a for a in expected])
