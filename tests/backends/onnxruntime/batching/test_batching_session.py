"""The batched model compiled and its outputs split per setting
(mdf_loops/backends/onnxruntime/batching/session.py): with the limit guards of an
untrusted model, cached per model and batch size, a refusal cached and logged once.

Oracle: ``mdf_loops.run`` on each setting.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import mdf_loops
from mdf_loops import ops
from mdf_loops.backends.onnxruntime.batching import NotBatchable
from mdf_loops.backends.onnxruntime.batching.session import cached_batched_compile
from mdf_loops.errors import IterationLimitError, SizeLimitError
from conftest import make_model  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


def test_the_guarded_batch_gives_each_setting_s_run_and_stops_at_the_limits():
    model = mdf_loops.load_model(EXAMPLES / "drift_diffusion.json")
    noise = np.random.default_rng(8).standard_normal((5, 200))
    noise[2] = -0.1  # all 200 steps
    limits = ops.current_limits()
    session = cached_batched_compile(model, {"noise": noise[0]}, ["noise"], 6, limits=limits)
    assert cached_batched_compile(model, {"noise": noise[1]}, ["noise"], 6, limits=limits) is session
    padded = np.concatenate([noise, noise[-1:]])
    columns = session.run({"noise": padded}, 5)
    block, lengths = columns["ddm.trace"]  # padded to the longest, each setting's length
    assert block.shape == (5, 200) and columns["ddm.decision_time"].shape == (5,)
    for k in range(5):
        expected = mdf_loops.run(model, {"noise": noise[k]})
        np.testing.assert_array_equal(block[k, : lengths[k]], expected["ddm.trace"])
        np.testing.assert_array_equal(columns["decide.choice"][k], expected["decide.choice"])
    with ops.limits(max_iterations=150):
        tight = cached_batched_compile(
            model, {"noise": noise[0]}, ["noise"], 6, limits=ops.current_limits()
        )
    with pytest.raises(IterationLimitError, match="150"):
        tight.run({"noise": padded}, 5)  # setting 2 alone asks for 200


def top_two_model(folder: Path):
    """An ONNX model of TopK, an operator the batching transform has no rule for."""
    node = helper.make_node("TopK", ["w", "k"], ["top", "where"], name="best")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("w", TensorProto.DOUBLE, [4])],
        [
            helper.make_tensor_value_info("top", TensorProto.DOUBLE, [2]),
            helper.make_tensor_value_info("where", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor("k", TensorProto.INT64, [1], [2])],
    )
    path = folder / "top_two.onnx"
    onnx.save(make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), path)
    return mdf_loops.load_model(path)


def growing_model(folder: Path, steps: int = 100):
    """An ONNX model whose Loop appends its input to a carried vector ``steps`` times:
    the guard checks that value's size against max_elements each iteration."""
    double = TensorProto.DOUBLE
    body = helper.make_graph(
        [
            helper.make_node("Concat", ["acc", "x"], ["acc2"], axis=0),
            helper.make_node("Identity", ["c"], ["c2"]),
        ],
        "grow",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc", double, ["n"]),
        ],
        [
            helper.make_tensor_value_info("c2", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc2", double, ["m"]),
        ],
    )
    loop = helper.make_node("Loop", ["trip", "", "x"], ["grown"], body=body, name="growing")
    graph = helper.make_graph(
        [loop],
        "g",
        [helper.make_tensor_value_info("x", double, [1])],
        [helper.make_tensor_value_info("grown", double, ["k"])],
        [helper.make_tensor("trip", TensorProto.INT64, [], [steps])],
    )
    path = folder / "growing.onnx"
    onnx.save(make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), path)
    model = mdf_loops.load_model(path)
    mdf_loops.run(model, {"x": np.ones(1)})  # the process's capped arena, if not yet made
    return model


def test_max_elements_counts_the_whole_batch(tmp_path):
    model = growing_model(tmp_path)
    x = np.arange(4.0).reshape(4, 1)
    alone = mdf_loops.run(model, {"x": x[1]}, max_elements=150)["grown"]  # 101 values
    np.testing.assert_array_equal(alone, np.full(101, 1.0))
    with ops.limits(max_elements=150):
        limits = ops.current_limits()
    session = cached_batched_compile(model, {"x": x[0]}, ["x"], 4, limits=limits)
    with pytest.raises(SizeLimitError, match="'growing', iteration 36: a carried value grew"):
        session.run({"x": x}, 4)  # 4 settings of 38 values each: 152 > 150


def test_a_refusal_is_cached_and_logged_once(caplog, tmp_path):
    model = top_two_model(tmp_path)
    inputs = {"w": np.arange(4.0)}
    with caplog.at_level(logging.INFO, logger="mdf_loops"):
        for _ in range(2):
            with pytest.raises(NotBatchable, match=r"node '.*' \(TopK\)"):
                cached_batched_compile(model, inputs, ["w"], 3)
    assert sum("one onnxruntime call per setting" in r.message for r in caplog.records) == 1
