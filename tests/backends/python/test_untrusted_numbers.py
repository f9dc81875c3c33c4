"""The float proof of a model that is not trusted, on the forms modeci-mdf's own stateful
models take: an integer initial value that later steps make a float (NewtonCoolingModel's
``"default_initial_value": 90``), negated integer literals (FN.mdf.json's
``(-1*threshold)``), integer arithmetic among literals (``(1 - mode)``) and a counter
beside floats (States.json).

Each model is simulated on the python backend as a file from disk is (not trusted) and
checked against stock modeci-mdf's loop in a subprocess; the proof itself is checked on
the loop the backend compiles: before it covered these forms, every operator of such a
step ran through its guard (4 to 12 times slower than the same loop trusted).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_input_port_fields
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter
from stock_batch import every_output_on_stock, output_refs

import mdf_loops
from mdf_loops.backends.python.compiled import time_loop_source
from mdf_loops.backends.python.untrusted import float_kinds, guarded_time_loop
from mdf_loops.errors import SizeLimitError

pytestmark = needs_input_port_fields

DT, STEPS = 0.05, 40


def cooling() -> Model:
    """NewtonCoolingModel's form: an integer temperature first, floats after."""
    node = Node(id="cool", parameters=[
        Parameter(id="T_a", value=20), Parameter(id="T", default_initial_value=90,
                                                  time_derivative="dT_dt"),
        Parameter(id="dT_dt", default_initial_value=0, value="-0.1 * (T - T_a)")],
        output_ports=[OutputPort(id="T_out", value="T"), OutputPort(id="rate", value="dT_dt")])
    return Model(id="cooling", graphs=[Graph(id="cooling_graph", nodes=[node])])


def fitzhugh_nagumo_lems() -> Model:
    """FN.mdf.json's form (as NeuroML writes it): negated integer literals and integer
    arithmetic among the parameters, an input nobody gives (zeros, as stock reads it)."""
    values = {"initial_v": -1.0, "initial_w": 0.0, "a_v": -1 / 3, "b_v": 0.0, "c_v": 1.0,
              "d_v": 1, "e_v": -1.0, "f_v": 1.0, "threshold": -1, "mode": 1, "tau_v": 1.0,
              "a_w": 1.0, "b_w": -0.8, "c_w": 0.7, "tau_w": 12.5, "Iext": 0.0}
    parameters = [Parameter(id=k, value=v) for k, v in values.items()]
    parameters += [
        Parameter(id="V", default_initial_value="initial_v", time_derivative=(
            "(a_v*V*V*V + (1+threshold)*b_v*V*V + (-1*threshold)*c_v*V + d_v + e_v*W"
            " + f_v*Iext + INPUT) / tau_v")),
        Parameter(id="W", default_initial_value="initial_w",
                  time_derivative="(mode*a_w*V + b_w*W + c_w + (1-mode)*0.5) / tau_w"),
    ]
    node = Node(id="fn", parameters=parameters, input_ports=[InputPort(id="INPUT")],
                output_ports=[OutputPort(id="V_out", value="V"), OutputPort(id="W_out", value="W")])
    return Model(id="fn_lems", graphs=[Graph(id="fn_lems_graph", nodes=[node])])


def counter_beside_a_float() -> Model:
    """States.json's form: an integer counter and a float state read with a literal."""
    node = Node(id="n", parameters=[
        Parameter(id="count", value="count + 1"),
        Parameter(id="x", default_initial_value=0, time_derivative="-1 * 2 * x + 1")],
        output_ports=[OutputPort(id="count_out", value="count"), OutputPort(id="x_out", value="x")])
    return Model(id="counter", graphs=[Graph(id="counter_graph", nodes=[node])])


MODELS = {"cooling": cooling, "fitzhugh_nagumo_lems": fitzhugh_nagumo_lems,
          "counter": counter_beside_a_float}
#: what the proof assumes of each model's carried values (by their initial values):
#: "number" where a step may hand on an integer (its operators with a float run inline;
#: the others stay guarded), "float" for floats; none left out (every operator guarded)
PROVEN = {
    "cooling": {"T": "number", "dT_dt": "float"},  # 90, then floats
    "fitzhugh_nagumo_lems": {"initial_v": "float", "initial_w": "float", "V": "float",
                             "W": "float"},
    "counter": {"count": "number", "x": "number"},  # count + 1: guarded, sized
}


@pytest.fixture(scope="module")
def stock(tmp_path_factory):
    return every_output_on_stock(MODELS, DT, STEPS, tmp_path_factory.mktemp("untrusted_numbers"))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_model_not_trusted_runs_its_proven_arithmetic_inline_and_equals_stock(name, stock):
    model = MODELS[name]()
    traces = mdf_loops.simulate(model, dt=DT, steps=STEPS, record=output_refs(model),
                                backend="python")
    for ref in output_refs(model):
        np.testing.assert_array_equal(traces[ref], stock[name][ref], err_msg=ref)
    loop = mdf_loops.to_time_loop(model, dt=DT, steps=STEPS, record=output_refs(model))
    code = time_loop_source(loop)
    _, carried = float_kinds(code.tree, code.n_carried)
    node = model.graphs[0].nodes[0].id
    named = {code.initial[k].removeprefix(f"init__{node}__"): kind for k, kind in carried.items()}
    assert named == PROVEN[name]


def test_a_number_given_as_a_huge_integer_or_a_counter_stays_guarded():
    # the proof lets a number meet a float inline; an integer that a step only adds to
    # is still sized by its guard
    code = time_loop_source(mdf_loops.to_time_loop(
        counter_beside_a_float(), dt=DT, steps=STEPS, record=["n.count_out", "n.x_out"]))
    loop = guarded_time_loop(code)
    assert code.n_carried == 2
    initial = [0, 0.0]  # count, x
    _, carried, _ = loop.run(0, 5, True, *initial, *loop.new_scans(5))
    x = 0
    for _ in range(4):  # the first step gives x its initial value; then Euler steps
        x = x + (-1 * 2 * x + 1) * DT
    assert carried[-1] == x and type(carried[-1]) is float
    big = 2 ** 13_999  # as many bits as an integer may have: one more step would exceed
    with pytest.raises(SizeLimitError, match=r"iteration 1: .*14000 bits"):
        loop.run(1, 3, True, big, 0.0, *loop.new_scans(3))
