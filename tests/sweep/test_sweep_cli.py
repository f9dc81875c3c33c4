"""Pieces of `mdf-loops sweep` and of the sweep's workers that need no cluster."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

import mdf_loops
from mdf_loops.cli.sweep import _ProgressBar, parse_values
from mdf_loops.run import BACKENDS
from mdf_loops.sweep import SweepError
from mdf_loops.sweep.worker import SweepTask, run_settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_parse_values():
    assert parse_values("0.1:1.0:10") == pytest.approx(list(np.linspace(0.1, 1.0, 10)))
    assert parse_values("2:2:1") == [2.0]
    assert parse_values("1,2,4") == [1, 2, 4]
    assert parse_values("1, 2.5") == [1.0, 2.5]
    for bad in ("1:2", "a,b", "1:2:0", ""):
        with pytest.raises(ValueError):
            parse_values(bad)
    with pytest.raises(ValueError, match="COUNT 10,000,000,000 is more than a sweep's "
                                         "10,000,000 settings"):
        parse_values("0:1:10000000000")  # refused before 10**10 values are listed


def test_bad_param_option_is_one_usage_error(capsys):
    from mdf_loops.cli import main

    with pytest.raises(SystemExit):
        main(["sweep", str(EXAMPLES / "drift_diffusion.json"), "--param", "accumulate.drift",
              "-o", "out.nc"])
    assert "expected NAME=VALUES" in capsys.readouterr().err
    assert main(["sweep", str(EXAMPLES / "drift_diffusion.json"), "--param",
                 "accumulate.drift=1,2", "-o", "out.csv"]) == 1
    assert "(.nc) or zarr (.zarr)" in capsys.readouterr().err


def test_progress_bar_draws_and_clears():
    stream = io.StringIO()
    bar = _ProgressBar(stream, width=10)
    bar.update(5, 10)
    assert "[#####.....] 5/10 settings" in stream.getvalue()
    bar.update(10, 10)  # the last update always shows
    assert "[##########] 10/10" in stream.getvalue()
    bar.clear()
    assert stream.getvalue().endswith("\r")


def _task(backend: str) -> SweepTask:
    text = mdf_loops.load_model(EXAMPLES / "elman_rnn.json").to_json()
    return SweepTask(text, "elman-" + backend, "main", {"h0": np.zeros(5)},
                     ("rnn.h_final",), backend)


def test_a_batch_is_one_run_batch_call_where_it_exists(monkeypatch):
    calls = []

    def run_batch(model, inputs=None, params=None, *, backend="jax", graph=None, trusted=False,
                  max_iterations=None):  # a stand-in of the JAX backend's: loops over the batch
        calls.append(({n: np.shape(v) for n, v in inputs.items()},
                      {n: v.shape for n, v in params.items()}, backend))
        outs = [mdf_loops.run(model, {**inputs, **{n: v[k] for n, v in params.items()}})
                for k in range(len(params["x"]))]
        return {name: np.stack([o[name] for o in outs]) for name in outs[0]}

    monkeypatch.setattr(mdf_loops, "run_batch", run_batch, raising=False)
    rng = np.random.default_rng(2)
    xs = [rng.normal(size=(7, 3)) for _ in range(3)]
    results = run_settings(_task("jax"), [(k, {"x": x}) for k, x in enumerate(xs)])
    assert calls == [({"h0": (5,)}, {"x": (3, 7, 3)}, "jax")]
    weights = json.loads((EXAMPLES / "elman_rnn.json").read_text())["elman_rnn"]["graphs"][
        "main"]["nodes"]["rnn"]["parameters"]["body"]["value"]["graph_elman_step"]["nodes"][
        "cell"]["parameters"]
    W, U, b = (np.array(weights[k]["value"]) for k in ("W", "U", "b"))
    for result, x in zip(results, xs):
        h = np.zeros(5)
        for x_t in x:
            h = np.tanh(W @ x_t + U @ h + b)
        assert result.error == ""
        np.testing.assert_allclose(result.outputs["rnn.h_final"], h, rtol=1e-10)


def test_without_run_batch_each_setting_runs_alone(monkeypatch):
    monkeypatch.delattr(mdf_loops, "run_batch", raising=False)
    x = np.ones((4, 3))
    (result,) = run_settings(_task("scheduler"), [(0, {"x": x})])
    np.testing.assert_allclose(result.outputs["rnn.h_final"],
                               mdf_loops.run(EXAMPLES / "elman_rnn.json",
                                             {"x": x, "h0": np.zeros(5)})["rnn.h_final"])
    if "jax" not in BACKENDS:  # this version has no JAX backend: refused before any work
        with pytest.raises(SweepError, match="backend must be one of"):
            mdf_loops.sweep(EXAMPLES / "elman_rnn.json", grid={"h0": [np.zeros(5)]},
                            inputs={"x": x}, backend="jax")


def test_without_the_sweep_extra_the_error_says_what_to_install(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "xarray" else real(name, *a))
    with pytest.raises(SweepError, match=r"needs xarray: pip install 'mdf-loops\[sweep\]'"):
        mdf_loops.sweep(EXAMPLES / "elman_rnn.json", grid={"h0": [np.zeros(5)]})
