"""What a worker does with a batch (mdf_loops/sweep/worker.py): the compact batch, and
one vectorised ``run_batch`` call per shape on jax, padded to the sweep's batch size.

Oracle: the Elman recurrence in numpy, with the example's weights read from its JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import mdf_loops
from mdf_loops.sweep.worker import SettingsBatch, SweepTask, run_settings

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


def test_packed_results_give_back_each_setting_s_arrays():
    from mdf_loops.sweep.packed import PackedResults, SettingResult

    rng = np.random.default_rng(2)
    results = [SettingResult(4, {"trace": rng.normal(size=7), "choice": np.int64(1)}),
               SettingResult(9, {}, "IterationLimitError: too long"),
               SettingResult(2, {"trace": rng.normal(size=3), "choice": np.int64(-1)})]
    packed = PackedResults.of(results)
    assert packed.ragged["trace"][0].shape == (10,)  # one flat array per output
    for got, given in zip(packed.unpack(), results):
        assert (got.index, got.error, sorted(got.outputs)) == (
            given.index, given.error, sorted(given.outputs))
        for name, value in given.outputs.items():
            np.testing.assert_array_equal(got.outputs[name], value)
            assert got.outputs[name].shape == np.shape(value)
