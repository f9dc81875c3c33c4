"""grad, value_and_grad and run_batch check their inputs through run's one check
(mdf_loops.model.inputs.check_inputs): the same mistake gives the same InputError,
naming the input, on every entry point and backend; JAX's own text never reaches
the user."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import mdf_loops  # noqa: E402
from mdf_loops.errors import InputError, ModelError  # noqa: E402
from mdf_loops.workloads import elman_rnn  # noqa: E402

RNN = elman_rnn(steps=5, inputs=3, hidden=4, seed=1)
MODEL = mdf_loops.onnx_to_mdf(RNN.model)
GOOD = RNN.inputs


def _loss(out):
    return out["h_last"].sum()


ENTRY_POINTS = {
    "run jax": lambda inputs: mdf_loops.run(MODEL, inputs, backend="jax"),
    "run onnxruntime": lambda inputs: mdf_loops.run(MODEL, inputs, backend="onnxruntime"),
    "grad": lambda inputs: mdf_loops.grad(MODEL, _loss, ["Wx"], inputs),
    "value_and_grad": lambda inputs: mdf_loops.value_and_grad(MODEL, _loss, "b", inputs),
    "run_batch jax": lambda inputs: mdf_loops.run_batch(
        MODEL, inputs, {"b": np.zeros((2, 4), np.float32)}),
    "run_batch onnxruntime": lambda inputs: mdf_loops.run_batch(
        MODEL, inputs, {"b": np.zeros((2, 4), np.float32)}, backend="onnxruntime"),
}

MISTAKES = {
    "missing": ({"X": GOOD["X"]}, r"missing inputs \['h0'\]"),
    "wrong shape": ({**GOOD, "h0": np.zeros(5, np.float32)}, r"input 'h0': expected shape \[4\]"),
    "wrong type": ({**GOOD, "X": np.full((5, 3), "a")}, r"input 'X': expected numbers"),
    "complex for float": ({**GOOD, "X": GOOD["X"] + 0j},
                          r"input 'X': complex\d+ values for an input the model declares float32"),
    "unknown": ({**GOOD, "h_0": GOOD["h0"]}, r"unknown inputs \['h_0'\].*did you mean 'h0'"),
    "not a mapping": ([GOOD["h0"], GOOD["X"]], r"inputs must map input names to values.*list"),
}


@pytest.mark.parametrize("mistake", MISTAKES)
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_the_same_mistake_gives_the_same_error_everywhere(entry, mistake):
    inputs, message = MISTAKES[mistake]
    with pytest.raises(InputError, match=message):
        ENTRY_POINTS[entry](inputs)


def test_the_entry_points_run_on_good_inputs():
    h_last = mdf_loops.run(MODEL, GOOD, backend="jax")["h_last"]
    value, _ = mdf_loops.value_and_grad(MODEL, _loss, "b", GOOD)
    np.testing.assert_allclose(value, h_last.sum(), rtol=1e-6)


@pytest.mark.parametrize("backend", ["jax", "scheduler"])
@pytest.mark.parametrize("params, message", [
    ({"b": np.zeros((2, 4)), "h0": np.zeros((3, 4))}, r"\['b', 'h0'\].*different sizes \{'b': 2, 'h0': 3\}"),
    ({"b": 0.5}, r"input 'b': params give a single value"),
    ({}, r"params must map"),
    ([0.1, 0.2], r"params must map"),
    ({"b": np.zeros((0, 4))}, r"no runs"),
    ({"b": [np.zeros(4), np.zeros(3)]}, r"input 'b'"),
    ({"b": np.zeros((2, 5))}, r"input 'b': expected shape \[2, 4\]|input 'b': expected shape \[4\]"),
])
def test_a_batch_that_is_not_one_batch_is_refused_naming_the_inputs(backend, params, message):
    with pytest.raises(InputError, match=message):
        mdf_loops.run_batch(MODEL, GOOD, params, backend=backend)


def test_a_lifted_weight_of_the_wrong_shape_is_named_by_its_onnx_name():
    with pytest.raises(InputError, match=r"input 'Wx': expected shape \[3, 4\]"):
        mdf_loops.grad(MODEL, _loss, "Wx", {**GOOD, "Wx": np.zeros((4, 4), np.float32)})


def test_an_objective_reading_no_output_lists_the_outputs():
    with pytest.raises(ModelError, match=r"'H_last', which is not an output; outputs: \['H', 'h_last'\]"):
        mdf_loops.grad(MODEL, lambda out: out["H_last"].sum(), "b", GOOD)
