"""mdf_loops/run.py: ``planned_runner``, the runner ``run`` replays for a repeated call, for
callers that run one model on many inputs of one form (a sweep's worker), and a replay or
such a runner on ``auto`` when onnxruntime then fails (tests/backends/onnxruntime/
test_runner.py has the real models onnxruntime cannot run).

Oracle: the Elman recurrence in numpy, with the example's weights read from its JSON.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np

import mdf_loops
from mdf_loops.run import planned_runner, run

RNN = Path(__file__).resolve().parents[1] / "examples" / "elman_rnn.json"


def elman_numpy(x: np.ndarray) -> np.ndarray:
    weights = json.loads(RNN.read_text())["elman_rnn"]["graphs"]["main"]["nodes"]["rnn"][
        "parameters"]["body"]["value"]["graph_elman_step"]["nodes"]["cell"]["parameters"]
    W, U, b = (np.array(weights[k]["value"]) for k in ("W", "U", "b"))
    h = np.zeros(5)
    for x_t in x:
        h = np.tanh(W @ x_t + U @ h + b)
    return h


def test_the_runner_of_a_planned_call_runs_other_inputs_of_the_same_form():
    model = mdf_loops.load_model(RNN)
    rng = np.random.default_rng(0)
    first = {"x": rng.normal(size=(6, 3)), "h0": np.zeros(5)}
    assert planned_runner(model, first, backend="onnxruntime") is None  # nothing run yet
    run(model, first, backend="onnxruntime")
    runner = planned_runner(model, first, backend="onnxruntime")
    assert runner is not None
    other = {"x": rng.normal(size=(6, 3)), "h0": np.zeros(5)}
    np.testing.assert_allclose(runner(other)["rnn.h_final"], elman_numpy(other["x"]),
                               rtol=1e-10)
    # another call's arguments, inputs of another form, or files read each time: no plan
    assert planned_runner(model, first, backend="onnxruntime", max_iterations=10) is None
    assert planned_runner(model, {**first, "x": first["x"][:3]}, backend="onnxruntime") is None
    assert planned_runner(model, first, backend="onnxruntime", external_data_dir=".") is None
    model.graphs[0].nodes[0].id = "renamed"  # an edited model is checked again by run
    assert planned_runner(model, first, backend="onnxruntime") is None


# --------------------------------------- auto: onnxruntime failing on a planned call's inputs


def _passed_over(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "runs on the scheduler" in r.getMessage()]


def test_a_planned_auto_call_that_onnxruntime_fails_on_runs_on_the_scheduler(
        monkeypatch, caplog):
    from mdf_loops.backends.onnxruntime.compiled import CompiledModel

    model = mdf_loops.load_model(RNN)
    rng = np.random.default_rng(1)
    first = {"x": rng.normal(size=(6, 3)), "h0": np.zeros(5)}
    run(model, first)  # planned on onnxruntime
    runner = planned_runner(model, first)
    assert runner is not None

    tries = []

    def refuse(self, inputs):  # onnxruntime failing on some inputs, after it was planned
        tries.append(1)
        raise RuntimeError("a kernel refused these inputs")

    monkeypatch.setattr(CompiledModel, "run", refuse)
    with caplog.at_level(logging.WARNING, logger="mdf_loops"):
        for call in (lambda inputs: run(model, inputs), runner):  # the replay, and a sweep's
            for _ in range(2):
                other = {"x": rng.normal(size=(6, 3)), "h0": np.zeros(5)}
                np.testing.assert_allclose(call(other)["rnn.h_final"],
                                           elman_numpy(other["x"]), rtol=1e-10)
    (warning,) = _passed_over(caplog)
    assert "a kernel refused these inputs" in warning
    # run: the plan, then the full path; the sweep's runner: its plan, once; then the
    # scheduler at once
    assert len(tries) == 3
