"""mdf_loops.run_batch (mdf_loops/backends/jax/batch.py): one vmapped JAX call, or a loop of runs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import mdf_loops
from mdf_loops.workloads import while_loop

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import rescorla_wagner  # noqa: E402


def _rw_numpy(alpha, v0, cues, outcomes):
    v, history = np.array(v0, float), []
    for x, lam in zip(cues, outcomes):
        v = v + alpha * (lam - v @ x) * x
        history.append(v)
    return v, np.array(history)


@pytest.mark.parametrize("backend", ["jax", "scheduler", "onnxruntime"])
def test_a_batch_of_parameter_settings(backend):
    if backend == "jax":
        pytest.importorskip("jax")
    model = rescorla_wagner.build_model()
    inputs = rescorla_wagner.example_inputs()
    alphas = [0.05, 0.2, 0.6]
    outputs = mdf_loops.run_batch(model, inputs, {"alpha": alphas}, backend=backend)
    assert outputs["trials.V_history"].shape == (3, 40, 4)
    for k, alpha in enumerate(alphas):
        final, history = _rw_numpy(alpha, inputs["V0"], inputs["cues"], inputs["outcomes"])
        np.testing.assert_allclose(outputs["trials.V_final"][k], final, rtol=1e-12)
        np.testing.assert_allclose(outputs["trials.V_history"][k], history, rtol=1e-12)


def test_a_batch_of_inputs_and_parameters_together():
    pytest.importorskip("jax")
    model = rescorla_wagner.build_model()
    inputs = rescorla_wagner.example_inputs()
    starts = np.array([[0.0, 0.0, 0.0, 0.0], [0.5, 0.1, 0.0, 1.0]])
    outputs = mdf_loops.run_batch(model, inputs, {"V0": starts, "learn.alpha": [0.1, 0.3]})
    for k, alpha in enumerate([0.1, 0.3]):
        final, _ = _rw_numpy(alpha, starts[k], inputs["cues"], inputs["outcomes"])
        np.testing.assert_allclose(outputs["trials.V_final"][k], final, rtol=1e-12)


def test_loops_stopped_by_their_condition_stop_per_row():
    pytest.importorskip("jax")
    work = while_loop(10)
    model = mdf_loops.onnx_to_mdf(work.model)
    limits = np.array([3.0, 50.0, 7.0], np.float32)
    outputs = mdf_loops.run_batch(model, work.inputs, {"limit": limits})
    expected = [work.numpy_loop({**work.inputs, "limit": v})[0] for v in limits]
    np.testing.assert_array_equal(outputs["x_final"], expected)


def test_rows_of_different_lengths_are_refused():
    model = rescorla_wagner.build_model()
    with pytest.raises(mdf_loops.errors.InputError, match=r"\['V0', 'alpha'\].*different sizes"):
        mdf_loops.run_batch(model, rescorla_wagner.example_inputs(),
                            {"alpha": [0.1, 0.2], "V0": np.zeros((3, 4))}, backend="scheduler")


def test_without_jax_the_backend_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # import jax now fails
    from mdf_loops.backends.jax.compiled import clear_compiled

    clear_compiled()
    model = rescorla_wagner.build_model()
    with pytest.raises(mdf_loops.errors.CompileError, match=r"mdf-loops\[jax\]"):
        mdf_loops.run(model, rescorla_wagner.example_inputs(), backend="jax")
    with pytest.raises(mdf_loops.errors.CompileError, match=r"mdf-loops\[jax\]"):
        mdf_loops.grad(model, lambda out: out["trials.V_final"].sum(), ["alpha"],
                       rescorla_wagner.example_inputs())
    clear_compiled()
