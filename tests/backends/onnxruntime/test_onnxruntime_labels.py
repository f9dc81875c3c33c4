"""The exporter hands the onnxruntime backend which MDF node each ONNX loop node came
from (ExportResult.labels), and the backend's limit errors name that MDF node."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import BOOL, FLOAT, INT64, body_graph, onnx_model, value_info
from onnx import helper as oh

import mdf_loops
from mdf_loops.backends.onnxruntime.guard import guard_model
from mdf_loops.onnx.export import export_model
from mdf_loops.ops.common import Limits


def _counting_model():
    """``x = x0; for i in range(n): x = x + 1`` as an ONNX Loop, imported into MDF."""
    body = body_graph(
        [oh.make_node("Identity", ["cond_in"], ["cond_out"]),
         oh.make_node("Add", ["x", "one"], ["x_next"])],
        [value_info("i", INT64, []), value_info("cond_in", BOOL, []), value_info("x", FLOAT, [])],
        [value_info("cond_out", BOOL, []), value_info("x_next", FLOAT, [])])
    node = oh.make_node("Loop", ["n", "", "x0"], ["x_final"], body=body, name="counter")
    model = onnx_model([oh.make_node("Constant", [], ["one"], value_float=1.0), node],
                       [value_info("n", INT64, []), value_info("x0", FLOAT, [])],
                       [value_info("x_final", FLOAT, [])], opset=18)
    mdf = mdf_loops.onnx_to_mdf(model)
    assert [n.id for n in mdf.graphs[0].nodes if n.id == "counter"] == ["counter"]
    return mdf


def test_export_labels_each_loop_node_with_its_mdf_node():
    result = export_model(_counting_model())
    (loop,) = [n for n in result.model.graph.node if n.op_type == "Loop"]
    assert loop.name != "counter"  # the exporter names ONNX nodes afresh
    assert result.labels == {loop.name: "counter"}
    assert mdf_loops.mdf_to_onnx(_counting_model()) == result.model


def test_guard_names_the_labelled_node_else_the_onnx_name():
    result = export_model(_counting_model())
    (loop,) = [n for n in result.model.graph.node if n.op_type == "Loop"]
    _, flags = guard_model(result.model, Limits(max_iterations=5), result.labels)
    assert [(f.label, f.within) for f in flags.values()] == [("counter", False)]
    _, flags = guard_model(result.model, Limits(max_iterations=5))
    assert [(f.label, f.within) for f in flags.values()] == [(loop.name, False)]


def test_onnxruntime_limit_error_names_the_mdf_node():
    feeds = {"n": np.array(10**9, np.int64), "x0": np.array(0.0, np.float32)}
    with pytest.raises(mdf_loops.errors.IterationLimitError) as caught:
        mdf_loops.run(_counting_model(), feeds, backend="onnxruntime", max_iterations=5)
    assert str(caught.value).startswith(
        "node 'counter' asked for more than 5 iterations, the limit (max_iterations)")
    # within the limit the loop runs to the end: onnxruntime's answer is numpy's count
    few = {"n": np.array(4, np.int64), "x0": np.array(0.5, np.float32)}
    result = mdf_loops.run(_counting_model(), few, backend="onnxruntime", max_iterations=5)
    assert float(np.asarray(next(iter(result.values())))) == 4.5
