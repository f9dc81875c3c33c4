"""mdf_loops/run_plans.py: a repeated ``run()`` replays the last call's plan, only while it holds.

Oracles: each workload's numpy loop, and numpy on the expression models. Whether a
call took the full path is read from the one step only the full path takes: typing the
inputs (``mdf_loops.run._typed_inputs``).
"""

import importlib

import numpy as np
import pytest
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter

import mdf_loops
from mdf_loops import run_plans
from mdf_loops.errors import EvaluationError, IterationLimitError, ModelError
from mdf_loops.model.compat import input_default
from mdf_loops.workloads import elman_rnn, while_loop
from tests.conftest import input_port

run_module = importlib.import_module("mdf_loops.run")  # the module, not the function

COMPILING = ["onnxruntime", "jax"]


@pytest.fixture(params=COMPILING)
def backend(request):
    if request.param == "jax":
        pytest.importorskip("jax")
    return request.param


@pytest.fixture
def full_calls(monkeypatch):
    """The calls that took the full path, one item each."""
    calls = []
    typed = run_module._typed_inputs

    def counting(*args):
        calls.append(args)
        return typed(*args)

    monkeypatch.setattr(run_module, "_typed_inputs", counting)
    return calls


def _rnn(steps=6):
    work = elman_rnn(steps, inputs=4, hidden=5)
    return work, mdf_loops.onnx_to_mdf(work.model)


def _close(outputs, expected):
    for got, want in zip(outputs.values(), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _scaled(k=2.0):
    """out = k * x, k a parameter."""
    node = Node(
        id="n",
        input_ports=[InputPort(id="x", shape=(3,), type="float64")],
        parameters=[Parameter(id="k", value=k), Parameter(id="y", value="k * x")],
        output_ports=[OutputPort(id="out", value="y")],
    )
    return Model(id="m", graphs=[Graph(id="main", nodes=[node])])


def test_a_repeated_call_is_replayed_with_its_new_values(backend, full_calls):
    work, model = _rnn()
    _close(mdf_loops.run(model, work.inputs, backend=backend), work.numpy_loop(work.inputs))
    rng = np.random.default_rng(1)
    for _ in range(3):
        inputs = {"h0": rng.standard_normal(5).astype(np.float32), "X": work.inputs["X"] + 1}
        _close(mdf_loops.run(model, inputs, backend=backend), work.numpy_loop(inputs))
    assert len(full_calls) == 1


def test_inputs_of_another_shape_or_dtype_take_the_full_path(backend, full_calls):
    work, model = _rnn()
    mdf_loops.run(model, work.inputs, backend=backend)
    longer = {**work.inputs, "X": np.ones((9, 4), np.float32)}
    _close(mdf_loops.run(model, longer, backend=backend), work.numpy_loop(longer))
    as_float64 = {name: value.astype(np.float64) for name, value in work.inputs.items()}
    for _ in range(2):  # converted to float32 each time: never replayed
        outputs = mdf_loops.run(model, as_float64, backend=backend)
        _close(outputs, work.numpy_loop(work.inputs))
    as_lists = {name: value.tolist() for name, value in work.inputs.items()}
    _close(mdf_loops.run(model, as_lists, backend=backend), work.numpy_loop(work.inputs))
    assert len(full_calls) == 5


def test_the_plan_of_the_last_input_form_is_replayed(backend, full_calls):
    work, model = _rnn()
    longer = {**work.inputs, "X": np.ones((9, 4), np.float32)}
    for inputs, calls in ((work.inputs, 1), (longer, 2), (longer, 2), (work.inputs, 3)):
        _close(mdf_loops.run(model, inputs, backend=backend), work.numpy_loop(inputs))
        assert len(full_calls) == calls


def test_an_edit_after_replays_is_run(backend, full_calls):
    model = _scaled(2.0)
    x = np.array([1.0, 2.0, 3.0])
    for _ in range(2):
        np.testing.assert_allclose(mdf_loops.run(model, {"x": x}, backend=backend)["n.out"], 2 * x)
    model.graphs[0].nodes[0].parameters[0].value = 5.0
    np.testing.assert_allclose(mdf_loops.run(model, {"x": x}, backend=backend)["n.out"], 5 * x)
    assert len(full_calls) == 2


def test_a_default_written_in_place_is_an_edit_and_replays_take_it(backend, full_calls):
    default = np.array([1.0, 2.0, 3.0])
    node = Node(
        id="n",
        input_ports=[input_port("x", default=default, shape=(3,), type="float64")],
        parameters=[Parameter(id="y", value="x * x")],
        output_ports=[OutputPort(id="out", value="y")],
    )
    model = Model(id="m", graphs=[Graph(id="main", nodes=[node])])
    if input_default(node.input_ports[0]) is None:
        pytest.skip("this modeci-mdf has no InputPort.default_value")
    first = mdf_loops.run(model, backend=backend)["n.out"].copy()
    np.testing.assert_allclose(first, default**2)
    np.testing.assert_allclose(mdf_loops.run(model, backend=backend)["n.out"], default**2)
    assert len(full_calls) == 1  # replayed with the default the plan typed
    stored = input_default(node.input_ports[0])
    stored[...] = [4.0, 5.0, 6.0]  # numbers written in place: an edit of the model
    for _ in range(2):
        np.testing.assert_allclose(
            mdf_loops.run(model, backend=backend)["n.out"], [16.0, 25.0, 36.0]
        )
    assert len(full_calls) == 2  # planned again after the edit, then replayed


def test_limits_given_or_in_force_are_part_of_the_plan(backend, full_calls):
    work = while_loop(20)
    model = mdf_loops.onnx_to_mdf(work.model)
    _close(mdf_loops.run(model, work.inputs, backend=backend), work.numpy_loop(work.inputs))
    with pytest.raises(IterationLimitError):
        mdf_loops.run(model, work.inputs, backend=backend, max_iterations=5)
    with mdf_loops.safety.limits(max_iterations=5), pytest.raises(IterationLimitError):
        mdf_loops.run(model, work.inputs, backend=backend)
    _close(mdf_loops.run(model, work.inputs, backend=backend), work.numpy_loop(work.inputs))
    assert len(full_calls) == 3


def test_a_replay_stops_at_the_limit_it_was_planned_with(backend, full_calls):
    work = while_loop(3)
    model = mdf_loops.onnx_to_mdf(work.model)
    mdf_loops.run(model, work.inputs, backend=backend, max_iterations=10)
    longer = {**work.inputs, "limit": np.array(50.0, np.float32)}
    with pytest.raises(IterationLimitError, match="max_iterations"):
        mdf_loops.run(model, longer, backend=backend, max_iterations=10)
    assert len(full_calls) == 1  # the same plan: the limit is in its compiled form


def test_trusted_and_untrusted_calls_are_planned_apart(backend, full_calls, monkeypatch):
    verified = []
    verify = run_module.verify_model
    monkeypatch.setattr(run_module, "verify_model", lambda m, t: (verified.append(t), verify(m, t)))
    model, x = _scaled(), {"x": np.ones(3)}
    for trusted in (True, False, False, True):
        mdf_loops.run(model, x, backend=backend, trusted=trusted)
    assert verified == [True, False]


def test_inputs_that_are_not_a_mapping_are_refused_with_the_names_it_takes(backend):
    model, x = _scaled(), np.ones(3)
    for planned in (False, True):
        with pytest.raises(ModelError, match=r"inputs must map input names.*not list.*\['x'\]"):
            mdf_loops.run(model, [x], backend=backend)
        if not planned:
            mdf_loops.run(model, {"x": x}, backend=backend)


def test_wrong_inputs_after_a_plan_raise_as_before(backend):
    model, x = _scaled(), np.ones(3)
    mdf_loops.run(model, {"x": x}, backend=backend)
    with pytest.raises(ModelError, match="unknown inputs.*did you mean 'x'"):
        mdf_loops.run(model, {"x": x, "xx": x}, backend=backend)
    # x declares shape (3,) and no default: left out, it reads modeci-mdf's zeros
    assert mdf_loops.run(model, {}, backend=backend)["n.out"].tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ModelError, match=r"expected shape \[3\]"):
        mdf_loops.run(model, {"x": np.ones(4)}, backend=backend)


def test_clear_compiled_forgets_plans(backend, full_calls):
    model, x = _scaled(), {"x": np.ones(3)}
    mdf_loops.run(model, x, backend=backend)
    mdf_loops.clear_compiled()
    mdf_loops.run(model, x, backend=backend)
    assert len(full_calls) == 2


def test_the_scheduler_is_never_replayed(full_calls):
    model, x = _scaled(3.0), np.array([1.0, 2.0, 3.0])
    for _ in range(2):
        out = mdf_loops.run(model, {"x": x}, backend="scheduler")["n.out"]
        np.testing.assert_allclose(out, 3 * x)
    assert len(full_calls) == 2


def test_a_model_read_from_a_file_is_read_each_time(tmp_path, full_calls):
    model = _scaled(4.0)
    path = tmp_path / "m.json"
    model.to_json_file(str(path))
    x = {"x": np.array([1.0, 2.0, 3.0])}
    for _ in range(2):
        outputs = mdf_loops.run(path, x, backend="onnxruntime")
        np.testing.assert_allclose(outputs["n.out"], 4 * x["x"])
    assert len(full_calls) == 2


# ---------------------------------------------------------------- a split runner's replay


class _Split:
    """A :class:`run_plans.Dispatching` runner recording its calls: ``during`` runs
    between starting and returning what was started (an edit, an error)."""

    def __init__(self, during=lambda: None):
        self.during, self.calls = during, []

    def __call__(self, inputs):
        return self.finish(self.start(inputs))

    def start(self, inputs):
        self.calls.append("start")
        self.during()
        return 2 * inputs["x"]

    def finish(self, started):
        self.calls.append("finish")
        return {"n.out": started}


def _planned(runner):
    model, x = _scaled(), np.array([1.0, 2.0, 3.0])
    run_plans.keep(model, "key", runner, {"x": x}, {"x": x})
    return model, {"x": x}


def _edit(model):
    model.graphs[0].nodes[0].parameters[0].value = 5.0


def test_a_split_runner_is_finished_when_the_model_held_during_its_start():
    runner = _Split()
    model, x = _planned(runner)
    np.testing.assert_array_equal(run_plans.replay(model, x, "key")["n.out"], 2 * x["x"])
    assert runner.calls == ["start", "finish"]


def test_what_a_split_runner_started_is_dropped_when_the_model_was_edited_meanwhile():
    runner = _Split()
    model, x = _planned(runner)
    runner.during = lambda: _edit(model)
    assert run_plans.replay(model, x, "key") is None  # the full path's turn
    assert runner.calls == ["start"]


def test_an_error_of_a_start_reaches_the_caller_only_when_the_model_held():
    def failing():
        raise RuntimeError("the loop failed")

    runner = _Split(failing)
    model, x = _planned(runner)
    with pytest.raises(RuntimeError, match="the loop failed"):
        run_plans.replay(model, x, "key")

    def edit_and_fail():
        _edit(model)
        failing()

    runner.during = edit_and_fail
    assert run_plans.replay(model, x, "key") is None


def test_a_runner_that_is_not_split_runs_only_after_the_comparison():
    calls = []
    model, x = _planned(lambda inputs: calls.append(inputs) or {"n.out": 2 * inputs["x"]})
    np.testing.assert_array_equal(run_plans.replay(model, x, "key")["n.out"], 2 * x["x"])
    _edit(model)
    assert run_plans.replay(model, x, "key") is None
    assert len(calls) == 1


@pytest.fixture
def edit_during_start(monkeypatch):
    """JAX's runner made to call ``during[0]`` (when set) after its start dispatched."""
    pytest.importorskip("jax")
    from mdf_loops.backends.jax.replay import FormRunner

    during, finished = [None], []
    start, finish = FormRunner.start, FormRunner.finish

    def starting(self, inputs):
        try:
            return start(self, inputs)
        finally:
            if during[0] is not None:
                during.pop()()
                during.append(None)

    def finishing(self, started):
        finished.append(started)
        return finish(self, started)

    monkeypatch.setattr(FormRunner, "start", starting)
    monkeypatch.setattr(FormRunner, "finish", finishing)
    return during, finished


def test_an_edit_while_the_jax_loop_runs_gives_the_edited_models_answer(
    edit_during_start, full_calls
):
    during, finished = edit_during_start
    model, x = _scaled(2.0), np.array([1.0, 2.0, 3.0])
    for _ in range(2):
        np.testing.assert_allclose(mdf_loops.run(model, {"x": x}, backend="jax")["n.out"], 2 * x)
    started = len(finished)
    during[0] = lambda: _edit(model)
    np.testing.assert_allclose(mdf_loops.run(model, {"x": x}, backend="jax")["n.out"], 5 * x)
    assert len(full_calls) == 2  # the replay was dropped for the full path
    assert len(finished) == started + 1  # the full path's run; not the dropped one
    np.testing.assert_allclose(mdf_loops.run(model, {"x": x}, backend="jax")["n.out"], 5 * x)
    assert len(full_calls) == 2  # planned again, replayed


def test_an_error_of_a_jax_dispatch_dropped_for_an_edit_does_not_reach_the_caller(
    edit_during_start, full_calls
):
    during, _ = edit_during_start
    model, x = _scaled(2.0), np.array([1.0, 2.0, 3.0])
    for _ in range(2):
        mdf_loops.run(model, {"x": x}, backend="jax")
    key = run_module._plan_key(None, "jax", False, 1, (None,) * 4)  # run's, as called here
    runner = run_plans.find(model, {"x": x}, key).runner
    assert runner.held is not None
    runner.held = (_raising, *runner.held[1:])  # the compiled call fails
    with pytest.raises(EvaluationError, match=r"graph 'main' \(jax backend\): RuntimeError: XLA"):
        mdf_loops.run(model, {"x": x}, backend="jax")  # the model held: its error is the answer
    during[0] = lambda: _edit(model)
    np.testing.assert_allclose(mdf_loops.run(model, {"x": x}, backend="jax")["n.out"], 5 * x)
    assert len(full_calls) == 2


def _raising(inputs):
    raise RuntimeError("XLA ran out of memory")
