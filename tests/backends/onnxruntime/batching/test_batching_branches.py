"""The batched ``Scan`` and ``If`` (mdf_loops/backends/onnxruntime/batching/branches.py):
the Elman RNN example (a Scan inside the If that skips a Scan of no steps) with its
sequences, its initial states or both batched, a sequence of no steps, and the Scans and
Ifs the transform refuses.

Oracles: one onnxruntime run per setting of the unbatched model, and the recurrence in
numpy (to float rounding: tanh and the matrix products of many settings at once may
round differently from one).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from mdf_loops.backends.onnxruntime.batching import NotBatchable, batch_model
from mdf_loops.backends.onnxruntime.compiled import compile_model
from mdf_loops.model.interface import load_model
from mdf_loops.onnx.ort_safe import make_safe

from test_batching_rules import SIZE, double, model_of, session

RNN = Path(__file__).resolve().parents[4] / "examples" / "elman_rnn.json"


def elman_numpy(x: np.ndarray, h0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    weights = json.loads(RNN.read_text())["elman_rnn"]["graphs"]["main"]["nodes"]["rnn"][
        "parameters"]["body"]["value"]["graph_elman_step"]["nodes"]["cell"]["parameters"]
    W, U, b = (np.array(weights[k]["value"]) for k in ("W", "U", "b"))
    h, states = h0, []
    for x_t in x:
        h = np.tanh(W @ x_t + U @ h + b)
        states.append(h)
    return h, np.array(states).reshape(len(x), 5)


@pytest.fixture(scope="module")
def exported() -> onnx.ModelProto:
    compiled = compile_model(load_model(RNN), {"x": np.zeros((6, 3)), "h0": np.zeros(5)})
    return make_safe(compiled.onnx_model)


@pytest.mark.parametrize("names", [("x",), ("h0",), ("x", "h0")])
@pytest.mark.parametrize("steps", [6, 0])
def test_the_elman_rnn_batched_equals_each_setting_and_numpy(exported, names, steps):
    rng = np.random.default_rng(steps)
    x, h0 = rng.normal(size=(SIZE, steps, 3)), rng.normal(size=(SIZE, 5))
    result = batch_model(exported, names, SIZE)
    onnx.checker.check_model(result.model)
    feed = {"x": x if "x" in names else x[0], "h0": h0 if "h0" in names else h0[0]}
    got = dict(zip([o.name for o in result.model.graph.output],
                   session(result.model).run(None, feed)))
    alone = session(exported)
    for s in range(SIZE):
        one = {"x": feed["x"][s] if "x" in names else feed["x"],
               "h0": feed["h0"][s] if "h0" in names else feed["h0"]}
        expected = dict(zip(["rnn.h_final", "rnn.hidden"], alone.run(None, one)))
        h_final, hidden = elman_numpy(one["x"], one["h0"])
        for name, oracle in (("rnn.h_final", h_final), ("rnn.hidden", hidden)):
            value = got[name][s]
            assert value.shape == expected[name].shape
            np.testing.assert_allclose(value, expected[name], rtol=1e-12, atol=1e-15)
            np.testing.assert_allclose(value, oracle, rtol=1e-12, atol=1e-15)


def test_a_state_the_body_makes_batched_is_batched_from_the_start():
    """s' = s + w (w batched, s0 shared): the state is batched from its first value."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "w"], ["s2"]), helper.make_node("Mul", ["s2", "e"], ["y"])],
        "step", [double("s", []), double("e", [])], [double("s2", []), double("y", [])],
    )
    nodes = [helper.make_node("Scan", ["s0", "seq"], ["s_end", "ys"], body=body,
                              num_scan_inputs=1)]
    model = model_of(nodes, [double("s0", []), double("w", []), double("seq", [5])],
                     [double("s_end", []), double("ys", [5])])
    w, s0, seq = np.arange(SIZE, dtype=float), np.array(1.0), np.linspace(1, 2, 5)
    result = batch_model(model, ["w"], SIZE)
    got = session(result.model).run(None, {"w": w, "s0": s0, "seq": seq})
    for s in range(SIZE):
        states = 1.0 + w[s] * np.arange(1, 6)
        np.testing.assert_array_equal(got[0][s], states[-1])
        np.testing.assert_array_equal(got[1][s], states * seq)


def test_a_scan_along_another_axis_refuses():
    body = helper.make_graph([helper.make_node("Identity", ["e"], ["y"])], "step",
                             [double("e", [])], [double("y", [])])
    node = helper.make_node("Scan", ["seq"], ["ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[1], name="sideways")
    model = model_of([node], [double("seq", [2, 5])], [double("ys", [5, 2])])
    with pytest.raises(NotBatchable, match="'sideways'.*scan_input_axes"):
        batch_model(model, ["seq"], SIZE)


def test_an_if_batches_an_output_that_one_branch_leaves_shared():
    then = helper.make_graph([helper.make_node("Neg", ["w"], ["a"])], "then", [],
                             [double("a", [])])
    other = helper.make_graph([helper.make_node("Identity", ["k"], ["b"])], "else", [],
                              [double("b", [])])
    nodes = [helper.make_node("If", ["c"], ["r"], then_branch=then, else_branch=other)]
    model = model_of(nodes, [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                             double("w", []), double("k", [])], [double("r", [])])
    result = batch_model(model, ["w"], SIZE)
    w, k = np.arange(SIZE, dtype=float), np.array(7.0)
    for c, expected in ((True, -w), (False, np.full(SIZE, 7.0))):
        got = session(result.model).run(None, {"c": np.array(c), "w": w, "k": k})[0]
        np.testing.assert_array_equal(got, expected)
