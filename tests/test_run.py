"""``mdf_loops.run.planned_runner``: the runner ``run`` replays for a repeated call, for
callers that run one model on many inputs of one form (a sweep's worker).

Oracle: the Elman recurrence in numpy, with the example's weights read from its JSON.
"""

from __future__ import annotations

import json
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
