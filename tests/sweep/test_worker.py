"""What a worker does with a batch (mdf_loops/sweep/worker.py): the compact batch, one
``run`` for the first setting and the planned runner for the others on onnxruntime, and
one vectorised ``run_batch`` call per shape on jax, padded to the sweep's batch size.

Oracles: the Elman recurrence and the drift-diffusion process in numpy (the weights
read from the examples' JSON).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import mdf_loops
from mdf_loops.sweep.worker import SettingsBatch, SweepTask, run_settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ddm_oracle import DDM, ddm_numpy  # noqa: E402

RNN = Path(__file__).resolve().parents[2] / "examples" / "elman_rnn.json"


def elman_numpy(x: np.ndarray) -> np.ndarray:
    weights = json.loads(RNN.read_text())["elman_rnn"]["graphs"]["main"]["nodes"]["rnn"][
        "parameters"]["body"]["value"]["graph_elman_step"]["nodes"]["cell"]["parameters"]
    W, U, b = (np.array(weights[k]["value"]) for k in ("W", "U", "b"))
    h = np.zeros(5)
    for x_t in x:
        h = np.tanh(W @ x_t + U @ h + b)
    return h


def task(backend: str) -> SweepTask:
    text = mdf_loops.load_model(RNN).to_json()
    return SweepTask(text, "elman-worker-" + backend, "main", {"h0": np.zeros(5)},
                     ("rnn.h_final",), backend)


def test_a_batch_stacks_values_of_one_shape_and_lists_the_others():
    rng = np.random.default_rng(0)
    same = [(k, {"x": rng.normal(size=(4, 3)), "r": np.float64(k)}) for k in (3, 5)]
    batch = SettingsBatch.of(same, 4)
    assert batch.indices == (3, 5) and batch.values["x"].shape == (2, 4, 3)
    assert batch.values["r"].tolist() == [3.0, 5.0]
    ragged = SettingsBatch.of([(0, {"x": np.ones((4, 3))}), (1, {"x": np.ones((2, 3))})], 2)
    assert isinstance(ragged.values["x"], list)
    for (i, got), (j, given) in zip(batch.settings(), same):
        assert i == j
        np.testing.assert_array_equal(got["x"], given["x"])


def test_jax_runs_one_call_per_shape_padded_to_the_batch_size(monkeypatch):
    pytest.importorskip("jax")
    calls = []
    real = mdf_loops.run_batch

    def spy(model, inputs, params, **kwargs):
        calls.append({name: np.shape(v) for name, v in params.items()})
        return real(model, inputs, params, **kwargs)

    monkeypatch.setattr(mdf_loops, "run_batch", spy)
    rng = np.random.default_rng(1)
    xs = [rng.normal(size=(n, 3)) for n in (6, 6, 4)]
    one_shape = SettingsBatch.of([(k, {"x": x}) for k, x in enumerate(xs[:2])], 3)
    results = run_settings(task("jax"), one_shape)
    assert calls == [{"x": (3, 6, 3)}]  # two settings padded to the batch size 3
    calls.clear()
    mixed = SettingsBatch.of([(k, {"x": x}) for k, x in enumerate(xs)], 3)
    results = run_settings(task("jax"), mixed)
    assert sorted(calls, key=str) == sorted([{"x": (2, 6, 3)}, {"x": (1, 4, 3)}], key=str)
    assert [r.index for r in results] == [0, 1, 2]
    for result, x in zip(results, xs):
        assert result.error == ""
        np.testing.assert_allclose(result.outputs["rnn.h_final"], elman_numpy(x), rtol=1e-6)


def ddm_task(**run_options) -> SweepTask:
    text = mdf_loops.load_model(DDM).to_json()
    return SweepTask(text, "ddm-worker", None, {}, ("ddm.trace", "ddm.decision_time",
                     "decide.choice"), "onnxruntime", run_options)


def count_runs(monkeypatch) -> list:
    module = sys.modules["mdf_loops.run"]
    calls, real = [], module.run

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "run", spy)
    return calls


def test_onnxruntime_runs_a_batch_s_first_setting_through_run_and_the_rest_planned(
        monkeypatch):
    calls = count_runs(monkeypatch)
    # the zero-noise setting needs 100 steps, over max_iterations: it fails alone, mid-batch
    noises = [np.full(200, 0.9), np.zeros(200), np.full(200, -0.9), np.full(200, 0.5)]
    batch = SettingsBatch.of([(10 + k, {"noise": n}) for k, n in enumerate(noises)], 4)
    results = run_settings(ddm_task(max_iterations=50), batch)
    # one run before the batched call, which passed max_iterations (the zero-noise
    # setting) and so fell back; then one for the first setting, the others planned
    assert calls == [1, 1]
    assert [r.index for r in results] == [10, 11, 12, 13]
    assert results[1].error.startswith("IterationLimitError: node 'ddm' asked for more than 50")
    assert results[1].outputs == {}
    for k in (0, 2, 3):
        trace, time, choice = ddm_numpy(noises[k], drift=1.0)
        assert results[k].error == ""
        np.testing.assert_allclose(results[k].outputs["ddm.trace"], trace, rtol=1e-9)
        np.testing.assert_allclose(results[k].outputs["ddm.decision_time"], time, rtol=1e-9)
        assert results[k].outputs["decide.choice"] == choice


def test_settings_of_different_shapes_each_run_through_run(monkeypatch):
    calls = count_runs(monkeypatch)
    noises = [np.full(200, 0.9), np.full(30, -0.9)]
    results = run_settings(ddm_task(), [(k, {"noise": n}) for k, n in enumerate(noises)])
    assert len(calls) == 2
    for result, n in zip(results, noises):
        trace, _, choice = ddm_numpy(n, drift=1.0)
        np.testing.assert_allclose(result.outputs["ddm.trace"], trace, rtol=1e-9)
        assert result.outputs["decide.choice"] == choice
