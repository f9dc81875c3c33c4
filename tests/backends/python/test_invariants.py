"""Values every step makes alike (list-valued parameters, as modeci-mdf's NeuroML exports
write them) are made once before the loop, on the trusted and the guarded loop alike,
and the simulation stays stock modeci-mdf's (one subprocess without mdf_loops)."""

from __future__ import annotations

import ast

import numpy as np
import pytest
from conftest import needs_input_port_fields
from modeci_mdf.mdf import Graph, Model, Node, OutputPort, Parameter
from stock_batch import StockJob, stock_traces

import mdf_loops
from mdf_loops.backends.python.compiled import time_loop_source
from mdf_loops.backends.python.invariants import hoisted

pytestmark = needs_input_port_fields

DT, STEPS = 0.05, 30
RECORD = ["cell.V_out", "cell.gain_out"]


def neuroml_cell() -> Model:
    """A leaky cell as NeuroML's export writes one: every parameter a list of one value
    per cell, one of them read through a value that reads others."""
    node = Node(id="cell", parameters=[
        Parameter(id="leak", value=[0.5, 0.25]), Parameter(id="drive", value=[2.0, 1.0]),
        Parameter(id="gain", value="drive * 2 - leak"),
        Parameter(id="V", default_initial_value=[1.0, -1.0],
                  time_derivative="-leak * V + gain + 0.1 * V * V")],
        output_ports=[OutputPort(id="V_out", value="V"), OutputPort(id="gain_out", value="gain")])
    return Model(id="neuroml_cell", graphs=[Graph(id="neuroml_cell_graph", nodes=[node])])


@pytest.fixture(scope="module")
def stock(tmp_path_factory):
    jobs = {"cell": StockJob(neuroml_cell(), DT, STEPS, RECORD)}
    return stock_traces(jobs, tmp_path_factory.mktemp("invariants"))["cell"]


@pytest.mark.parametrize("trusted", [False, True])
def test_constant_arrays_are_made_before_the_loop_and_the_run_equals_stock(trusted, stock):
    traces = mdf_loops.simulate(neuroml_cell(), dt=DT, steps=STEPS, record=RECORD,
                                backend="python", trusted=trusted)
    for ref in RECORD:
        np.testing.assert_array_equal(traces[ref], stock[ref], err_msg=ref)
    code = time_loop_source(mdf_loops.to_time_loop(neuroml_cell(), dt=DT, steps=STEPS,
                                                   record=RECORD))
    function = code.tree.body[0]
    loop = next(s for s in function.body if isinstance(s, ast.For))
    in_loop = ast.unparse(loop)
    before = ast.unparse(ast.Module(body=function.body[:function.body.index(loop)],
                                    type_ignores=[]))
    assert "numpy.array([0.5, 0.25])" in before and "numpy.array" not in in_loop
    assert "v_cell__gain =" in before  # made from the arrays alone: before the loop too


def _statements(text: str) -> list[ast.stmt]:
    return ast.parse(text).body


@pytest.mark.parametrize("text, moved", [
    ("v_a = numpy.array([1.0, 2.0])\nv_b = v_a * 2 - 1\nv_c = v_b + c0", ["v_a", "v_b"]),
    ("v_a = numpy.array([1.0]) + iteration", []),  # reads the step number
    ("v_a = numpy.random.rand(2)", []),  # a draw each step: not the same value
    ("v_a = numpy.exp(numpy.array([1.0]))", []),  # numpy's array constructor alone
    ("v_a = numpy.array([1.0], dtype=float)", []),
    ("v_a = abs(numpy.array([-1.0]))", []),  # a builtin: not the constructor
    ("v_a = v_b * 2\nv_b = numpy.array([1.0])", ["v_b"]),  # v_a reads v_b before it is made
    ("v_a = numpy.array([1.0])\nc0, c1 = (v_a, c1)", ["v_a"]),
])
def test_which_statements_move_before_the_loop(text, moved):
    before, kept = hoisted(_statements(text))
    assert [s.targets[0].id for s in before] == moved
    assert len(before) + len(kept) == len(_statements(text))
