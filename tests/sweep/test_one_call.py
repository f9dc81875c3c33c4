"""A batch of settings on onnxruntime as one session call (mdf_loops/sweep/one_call.py):
the drift-diffusion example through the worker, the sweep API and ``mdf-loops sweep``
equal to a loop of ``run``; every way the batched call is not made (a node without a
rule, a limit passed, settings of several shapes) still gives what ``run`` gives.

Oracles: ``mdf_loops.run`` per setting (the same model, exactly), and the drift-diffusion
process in numpy.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest

import mdf_loops
from mdf_loops.backends.onnxruntime.batching.session import BatchedSession
from mdf_loops.sweep.worker import SettingsBatch, SweepTask, run_settings_packed

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "backends" / "onnxruntime" / "batching"))
from ddm_oracle import DDM, ddm_numpy  # noqa: E402

RNN = DDM.parent / "elman_rnn.json"
OUTPUTS = ("ddm.trace", "ddm.decision_time", "decide.choice")


@pytest.fixture
def batched_calls(monkeypatch) -> list[int]:
    """The number of settings of each batched session call (split from its outputs)."""
    calls: list[int] = []
    real = BatchedSession.split

    def spy(self, outputs, count):
        calls.append(count)
        return real(self, outputs, count)

    monkeypatch.setattr(BatchedSession, "split", spy)
    return calls


def ddm_task(**run_options) -> SweepTask:
    text = mdf_loops.load_model(DDM).to_json()
    return SweepTask(text, f"ddm-one-call-{sorted(run_options)}", "main", {}, OUTPUTS,
                     "onnxruntime", run_options)


def noises(count: int, seed: int = 0) -> np.ndarray:
    values = np.random.default_rng(seed).standard_normal((count, 200))
    values[0] = -0.1  # cancels the drift: all 200 steps, undecided
    return values


def assert_equal_to_run(results, model, inputs_of, outputs=OUTPUTS, **options):
    for result in results:
        expected = mdf_loops.run(model, inputs_of(result.index), **options)
        assert result.error == ""
        for name in outputs:
            got = result.outputs[name]
            np.testing.assert_array_equal(got, expected[name])  # exactly
            assert got.dtype == expected[name].dtype


def test_a_batch_is_one_session_call_equal_to_a_loop_of_run_and_numpy(batched_calls):
    values = noises(9)
    batch = SettingsBatch.of([(k, {"noise": values[k]}) for k in range(9)], 12)
    results = run_settings_packed(ddm_task(), batch).unpack()
    assert batched_calls == [9]  # padded to the sweep's batch size of 12, 9 kept
    assert_equal_to_run(results, DDM, lambda k: {"noise": values[k]}, backend="onnxruntime")
    for result in results:
        trace, time, choice = ddm_numpy(values[result.index], drift=1.0)
        np.testing.assert_allclose(result.outputs["ddm.trace"], trace, rtol=1e-12)
        assert result.outputs["decide.choice"] == choice
    assert len(results[0].outputs["ddm.trace"]) == 200


def fell_back(caplog, count: int, error: str) -> bool:
    """Whether a batched call of ``count`` settings raised ``error`` and fell back."""
    return any(f"a batch of {count} settings runs setting by setting" in r.message
               and error in r.message for r in caplog.records)


def test_a_batch_over_a_limit_runs_setting_by_setting_with_run_s_errors(batched_calls,
                                                                        caplog):
    values = noises(5, seed=1)[[2, 0, 3, 1, 4]]  # the first runs alone first: it fits
    batch = SettingsBatch.of([(k, {"noise": values[k]}) for k in range(5)], 5)
    with caplog.at_level(logging.INFO, logger="mdf_loops"):
        results = run_settings_packed(ddm_task(max_iterations=60), batch).unpack()
    assert batched_calls == []  # the batched call passed the limit (setting 1: 200 steps)
    assert fell_back(caplog, 5, "more than 60 iterations")
    for result in results:
        try:
            expected = mdf_loops.run(DDM, {"noise": values[result.index]}, max_iterations=60)
        except mdf_loops.MdfLoopsError as exc:
            assert result.error == f"{type(exc).__name__}: {exc}"
            continue
        np.testing.assert_array_equal(result.outputs["ddm.trace"], expected["ddm.trace"])
    assert results[1].error.startswith("IterationLimitError")


def test_max_elements_counts_the_batch(batched_calls, caplog, tmp_path):
    """Each setting's values fit max_elements; the batch's do not: run one by one."""
    from test_batching_session import growing_model

    model = growing_model(tmp_path)
    xs = np.arange(4.0).reshape(4, 1)
    task = SweepTask(model.to_json(), "growing-one-call", model.graphs[0].id, {}, ("grown",),
                     "onnxruntime", {"max_elements": 150})
    with caplog.at_level(logging.INFO, logger="mdf_loops"):
        results = run_settings_packed(task, SettingsBatch.of(
            [(k, {"x": xs[k]}) for k in range(4)], 4)).unpack()
    assert batched_calls == []
    assert fell_back(caplog, 4, "grew past max_elements=150")
    assert_equal_to_run(results, model, lambda k: {"x": xs[k]}, outputs=("grown",),
                        max_elements=150)
    for result in results:
        np.testing.assert_array_equal(result.outputs["grown"], np.full(101, xs[result.index, 0]))


def test_the_elman_rnn_batches_its_scan_equal_to_a_loop_of_run(batched_calls):
    rng = np.random.default_rng(4)
    xs = rng.normal(size=(3, 6, 3))
    text = mdf_loops.load_model(RNN).to_json()
    task = SweepTask(text, "rnn-one-call", "main", {"h0": np.zeros(5)},
                     ("rnn.h_final", "rnn.hidden"), "onnxruntime")
    results = run_settings_packed(task, SettingsBatch.of(
        [(k, {"x": xs[k]}) for k in range(3)], 3)).unpack()
    assert batched_calls == [3]
    for result in results:  # tanh and matrix products of 3 settings: to float rounding
        expected = mdf_loops.run(RNN, {"x": xs[result.index], "h0": np.zeros(5)})
        for name in ("rnn.h_final", "rnn.hidden"):
            np.testing.assert_allclose(result.outputs[name], expected[name], rtol=1e-12)


def test_a_model_without_a_batching_rule_runs_setting_by_setting(batched_calls, caplog,
                                                                  tmp_path):
    from test_batching_session import top_two_model

    model = top_two_model(tmp_path)
    ws = np.random.default_rng(9).normal(size=(4, 4))
    task = SweepTask(model.to_json(), "top-two-one-call", model.graphs[0].id, {},
                     ("top", "where"), "onnxruntime")
    with caplog.at_level(logging.INFO, logger="mdf_loops"):
        results = run_settings_packed(task, SettingsBatch.of(
            [(k, {"w": ws[k]}) for k in range(4)], 4)).unpack()
    assert batched_calls == []
    assert any("one onnxruntime call per setting: node '" in r.message
               and "(TopK): the batching transform has no rule" in r.message
               for r in caplog.records)
    assert_equal_to_run(results, model, lambda k: {"w": ws[k]}, outputs=("top", "where"),
                        backend="onnxruntime")
    for result in results:
        np.testing.assert_array_equal(result.outputs["top"], np.sort(ws[result.index])[::-1][:2])


def test_settings_of_several_shapes_are_not_batched(batched_calls):
    values = [np.full(200, 0.9), np.full(30, -0.9)]
    batch = SettingsBatch.of([(k, {"noise": v}) for k, v in enumerate(values)], 2)
    results = run_settings_packed(ddm_task(), batch).unpack()
    assert batched_calls == []
    assert_equal_to_run(results, DDM, lambda k: {"noise": values[k]})


def test_a_form_s_later_batches_skip_the_first_run_and_keep_run_s_errors(batched_calls,
                                                                        monkeypatch):
    """The first setting of a form runs through ``run`` once per worker process; a later
    batch of that form whose middle setting passes a limit still gets ``run``'s error for
    it, and the others ``run``'s outputs."""
    import importlib

    module = importlib.import_module("mdf_loops.run")
    firsts: list[int] = []
    real = module.run

    def counted(model, inputs, **options):
        firsts.append(1)
        return real(model, inputs, **options)

    monkeypatch.setattr(module, "run", counted)
    fast, slow = np.full(200, 3.0), np.full(200, -0.1)  # a few steps; all 200 (over 60)
    task = ddm_task(max_iterations=60, trusted=False)
    settings = [fast, fast * 0.8, fast * 0.9, slow, fast * 1.1, fast * 1.2]
    batch = SettingsBatch.of([(k, {"noise": v}) for k, v in enumerate(settings[:3])], 3)
    first = run_settings_packed(task, batch).unpack()
    assert batched_calls == [3] and len(firsts) == 1  # the form's first setting, once
    batch = SettingsBatch.of([(k + 3, {"noise": v}) for k, v in enumerate(settings[3:])], 3)
    batch = batch.subset([1, 0, 2])  # the setting over the limit in the middle
    later = run_settings_packed(task, batch).unpack()
    assert batched_calls == [3]  # the batched call passed the limit: setting by setting
    ran = len(firsts)
    again = SettingsBatch.of([(k, {"noise": settings[k]}) for k in (2, 0, 1)], 3)
    first += run_settings_packed(task, again).unpack()
    assert batched_calls == [3, 3] and len(firsts) == ran  # a checked form: no run first
    monkeypatch.setattr(module, "run", real)
    for result in first + later:
        try:
            expected = mdf_loops.run(DDM, {"noise": settings[result.index]}, max_iterations=60)
        except mdf_loops.MdfLoopsError as exc:
            assert result.index == 3 and result.error == f"{type(exc).__name__}: {exc}"
            continue
        assert result.error == ""
        for name in OUTPUTS:
            np.testing.assert_array_equal(result.outputs[name], expected[name])
    assert [r.index for r in later] == [4, 3, 5] and later[1].error.startswith("Iteration")


def ddm_with(drift: float):
    """The drift-diffusion example with its drift rate set in its JSON document."""
    from modeci_mdf.mdf import Model

    document = json.loads(DDM.read_text())
    body = document["drift_diffusion"]["graphs"]["main"]["nodes"]["ddm"]["parameters"]["body"]
    body["value"]["graph_ddm_step"]["nodes"]["accumulate"]["parameters"]["drift"]["value"] = drift
    return Model.from_dict(document)


@pytest.fixture(scope="module")
def client():
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as active:
        yield active


def test_the_sweep_api_over_subjects_and_drift_rates_equals_a_loop_of_run(client, batched_calls):
    values = noises(6, seed=5)
    drifts = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0]
    samples = [{"noise": n, "accumulate.drift": d} for n, d in zip(values, drifts)]
    result = mdf_loops.sweep(DDM, samples=samples, client=client, backend="onnxruntime",
                             batch_size=3)
    assert batched_calls == [3, 3]
    assert (result["error"] == "").all()
    for k, (n, drift) in enumerate(zip(values, drifts)):
        trace, time, choice = ddm_numpy(n, drift)
        got = result.isel(sample=k)
        steps = len(trace)
        expected = mdf_loops.run(ddm_with(drift), {"noise": n}, backend="onnxruntime")
        np.testing.assert_array_equal(got["ddm.trace"].values[:steps], expected["ddm.trace"])
        assert float(got["ddm.decision_time"]) == float(expected["ddm.decision_time"])
        np.testing.assert_allclose(got["ddm.trace"].values[:steps], trace, rtol=1e-12)
        assert np.isnan(got["ddm.trace"].values[steps:]).all()
        assert float(got["ddm.decision_time"]) == pytest.approx(time, rel=1e-12)
        assert int(got["decide.choice"]) == choice


def test_the_command_line_sweep_equals_a_loop_of_run(client, tmp_path, capsys, batched_calls):
    import xarray as xr

    from mdf_loops.cli import main

    np.save(tmp_path / "noise.npy", noises(2, seed=6)[1])
    out = tmp_path / "drift.nc"
    status = main(["sweep", str(DDM), "--param", "accumulate.drift=0:2:5", "-i",
                   f"noise={tmp_path / 'noise.npy'}", "-o", str(out), "--backend", "onnxruntime",
                   "--batch-size", "5", "--scheduler", client.scheduler.address])
    assert status == 0, capsys.readouterr().err
    assert batched_calls == [5]
    result = xr.load_dataset(out)
    noise = np.load(tmp_path / "noise.npy")
    for k, drift in enumerate(np.linspace(0, 2, 5)):
        trace, time, choice = ddm_numpy(noise, drift)
        expected = mdf_loops.run(ddm_with(float(drift)), {"noise": noise}, backend="onnxruntime")
        np.testing.assert_array_equal(result["ddm.trace"].values[k, : len(trace)],
                                      expected["ddm.trace"])
        np.testing.assert_allclose(result["ddm.trace"].values[k, : len(trace)], trace, rtol=1e-12)
        assert float(result["ddm.decision_time"][k]) == pytest.approx(time, rel=1e-12)
        assert int(result["decide.choice"][k]) == choice


def test_an_interrupted_sweep_of_batched_calls_resumes_equal_to_a_loop_of_run(client,
                                                                              tmp_path):
    """Batches of one call, a setting over a limit in the middle of one, the sweep stopped
    after its first batch and resumed from the file: every setting as ``run`` gives it."""
    import xarray as xr

    values = noises(9, seed=7)
    values[4] = -0.1  # all 200 steps: over max_iterations=60, in the middle of batch 2
    values[[0, 1, 2, 3, 5, 6, 7, 8]] = 1.5 + 0.2 * np.arange(8)[:, None]  # within 60 steps
    path = tmp_path / "batched.nc"
    samples = [{"noise": v} for v in values]

    def interrupt(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        mdf_loops.sweep(DDM, samples=samples, client=client, backend="onnxruntime",
                        batch_size=3, max_iterations=60, output=path, progress=interrupt,
                        checkpoint_seconds=0)
    assert 3 <= int(xr.load_dataset(path)["completed"].sum()) < 9
    result = mdf_loops.sweep(DDM, samples=samples, client=client, backend="onnxruntime",
                             batch_size=3, max_iterations=60, output=path)
    assert result["completed"].all()
    for k, noise in enumerate(values):
        got = result.isel(sample=k)
        try:
            expected = mdf_loops.run(DDM, {"noise": noise}, max_iterations=60)
        except mdf_loops.MdfLoopsError as exc:
            assert k == 4 and str(got["error"].values) == f"{type(exc).__name__}: {exc}"
            assert np.isnan(got["ddm.trace"].values).all()
            continue
        steps = len(expected["ddm.trace"])
        assert str(got["error"].values) == ""
        np.testing.assert_array_equal(got["ddm.trace"].values[:steps], expected["ddm.trace"])
        assert np.isnan(got["ddm.trace"].values[steps:]).all()
        assert float(got["ddm.decision_time"]) == float(expected["ddm.decision_time"])
        assert int(got["decide.choice"]) == int(expected["decide.choice"])
