"""Every execution mode gives the same outputs: conformance cases, examples, workloads."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import numpy as np
import pytest

import mdf_loops
from mdf_loops.backends.onnxruntime.compiled import CompileError, compile_model
from mdf_loops.workloads import elman_rnn, running_sum, while_loop
from conftest import control_flow_cases, needs_input_port_fields, onnxruntime_runs_case

EXAMPLES = str(Path(__file__).resolve().parents[2] / "examples")


CASES = sorted(control_flow_cases().values(), key=lambda c: c.name)


def _same(actual, expected, rtol=1e-4, atol=1e-5):
    if isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _same(a, e, rtol, atol)
        return
    if expected is None:
        assert actual is None
        return
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                               rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_conformance_case_in_every_mode(case):
    model = mdf_loops.onnx_to_mdf(case.model)
    names = [i.name for i in case.model.graph.input]
    inputs, expected = case.data_sets[0]
    feed = dict(zip(names, inputs))
    outputs = [o.name for o in case.model.graph.output]

    scheduler = mdf_loops.run(model, feed, backend="scheduler")
    for name, value in zip(outputs, expected):
        _same(scheduler[name], value)

    auto = mdf_loops.run(model, feed)
    for name, value in zip(outputs, expected):
        _same(auto[name], value)

    if onnxruntime_runs_case(case.name):
        compiled = mdf_loops.run(model, feed, backend="onnxruntime")
        for name, value in zip(outputs, expected):
            _same(compiled[name], value)
    else:  # onnxruntime refuses the opset or the dtypes: the compiled mode says so, auto fell back
        with pytest.raises(CompileError):
            mdf_loops.run(model, feed, backend="onnxruntime")


def test_the_conformance_cases_are_all_collected():
    assert len(CASES) == 38


WORKLOADS = [elman_rnn(40), running_sum(300), while_loop(200)]


@pytest.mark.parametrize("work", WORKLOADS, ids=[w.name for w in WORKLOADS])
@pytest.mark.parametrize("backend", ["scheduler", "onnxruntime", "auto"])
def test_workloads_agree_with_their_numpy_loop(work, backend):
    model = mdf_loops.onnx_to_mdf(work.model)
    outputs = mdf_loops.run(model, work.inputs, backend=backend)
    for actual, expected in zip(outputs.values(), work.numpy_loop(work.inputs)):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def _example_inputs(path):
    """Inputs of an example: the arrays its script feeds, from the sibling .npz when present."""
    data = os.path.splitext(path)[0] + ".inputs.npz"
    if os.path.exists(data):
        with np.load(data) as loaded:
            return {k: loaded[k] for k in loaded.files}
    return None


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(EXAMPLES, "leaky_integrator.json"))))
def test_example_runs_the_same_in_every_mode(path):
    inputs = {"x0": np.array(0.0), "I": np.sin(np.arange(40) / 5.0)}
    expected = []
    x = 0.0
    for current in inputs["I"]:
        x = x + 0.1 * (-x + current) / 2.0
        expected.append(x)
    for backend in ("scheduler", "onnxruntime", "auto"):
        outputs = mdf_loops.run(path, inputs, backend=backend)
        np.testing.assert_allclose(outputs["integrate.trace"], expected, rtol=1e-12)
        np.testing.assert_allclose(outputs["integrate.x_final"], expected[-1], rtol=1e-12)


def test_compiled_models_are_cached_per_model_and_input_types():
    work = running_sum(10)
    model = mdf_loops.onnx_to_mdf(work.model)
    from mdf_loops.backends.onnxruntime.compiled import _CACHE, clear_compiled

    clear_compiled()
    mdf_loops.run(model, work.inputs)
    mdf_loops.run(model, {**work.inputs, "x": work.inputs["x"][:5]})  # other length, same types
    assert _CACHE.count(model) == 1
    mdf_loops.run(model, work.inputs, max_iterations=50)  # other limits: another compilation
    assert _CACHE.count(model) == 2


def test_unknown_backend_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="scheduler"):
        mdf_loops.run(mdf_loops.onnx_to_mdf(running_sum(3).model), running_sum(3).inputs,
                      backend="fast")


def test_compile_model_reports_why_it_cannot_compile():
    # a stateful MDF parameter keeps state between evaluations: no ONNX equivalent
    from modeci_mdf.mdf import Graph, Model, Node, OutputPort, Parameter

    node = Node(id="counter", parameters=[Parameter(id="count", value="count + 1")],
                output_ports=[OutputPort(id="out", value="count")])
    model = Model(id="stateful", graphs=[Graph(id="main", nodes=[node])])
    with pytest.raises(CompileError, match="counter"):
        compile_model(model, {})


def _peak_traced(fn) -> int:
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_long_scan_on_the_scheduler_keeps_no_per_step_objects():
    short, long_ = running_sum(200), running_sum(2000)
    model = mdf_loops.onnx_to_mdf(long_.model)
    mdf_loops.run(model, short.inputs, backend="scheduler")  # build caches first
    peak_short = _peak_traced(lambda: mdf_loops.run(model, short.inputs, backend="scheduler"))
    peak_long = _peak_traced(lambda: mdf_loops.run(model, long_.inputs, backend="scheduler"))
    data_growth = 2 * 4 * (2000 - 200)  # float32 input and output
    # 1,800 more steps may cost their data and a fixed amount, not ~500 bytes each
    assert peak_long - peak_short < 4 * data_growth + 200_000, (peak_short, peak_long)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_conformance_case_on_jax(case):
    pytest.importorskip("jax")
    model = mdf_loops.onnx_to_mdf(case.model)
    names = [i.name for i in case.model.graph.input]
    for inputs, expected in case.data_sets:
        outputs = mdf_loops.run(model, dict(zip(names, inputs)), backend="jax")
        for output, value in zip(case.model.graph.output, expected):
            _same(outputs[output.name], value)


@pytest.mark.parametrize("work", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_workloads_on_jax_agree_with_their_numpy_loop(work):
    pytest.importorskip("jax")
    model = mdf_loops.onnx_to_mdf(work.model)
    outputs = mdf_loops.run(model, work.inputs, backend="jax")
    for actual, expected in zip(outputs.values(), work.numpy_loop(work.inputs)):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_conformance_case_on_torch(case):
    pytest.importorskip("torch")
    model = mdf_loops.onnx_to_mdf(case.model)
    names = [i.name for i in case.model.graph.input]
    for inputs, expected in case.data_sets:
        outputs = mdf_loops.run(model, dict(zip(names, inputs)), backend="torch")
        for output, value in zip(case.model.graph.output, expected):
            _same(outputs[output.name], value)


@pytest.mark.parametrize("work", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_workloads_on_torch_agree_with_their_numpy_loop(work):
    pytest.importorskip("torch")
    model = mdf_loops.onnx_to_mdf(work.model)
    outputs = mdf_loops.run(model, work.inputs, backend="torch")
    for actual, expected in zip(outputs.values(), work.numpy_loop(work.inputs)):
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@needs_input_port_fields  # time loops need InputPort.default_value
def test_a_python_loop_is_compiled_on_each_call_from_a_file(monkeypatch):
    """Nothing of a python loop is kept between models: each call on a model file compiles
    its loop again, as a first call in a new process does (the benchmark's 'first call'
    rows rely on it), and gives the same values."""
    from mdf_loops.backends.python import untrusted

    compiled = []

    def counted(*args, **kwargs):
        compiled.append(args[1])
        return guarded(*args, **kwargs)

    guarded = untrusted.guarded_function
    monkeypatch.setattr(untrusted, "guarded_function", counted)
    path = Path(__file__).parents[2] / "examples" / "timeloops" / "fitzhugh_nagumo.json"
    first = mdf_loops.simulate(path, dt=0.05, steps=20)
    again = mdf_loops.simulate(path, dt=0.05, steps=20)
    assert compiled == ["time_loop", "time_loop"]
    np.testing.assert_array_equal(first.time, again.time)
    for name in first.values:
        np.testing.assert_array_equal(first[name], again[name])
