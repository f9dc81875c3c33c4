"""mdf_loops.sweep on a real Dask cluster of two worker processes.

Oracles: plain loops of ``mdf_loops.run`` on copies of the model with the
parameter set in the model's own JSON (written here, independent of the sweep's
rewriting), and numpy versions of the drift-diffusion and Elman equations.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("dask.distributed")
xr = pytest.importorskip("xarray")

from dask.distributed import Client, LocalCluster  # noqa: E402
from modeci_mdf.mdf import Model  # noqa: E402

import mdf_loops  # noqa: E402
from ddm_oracle import ddm_numpy, noise  # noqa: E402 (the numpy oracle, shared)
from mdf_loops.sweep import SweepError  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DDM = EXAMPLES / "drift_diffusion.json"
RNN = EXAMPLES / "elman_rnn.json"


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as active:
        yield active


def ddm_with(drift: float = 1.0, decide_threshold: float = 1.0) -> Model:
    """The drift-diffusion example with parameters set in its JSON document."""
    document = json.loads(DDM.read_text())
    nodes = document["drift_diffusion"]["graphs"]["main"]["nodes"]
    body = nodes["ddm"]["parameters"]["body"]["value"]["graph_ddm_step"]
    body["nodes"]["accumulate"]["parameters"]["drift"]["value"] = drift
    nodes["decide"]["parameters"]["threshold"]["value"] = decide_threshold
    return Model.from_dict(document)




def test_grid_over_body_and_top_level_parameters_equals_sequential_runs(client):
    drifts, thresholds = [0.0, 0.8, 2.5], [0.5, 1.0]
    shared = noise(3)
    result = mdf_loops.sweep(DDM, grid={"accumulate.drift": drifts, "decide.threshold": thresholds},
                             inputs={"noise": shared}, client=client, batch_size=2)
    assert result["ddm.trace"].dims[:2] == ("accumulate.drift", "decide.threshold")
    assert list(result["accumulate.drift"].values) == drifts
    assert (result["error"] == "").all() and result["completed"].all()
    for i, drift in enumerate(drifts):
        for j, threshold in enumerate(thresholds):
            expected = mdf_loops.run(ddm_with(drift, threshold), {"noise": shared})
            trace, time, choice = ddm_numpy(shared, drift, decide_threshold=threshold)
            got = result.isel({"accumulate.drift": i, "decide.threshold": j})
            got_trace = got["ddm.trace"].values
            n = len(expected["ddm.trace"])
            np.testing.assert_allclose(got_trace[:n], expected["ddm.trace"], rtol=1e-12)
            assert np.isnan(got_trace[n:]).all()  # padded to the longest trace
            np.testing.assert_allclose(got_trace[:n], trace, rtol=1e-9)
            decision_time = float(got["ddm.decision_time"])
            assert decision_time == pytest.approx(float(expected["ddm.decision_time"]))
            assert decision_time == pytest.approx(time)
            assert int(got["decide.choice"]) == int(expected["decide.choice"]) == choice


def _forget_compiled() -> None:
    from mdf_loops.backends.onnxruntime.compiled import clear_compiled

    clear_compiled()


def _compilations() -> int:
    from mdf_loops.backends.onnxruntime.compiled import _CACHE

    return _CACHE.count()


def test_each_worker_compiles_the_model_once_for_all_parameter_values(client):
    cloudpickle = pytest.importorskip("cloudpickle")
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests
    client.run(_forget_compiled)
    drifts = list(np.linspace(0.1, 2.0, 10))
    result = mdf_loops.sweep(DDM, grid={"accumulate.drift": drifts}, inputs={"noise": noise(8)},
                             client=client, backend="onnxruntime", batch_size=1)
    compilations = client.run(_compilations)
    assert sorted(compilations.values())[-1] == 1 and sum(compilations.values()) in (1, 2)
    for k, drift in enumerate(drifts):
        assert float(result["ddm.decision_time"][k]) == pytest.approx(ddm_numpy(noise(8), drift)[1])


def test_samples_of_inputs_equal_sequential_runs_and_numpy(client):
    rng = np.random.default_rng(7)
    samples = [{"x": rng.normal(size=(30, 3)), "h0": rng.normal(size=5)} for _ in range(6)]
    result = mdf_loops.sweep(RNN, samples=samples, client=client, outputs=["rnn.hidden"],
                             backend="scheduler")
    assert result["rnn.hidden"].dims == ("sample", "rnn.hidden_dim0", "rnn.hidden_dim1")
    assert "rnn.h_final" not in result
    weights = json.loads(RNN.read_text())["elman_rnn"]["graphs"]["main"]["nodes"]["rnn"][
        "parameters"]["body"]["value"]["graph_elman_step"]["nodes"]["cell"]["parameters"]
    W, U, b = (np.array(weights[k]["value"]) for k in ("W", "U", "b"))
    for k, sample in enumerate(samples):
        h, states = sample["h0"], []
        for x_t in sample["x"]:
            h = np.tanh(W @ x_t + U @ h + b)
            states.append(h)
        got = result["rnn.hidden"].isel(sample=k).values
        np.testing.assert_allclose(got, np.array(states), rtol=1e-10)
        np.testing.assert_allclose(got, mdf_loops.run(RNN, sample)["rnn.hidden"], rtol=1e-10)


def test_failing_settings_are_recorded_and_the_rest_run(client):
    bad = noise(5).copy()
    bad[0] = np.nan
    result = mdf_loops.sweep(DDM, samples=[{"noise": noise(5), "accumulate.drift": 0.1},
                                           {"noise": noise(5), "accumulate.drift": 40.0},
                                           {"noise": bad, "accumulate.drift": 40.0}],
                             client=client, max_iterations=20)
    errors = list(result["error"].values)
    assert "IterationLimitError" in errors[0] and "max_iterations" in errors[0]
    assert errors[1] == ""
    assert "NaN" in errors[2] and "ddm.trace" in errors[2]
    assert np.isnan(result["ddm.decision_time"].values[0])
    trace, time, choice = ddm_numpy(noise(5), 40.0)
    assert float(result["ddm.decision_time"][1]) == pytest.approx(time)
    assert result["decide.choice"].values[1] == choice
    assert list(result["accumulate.drift"].values) == [0.1, 40.0, 40.0]


def test_resume_skips_settings_already_in_the_file(client, tmp_path):
    path = tmp_path / "results.nc"
    grid = {"accumulate.drift": [0.5, 1.5, 3.0]}
    mdf_loops.sweep(DDM, grid=grid, inputs={"noise": noise(1)}, client=client, output=path)
    saved = xr.load_dataset(path)
    saved["ddm.decision_time"][0] = 123.0  # a completed setting: kept as it is
    saved["completed"][2] = False  # an unfinished one: run again
    saved["ddm.decision_time"][2] = np.nan
    saved.to_netcdf(path)
    seen = []
    result = mdf_loops.sweep(DDM, grid=grid, inputs={"noise": noise(1)}, client=client,
                             output=path, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(3, 3)]  # one setting ran; two were there
    assert float(result["ddm.decision_time"][0]) == 123.0
    assert float(result["ddm.decision_time"][2]) == pytest.approx(ddm_numpy(noise(1), 3.0)[1])
    reread = xr.load_dataset(path)
    assert reread["completed"].all() and float(reread["ddm.decision_time"][0]) == 123.0
    with pytest.raises(SweepError, match="another sweep"):
        mdf_loops.sweep(DDM, grid={"accumulate.drift": [0.5]}, inputs={"noise": noise(1)},
                        client=client, output=path)


def test_zarr_output_resumes_too(client, tmp_path):
    pytest.importorskip("zarr")
    path = tmp_path / "results.zarr"
    grid = {"accumulate.drift": [0.5, 2.0]}
    first = mdf_loops.sweep(DDM, grid=grid, inputs={"noise": noise(6)}, client=client,
                            output=path)
    seen = []
    again = mdf_loops.sweep(DDM, grid=grid, inputs={"noise": noise(6)}, client=client,
                            output=path, progress=lambda d, t: seen.append(d))
    assert seen == []  # everything was in the store
    with xr.open_zarr(path, consolidated=False) as stored:
        np.testing.assert_array_equal(stored["ddm.trace"].values, first["ddm.trace"].values)
    np.testing.assert_array_equal(again["ddm.trace"].values, first["ddm.trace"].values)
    assert float(first["ddm.decision_time"][1]) == pytest.approx(ddm_numpy(noise(6), 2.0)[1])


def test_an_interrupted_sweep_resumes_from_its_checkpoint(client, tmp_path):
    path = tmp_path / "partial.nc"
    grid = {"accumulate.drift": list(np.linspace(0.2, 2.0, 8))}

    def interrupt(done, total):
        if done >= 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        mdf_loops.sweep(DDM, grid=grid, inputs={"noise": noise(4)}, client=client, output=path,
                        batch_size=1, progress=interrupt, checkpoint_seconds=0)
    partial = xr.load_dataset(path)
    kept = int(partial["completed"].sum())
    assert 2 <= kept < 8
    seen = []
    result = mdf_loops.sweep(DDM, grid=grid, inputs={"noise": noise(4)}, client=client,
                             output=path, batch_size=1, progress=lambda d, t: seen.append(d))
    assert seen[0] == kept + 1 and seen[-1] == 8 and len(seen) == 8 - kept
    for k, drift in enumerate(grid["accumulate.drift"]):
        assert float(result["ddm.decision_time"][k]) == pytest.approx(ddm_numpy(noise(4), drift)[1])


def test_a_killed_worker_loses_and_duplicates_nothing(client):
    pids = client.run(os.getpid)
    victim = sorted(pids.values())[0]
    drifts = list(np.linspace(0.0, 3.0, 24))
    progress = []

    def kill_once(done, total):
        progress.append(done)
        if len(progress) == 2:
            os.kill(victim, signal.SIGKILL)

    shared = noise(11)
    result = mdf_loops.sweep(DDM, grid={"accumulate.drift": drifts}, inputs={"noise": shared},
                             client=client, batch_size=1, backend="scheduler",
                             progress=kill_once)
    assert victim not in client.run(os.getpid).values()
    assert progress == sorted(progress) and progress[-1] == len(drifts)
    assert len(progress) == len(drifts)  # each setting reported once
    assert result["completed"].all() and (result["error"] == "").all()
    for k, drift in enumerate(drifts):
        trace, time, choice = ddm_numpy(shared, drift)
        assert float(result["ddm.decision_time"][k]) == pytest.approx(time)
        assert int(result["decide.choice"][k]) == choice
    client.wait_for_workers(2, timeout=60)


def test_cli_sweep_on_a_scheduler_address(client, tmp_path, capsys):
    from mdf_loops.cli import main

    np.save(tmp_path / "noise.npy", noise(2))
    out = tmp_path / "grid.nc"
    status = main(["sweep", str(DDM), "--param", "accumulate.drift=0.5:2.0:4",
                   "--param", "decide.threshold=1,2", "-i", f"noise={tmp_path / 'noise.npy'}",
                   "-o", str(out), "--scheduler", client.scheduler.address])
    assert status == 0, capsys.readouterr().err
    result = xr.load_dataset(out)
    assert result["decide.choice"].shape == (4, 2)
    np.testing.assert_allclose(result["accumulate.drift"].values, [0.5, 1.0, 1.5, 2.0])
    for k, drift in enumerate([0.5, 1.0, 1.5, 2.0]):
        trace, time, choice = ddm_numpy(noise(2), drift, decide_threshold=2)
        assert float(result["ddm.decision_time"][k, 1]) == pytest.approx(time)
        assert int(result["decide.choice"][k, 1]) == choice
    assert "wrote 8 settings" in capsys.readouterr().err


@pytest.mark.parametrize("kwargs, message", [
    ({"grid": {"accumulate.drift": [1.0]}, "samples": [{"noise": [1.0]}]}, "either grid"),
    ({}, "either grid"),
    ({"grid": {"accumulate.drifts": [1.0]}}, "has no parameter 'drifts'"),
    ({"grid": {"nowhere.drift": [1.0]}}, "no node 'nowhere'"),
    ({"grid": {"speed": [1.0]}}, "neither an input"),
    ({"grid": {"ddm.ddm": [1.0]}}, "calls the function"),
    ({"grid": {"accumulate.drift": []}}, "no values"),
    ({"grid": {"accumulate.drift": ["fast"]}}, "must be numeric"),
    ({"grid": {"noise": [[1.0]]}, "inputs": {"noise": [1.0]}}, "also given in inputs"),
    ({"grid": {"accumulate.drift": [1.0]}, "outputs": ["ddm.speed"]}, "no outputs"),
    ({"samples": [{"noise": [1.0]}, {"accumulate.drift": 1.0}]}, "sample 1 sets"),
    ({"grid": {"accumulate.drift": [1.0]}, "backend": "gpu"}, "backend must be"),
    ({"grid": {"accumulate.drift": [1.0]}, "output": "results.csv"}, ".nc"),
])
def test_bad_arguments_raise_one_clear_error(kwargs, message):
    with pytest.raises(SweepError, match=message):
        mdf_loops.sweep(DDM, **kwargs)


def test_a_grid_over_sequences_of_different_lengths_equals_numpy(client):
    rng = np.random.default_rng(3)
    xs = [rng.normal(size=(steps, 3)) for steps in (30, 20, 25)]
    result = mdf_loops.sweep(RNN, grid={"x": xs}, inputs={"h0": np.zeros(5)}, client=client,
                             outputs=["rnn.hidden", "rnn.h_final"], backend="onnxruntime")
    assert result["rnn.hidden"].shape == (3, 30, 5)  # padded to the longest sequence
    weights = json.loads(RNN.read_text())["elman_rnn"]["graphs"]["main"]["nodes"]["rnn"][
        "parameters"]["body"]["value"]["graph_elman_step"]["nodes"]["cell"]["parameters"]
    W, U, b = (np.array(weights[k]["value"]) for k in ("W", "U", "b"))
    for k, x in enumerate(xs):
        h, states = np.zeros(5), []
        for x_t in x:
            h = np.tanh(W @ x_t + U @ h + b)
            states.append(h)
        got = result["rnn.hidden"].values[k]
        np.testing.assert_allclose(got[: len(x)], np.array(states), rtol=1e-6)
        assert np.isnan(got[len(x):]).all()
        np.testing.assert_allclose(result["rnn.h_final"].values[k], h, rtol=1e-6)
