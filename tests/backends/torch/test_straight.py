"""A loop body written out as one function: errors name the node; model names stay data."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import mdf_loops
from mdf_loops.errors import EvaluationError
from mdf_loops.workloads import elman_rnn

torch = pytest.importorskip("torch")


def test_an_error_in_a_body_names_the_node():
    work = elman_rnn(4)
    module = mdf_loops.to_pytorch(mdf_loops.onnx_to_mdf(work.model))
    with pytest.raises(EvaluationError, match=r"\(MatMul\).*RuntimeError"):
        module(h0=torch.tensor(work.inputs["h0"]), X=torch.zeros((4, 5)))  # tensors: unchecked


def test_value_names_that_look_like_code_are_only_names():
    odd = "y = __import__('os'); z"  # a value name that would be code if written into source
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x"], [odd]), helper.make_node("Mul", [odd, odd], ["sq"])],
        "body",
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info(odd, TensorProto.FLOAT, []),
         helper.make_tensor_value_info("sq", TensorProto.FLOAT, [])],
    )
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s0", "xs"], ["total", "squares"], body=body, num_scan_inputs=1)],
        "sums",
        [helper.make_tensor_value_info("s0", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("xs", TensorProto.FLOAT, ["T"])],
        [helper.make_tensor_value_info("total", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("squares", TensorProto.FLOAT, ["T"])],
    )
    model = mdf_loops.onnx_to_mdf(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    xs = np.arange(1, 5, dtype=np.float32)
    out = mdf_loops.run(model, {"s0": np.float32(0), "xs": xs}, backend="torch")
    np.testing.assert_allclose(out["total"], xs.sum())
    np.testing.assert_allclose(out["squares"], np.cumsum(xs) ** 2)
