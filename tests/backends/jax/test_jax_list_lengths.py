"""The JAX lowering refuses ONNX lists of mismatched lengths (Scan directions, Slice's starts
and ends) with one error naming the node, where truncating them would compute something else."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as oh

jax = pytest.importorskip("jax")

import mdf_loops  # noqa: E402
from mdf_loops.onnx.import_ import onnx_to_mdf  # noqa: E402


def _scan_model(**attributes):
    body = oh.make_graph(
        [oh.make_node("Add", ["s", "x"], ["s2"]), oh.make_node("Identity", ["s2"], ["y"])],
        "body",
        [oh.make_tensor_value_info(n, TensorProto.DOUBLE, [2]) for n in ("s", "x")],
        [oh.make_tensor_value_info(n, TensorProto.DOUBLE, [2]) for n in ("s2", "y")],
    )
    node = oh.make_node("Scan", ["s0", "xs"], ["sf", "ys"], name="my_scan", body=body,
                        num_scan_inputs=1, **attributes)
    graph = oh.make_graph(
        [node], "g",
        [oh.make_tensor_value_info("s0", TensorProto.DOUBLE, [2]),
         oh.make_tensor_value_info("xs", TensorProto.DOUBLE, [3, 2])],
        [oh.make_tensor_value_info("sf", TensorProto.DOUBLE, [2]),
         oh.make_tensor_value_info("ys", TensorProto.DOUBLE, [3, 2])],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


@pytest.mark.parametrize("attribute", ["scan_input_directions", "scan_output_directions"])
def test_scan_directions_of_the_wrong_length_name_the_node(attribute):
    model = onnx_to_mdf(_scan_model(**{attribute: [0, 1]}))
    with pytest.raises(mdf_loops.MdfLoopsError) as info:
        mdf_loops.run(model, {"s0": np.zeros(2), "xs": np.ones((3, 2))}, backend="jax")
    message = str(info.value)
    assert "my_scan" in message and f"{attribute} has 2 entries, expected 1" in message, message


def test_a_backward_scan_still_agrees_with_numpy():
    model = onnx_to_mdf(_scan_model(scan_input_directions=[1], scan_output_directions=[0]))
    xs = np.arange(6.0).reshape(3, 2)
    outputs = mdf_loops.run(model, {"s0": np.zeros(2), "xs": xs}, backend="jax")
    np.testing.assert_allclose(outputs["ys"], np.cumsum(xs[::-1], axis=0))
    np.testing.assert_allclose(outputs["sf"], xs.sum(axis=0))


def test_slice_starts_and_ends_of_different_lengths_name_the_node():
    node = oh.make_node("Slice", ["x", "starts", "ends"], ["y"], name="my_slice")
    graph = oh.make_graph(
        [node], "g",
        [oh.make_tensor_value_info("x", TensorProto.DOUBLE, [4, 4]),
         oh.make_tensor_value_info("starts", TensorProto.INT64, [2]),
         oh.make_tensor_value_info("ends", TensorProto.INT64, [1])],
        [oh.make_tensor_value_info("y", TensorProto.DOUBLE, [None, None])],
    )
    model = onnx_to_mdf(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]))
    feeds = {"x": np.ones((4, 4)), "starts": np.array([0, 1]), "ends": np.array([2])}
    with pytest.raises(mdf_loops.MdfLoopsError) as info:
        mdf_loops.run(model, feeds, backend="jax")
    message = str(info.value)
    assert "my_slice" in message and "2 starts, 1 ends" in message, message
