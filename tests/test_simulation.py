"""``simulate`` of a stateful model (mdf_loops/simulation.py): its time loop runs on the
python backend from the parts the converter holds, and the Loop-node model that
``to_time_loop`` returns is made only for onnxruntime or the scheduler.

The oracle is the forward-Euler loop written here in numpy (stock modeci-mdf's order: the
initial value at step 0, then one step of ``dt`` each); the stock-engine comparisons of
every example are in tests/timeloop/test_timeloop.py.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter

import mdf_loops
from mdf_loops.backends.python import simulate as python_simulate
from mdf_loops.errors import ModelError
from mdf_loops.timeloop import convert
from conftest import needs_input_port_fields

pytestmark = needs_input_port_fields  # time loops build ports with default_value/reduce

DT, RATE, X0, STEPS = 0.1, 0.5, 1.0, 12


def _decay(rate: str = "x") -> Model:
    """``dx/dt = -RATE * rate``, where ``rate`` reads x (``r``: x through ``onnx::Abs``,
    which the python backend does not write out)."""
    node = Node(id="N")
    node.parameters.append(
        Parameter(id="x", default_initial_value=X0, time_derivative=f"-{RATE} * {rate}")
    )
    if rate == "r":
        node.parameters.append(Parameter(id="r", function="onnx::Abs", args={"X": "x"}))
    node.output_ports.append(OutputPort(id="out", value="x"))
    return Model(id="decay", graphs=[Graph(id="g", nodes=[node])])


def _numpy_decay(steps: int) -> np.ndarray:
    x, out = X0, [X0]
    for _ in range(1, steps):
        x = x + (-RATE * abs(x)) * DT
        out.append(x)
    return np.array(out)


@pytest.fixture
def made(monkeypatch) -> list[str]:
    """The ids of the Loop-node models the converter makes, as it makes them."""
    calls: list[str] = []
    make = convert._loop_model

    def counted(*args, **kwargs):
        model = make(*args, **kwargs)
        calls.append(model.id)
        return model

    monkeypatch.setattr(convert, "_loop_model", counted)
    return calls


@pytest.mark.parametrize(
    ("backend", "trusted"), [("python", False), ("auto", False), ("auto", True)]
)
def test_the_python_backend_runs_a_conversion_without_making_its_loop_model(
    made, backend, trusted
):
    traces = mdf_loops.simulate(
        _decay(), dt=DT, steps=STEPS, record=["N.out"], backend=backend, trusted=trusted
    )
    assert traces.backend == "python"
    assert made == []
    np.testing.assert_allclose(traces["N.out"], _numpy_decay(STEPS), rtol=1e-13, atol=0)
    np.testing.assert_allclose(traces.time, np.arange(STEPS) * DT, rtol=1e-13, atol=0)


def test_to_time_loop_makes_the_model_and_simulate_compiles_it_once(made, monkeypatch):
    loop = mdf_loops.to_time_loop(_decay(), dt=DT, steps=STEPS, record=["N.out"])
    assert made == ["decay_time_loop"]
    read: list[str] = []
    stored_parts = python_simulate.stored_parts

    def reads(model: Model):
        read.append(model.id)
        return stored_parts(model)

    monkeypatch.setattr(python_simulate, "stored_parts", reads)
    for steps in (STEPS, 5):
        traces = mdf_loops.simulate(loop, steps=steps, backend="python")
        np.testing.assert_allclose(traces["N.out"], _numpy_decay(steps), rtol=1e-13, atol=0)
    assert read == ["decay_time_loop"]  # the stored model's loop is kept with it


def test_auto_makes_the_loop_model_when_it_passes_python_over(made, caplog):
    with caplog.at_level(logging.INFO, logger="mdf_loops"):
        traces = mdf_loops.simulate(_decay("r"), dt=DT, steps=STEPS, record=["N.out"])
    assert traces.backend == "onnxruntime"
    assert made == ["decay_time_loop"]
    assert any(
        "model 'decay_time_loop' does not compile to Python (node 'N' parameter 'r': "
        "function 'onnx::Abs'); trying onnxruntime" in r.getMessage()
        for r in caplog.records
    )
    np.testing.assert_allclose(np.ravel(traces["N.out"]), _numpy_decay(STEPS), rtol=1e-12)


def test_a_backend_other_than_python_makes_the_loop_model(made):
    traces = mdf_loops.simulate(
        _decay(), dt=DT, steps=4, record=["N.out"], backend="scheduler", trusted=True
    )
    assert traces.backend == "scheduler" and made == ["decay_time_loop"]
    np.testing.assert_allclose(np.ravel(traces["N.out"]), _numpy_decay(4), rtol=1e-13)


def test_a_conversion_left_without_its_series_is_refused_by_name(made):
    node = Node(id="N", input_ports=[InputPort(id="drive")])
    node.parameters.append(
        Parameter(id="x", default_initial_value=X0, time_derivative="-x + drive")
    )
    model = Model(id="driven", graphs=[Graph(id="g", nodes=[node])])
    with pytest.raises(
        ModelError, match="model 'driven_time_loop': input time series 'drive__series' is not given"
    ):
        mdf_loops.simulate(model, dt=DT, steps=3, record=["N.x"], inputs={"drive": None})
    assert made == []
