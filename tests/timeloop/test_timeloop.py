"""Time loops: every example model simulated equal to stock modeci-mdf's own loop.

The oracle is ``mdf_loops/timeloop/stock_loop.py`` run in a subprocess, which
imports modeci-mdf but not mdf_loops: the loop modeci-mdf's example scripts write,
``evaluate()`` then ``evaluate(time_increment=dt)``, recording after each step.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import needs_input_port_fields
from modeci_mdf.utils import load_mdf
from stock_batch import StockJob, stock_run, with_stock_unset

import mdf_loops
from mdf_loops.timeloop.spec import LOOP_NODE

pytestmark = needs_input_port_fields  # time loops build ports with default_value/reduce

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "timeloops"

#: steps per example in the tests (the stock engine is slow: a few ms a step)
TEST_STEPS = {"fitzhugh_nagumo": 400, "izhikevich": 600, "iaf_network": 400,
              "hodgkin_huxley": 600, "newton_cooling": 200, "counters": 40, "ddm_threshold": 3000}


def _examples_module():
    spec = importlib.util.spec_from_file_location("time_loops_example", EXAMPLES / "time_loops.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EX = _examples_module()


def _case(name: str):
    dt, _, record = EX.SIMULATIONS[name]
    steps = TEST_STEPS[name]
    inputs = {"noise": EX.ddm_noise(steps)} if name == "ddm_threshold" else None
    return dt, steps, record, inputs


_STOCK: dict[str, dict] = {}


@pytest.fixture(params=sorted(TEST_STEPS))
def example(request, tmp_path_factory):
    name = request.param
    if name not in _STOCK:
        dt, steps, record, inputs = _case(name)
        job = StockJob(EXAMPLES / f"{name}.json", dt, steps, record)
        _STOCK[name] = stock_run(job, tmp_path_factory.mktemp(name), inputs)
    return name, _STOCK[name]


def _check_prefix(ours: np.ndarray, stock: np.ndarray, exact: bool, where: str) -> None:
    n = len(ours)
    assert 0 < n <= len(stock), where
    assert not np.isnan(stock[n - 1]).any(), where
    ours = with_stock_unset(ours, stock[:n])
    if exact:
        np.testing.assert_array_equal(ours, stock[:n].reshape(ours.shape), err_msg=where)
    else:
        np.testing.assert_allclose(ours, stock[:n].reshape(ours.shape), rtol=1e-9, atol=1e-12,
                                   err_msg=where)
    # after a termination condition ends the run, stock's evaluate() runs nothing
    assert (stock[n:] == stock[n - 1]).all(), f"{where}: stock went on after step {n}"


@pytest.mark.parametrize("backend", ["python", "scheduler", "onnxruntime"])
def test_examples_equal_stock_loop(example, backend):
    name, stock = example
    dt, steps, record, inputs = _case(name)
    traces = mdf_loops.simulate(EXAMPLES / f"{name}.json", dt=dt, steps=steps, record=record,
                                inputs=inputs, backend=backend)
    assert traces.backend == backend
    np.testing.assert_allclose(traces.time, np.arange(traces.steps) * dt, rtol=1e-12)
    for ref in record:
        _check_prefix(np.asarray(traces[ref], dtype=float), stock[ref],
                      exact=backend != "onnxruntime", where=f"{name} {ref} on {backend}")


def test_time_loop_model_saves_validates_exports(example, tmp_path):
    name, stock = example
    dt, steps, record, inputs = _case(name)
    built = EX.BUILDERS[name]()
    before = built.to_json()
    mdf_loops.to_time_loop(built, dt=dt, steps=steps, record=record, inputs=inputs)
    assert built.to_json() == before  # the input model is left as it was
    source = load_mdf(str(EXAMPLES / f"{name}.yaml"))
    model = mdf_loops.to_time_loop(source, dt=dt, steps=steps, record=record, inputs=inputs)
    for suffix in ("json", "yaml"):
        path = tmp_path / f"loop.{suffix}"
        getattr(model, f"to_{suffix}_file")(str(path))
        assert mdf_loops.validate(path) == []
        again = mdf_loops.simulate(path, backend="python")
        for ref in record:
            _check_prefix(again[ref].astype(float), stock[ref], True, f"{name} {ref} from {suffix}")
    exported = mdf_loops.mdf_to_onnx(model)
    onnx.checker.check_model(exported, full_check=True)
    session = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    outputs = dict(zip(names, session.run(None, {})))
    for ref in record:
        ours = outputs[f"{LOOP_NODE}.{ref.replace('.', '__')}"].astype(float)
        _check_prefix(ours, stock[ref], False, f"{name} {ref} exported")


def test_the_time_loop_model_renders_with_its_body():
    loop = mdf_loops.to_time_loop(EXAMPLES / "counters.json", dt=1.0, steps=10,
                                  record=["A.count"])
    source = mdf_loops.to_graphviz(loop).source
    for part in ("onnx::Loop", "schedule", "control", "clock", "runs__B"):
        assert part in source


def test_a_given_model_is_not_changed_and_a_file_gives_the_same_loop():
    """A Model the caller gives is probed on a copy; a file read for the conversion is
    probed on its own graph: both give the same time-loop model."""
    import json

    from mdf_loops.model.interface import load_model

    path = EXAMPLES / "counters.json"
    dt, steps, record, _ = _case("counters")
    given = load_model(path)
    before = json.dumps(given.to_dict(), sort_keys=True, default=str)
    from_model = mdf_loops.to_time_loop(given, dt=dt, steps=steps, record=record)
    assert json.dumps(given.to_dict(), sort_keys=True, default=str) == before
    from_file = mdf_loops.to_time_loop(path, dt=dt, steps=steps, record=record)
    assert json.dumps(from_file.to_dict(), sort_keys=True, default=str) == json.dumps(
        from_model.to_dict(), sort_keys=True, default=str)
