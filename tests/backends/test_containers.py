"""mdf_loops/backends/containers.py: the sequence and optional operators the JAX and torch
lowerings share, run end to end on each backend against onnxruntime on the same model."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import mdf_loops
from mdf_loops.errors import MdfLoopsError
from conftest import make_model  # noqa: E402

BACKENDS = ["jax", "torch"]


def _sequence_model(insert_at: int, erase_at: int, read_at: int):
    ints = lambda name, v: helper.make_node(  # noqa: E731
        "Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64, [], [v]))
    nodes = [
        ints("i", insert_at), ints("e", erase_at), ints("r", read_at),
        helper.make_node("Mul", ["x", "x"], ["x2"]),
        helper.make_node("Neg", ["x"], ["nx"]),
        helper.make_node("SequenceConstruct", ["x", "x2"], ["s0"]),
        helper.make_node("SequenceInsert", ["s0", "nx", "i"], ["s1"]),
        helper.make_node("SequenceInsert", ["s1", "x"], ["s2"]),  # at the end
        helper.make_node("SequenceErase", ["s2", "e"], ["s3"]),
        helper.make_node("SequenceErase", ["s3"], ["s4"]),  # the last
        helper.make_node("SequenceAt", ["s4", "r"], ["at"]),
        helper.make_node("SequenceLength", ["s4"], ["n"]),
        helper.make_node("Optional", ["at"], ["o"]),
        helper.make_node("OptionalHasElement", ["o"], ["has"]),
        helper.make_node("OptionalGetElement", ["o"], ["got"]),
        helper.make_node("ConcatFromSequence", ["s4"], ["all"], axis=0),
    ]
    outputs = [helper.make_tensor_value_info("at", TensorProto.FLOAT, [3]),
               helper.make_tensor_value_info("n", TensorProto.INT64, []),
               helper.make_tensor_value_info("has", TensorProto.BOOL, []),
               helper.make_tensor_value_info("got", TensorProto.FLOAT, [3]),
               helper.make_tensor_value_info("all", TensorProto.FLOAT, [None])]
    graph = helper.make_graph(
        nodes, "seq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])], outputs)
    return make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("insert_at, erase_at, read_at", [(0, 1, -1), (-1, -3, 0), (2, 0, 1)])
def test_sequence_operators_match_onnxruntime(backend, insert_at, erase_at, read_at):
    pytest.importorskip(backend)
    onnx_model = _sequence_model(insert_at, erase_at, read_at)
    x = np.array([1.5, -2.0, 3.0], dtype=np.float32)
    session = onnxruntime.InferenceSession(onnx_model.SerializeToString())
    expected = session.run(None, {"x": x})
    outputs = mdf_loops.run(mdf_loops.onnx_to_mdf(onnx_model), {"x": x}, backend=backend)
    for name, want in zip(["at", "n", "has", "got", "all"], expected, strict=True):
        (got,) = [v for k, v in outputs.items() if k.endswith(name)]
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=name)
        assert np.asarray(got).dtype == want.dtype, name


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_position_outside_the_sequence_is_an_error_naming_it(backend):
    pytest.importorskip(backend)
    onnx_model = _sequence_model(0, 0, 7)  # a sequence of 2 has no position 7
    model = mdf_loops.onnx_to_mdf(onnx_model)
    with pytest.raises(MdfLoopsError, match="position 7 is outside a sequence of length 2"):
        mdf_loops.run(model, {"x": np.ones(3, np.float32)}, backend=backend)
