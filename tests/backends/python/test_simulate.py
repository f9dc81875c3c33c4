"""The python backend's run of a stored time-loop model (mdf_loops/backends/python/simulate.py):
its carried values and input series read from the model and the call."""

from __future__ import annotations

import numpy as np
import pytest
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter

import mdf_loops
from mdf_loops.errors import ModelError
from conftest import needs_input_port_fields

pytestmark = needs_input_port_fields  # time loops build ports with default_value/reduce

DT = 0.5


def _driven_leak(drive: np.ndarray, steps: int = 7) -> Model:
    node = Node(id="leak")
    node.input_ports.append(InputPort(id="drive"))
    node.parameters.append(Parameter(id="x", default_initial_value=0.25,
                                     time_derivative="-x + drive"))
    node.output_ports.append(OutputPort(id="out", value="x"))
    model = Model(id="leaky", graphs=[Graph(id="g", nodes=[node])])
    return mdf_loops.to_time_loop(model, dt=DT, steps=steps, record=["leak.x"],
                                  inputs={"drive": drive})


def _numpy_leak(drive: np.ndarray, steps: int) -> np.ndarray:
    """x at each step (the oracle): the initial value at step 0, then one Euler step
    with that step's drive (stock modeci-mdf's order, as tests/timeloop check)."""
    x, out = 0.25, [0.25]
    for k in range(1, steps):
        x = x + DT * (-x + drive[k])
        out.append(x)
    return np.array(out)


def test_the_series_given_to_simulate_is_the_one_each_step_reads():
    stored = np.ones(9)
    given = np.array([0.0, 2.0, -1.0, 0.5, 3.0, 1.0, -2.0, 4.0, 0.0])
    model = _driven_leak(stored)
    traces = mdf_loops.simulate(model, backend="python")
    np.testing.assert_array_equal(traces["leak.x"], _numpy_leak(stored, 7))
    traces = mdf_loops.simulate(model, backend="python", inputs={"drive": given}, steps=9)
    assert traces.backend == "python"
    np.testing.assert_array_equal(traces["leak.x"], _numpy_leak(given, 9))
    np.testing.assert_array_equal(traces.time, np.arange(9) * DT)


@pytest.mark.parametrize(("call", "length", "steps"), [
    ({"inputs": {"drive": np.ones(3)}}, 3, 7),  # a shorter series given
    ({"steps": 12}, 9, 12),  # more steps than the stored series holds
])
def test_a_series_shorter_than_the_run_is_a_model_error(call, length, steps):
    with pytest.raises(ModelError, match=f"input 'drive__series': {length} steps, "
                                         f"the loop runs {steps}"):
        mdf_loops.simulate(_driven_leak(np.ones(9)), backend="python", **call)
