"""Loop workloads as ONNX models, with their inputs and a numpy reference.

Used by the benchmark (``python benchmarks/loops.py``) and by the tests of the
execution modes. Each workload is a :class:`Workload`: the ONNX model, the
inputs by name, and a plain numpy loop computing the same outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mdf_loops.onnx.domains import DEFAULT_OPSET

__all__ = ["Workload", "elman_rnn", "running_sum", "while_loop", "WORKLOADS"]


@dataclass(frozen=True)
class Workload:
    name: str
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    numpy_loop: Callable[[dict], list]


def _model(graph: onnx.GraphProto) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", DEFAULT_OPSET)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="mdf-loops workloads")
    model.ir_version = helper.find_min_ir_version_for(opsets)
    return model


def elman_rnn(steps: int = 1000, inputs: int = 32, hidden: int = 64, seed: int = 0) -> Workload:
    """h_t = tanh(x_t Wx + h_{t-1} Wh + b) under Scan; returns all h_t and the last."""
    rng = np.random.default_rng(seed)
    wx = (rng.standard_normal((inputs, hidden)) / np.sqrt(inputs)).astype(np.float32)
    wh = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
    b = (0.1 * rng.standard_normal(hidden)).astype(np.float32)
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["x_t", "Wx"], ["xw"]),
            helper.make_node("MatMul", ["h_prev", "Wh"], ["hw"]),
            helper.make_node("Add", ["xw", "hw"], ["pre"]),
            helper.make_node("Add", ["pre", "b"], ["pre_b"]),
            helper.make_node("Tanh", ["pre_b"], ["h_next"]),
            helper.make_node("Identity", ["h_next"], ["h_out"]),
        ],
        "rnn_step",
        [
            helper.make_tensor_value_info("h_prev", TensorProto.FLOAT, [hidden]),
            helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [inputs]),
        ],
        [
            helper.make_tensor_value_info("h_next", TensorProto.FLOAT, [hidden]),
            helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [hidden]),
        ],
    )
    graph = helper.make_graph(
        [helper.make_node("Scan", ["h0", "X"], ["h_last", "H"], body=body, num_scan_inputs=1)],
        "elman_rnn",
        [
            helper.make_tensor_value_info("h0", TensorProto.FLOAT, [hidden]),
            helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", inputs]),
        ],
        [
            helper.make_tensor_value_info("h_last", TensorProto.FLOAT, [hidden]),
            helper.make_tensor_value_info("H", TensorProto.FLOAT, ["T", hidden]),
        ],
        initializer=[
            numpy_helper.from_array(wx, "Wx"),
            numpy_helper.from_array(wh, "Wh"),
            numpy_helper.from_array(b, "b"),
        ],
    )
    values = {
        "h0": np.zeros(hidden, np.float32),
        "X": rng.standard_normal((steps, inputs)).astype(np.float32),
    }

    def numpy_loop(v: dict) -> list:
        h = v["h0"]
        out = np.empty((len(v["X"]), hidden), np.float32)
        for t, x in enumerate(v["X"]):
            h = np.tanh(x @ wx + h @ wh + b)
            out[t] = h
        return [h, out]

    return Workload(f"elman_rnn_T{steps}", _model(graph), values, numpy_loop)


def running_sum(steps: int = 20_000, seed: int = 0) -> Workload:
    """s_t = s_{t-1} + x_t over scalars: per-iteration overhead."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["s_prev", "x_t"], ["s_next"]),
            helper.make_node("Identity", ["s_next"], ["s_out"]),
        ],
        "sum_step",
        [
            helper.make_tensor_value_info("s_prev", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("x_t", TensorProto.FLOAT, []),
        ],
        [
            helper.make_tensor_value_info("s_next", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("s_out", TensorProto.FLOAT, []),
        ],
    )
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s0", "x"], ["total", "partial"], body=body, num_scan_inputs=1)],
        "running_sum",
        [
            helper.make_tensor_value_info("s0", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"]),
        ],
        [
            helper.make_tensor_value_info("total", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("partial", TensorProto.FLOAT, ["N"]),
        ],
    )
    rng = np.random.default_rng(seed)
    values = {"s0": np.array(0.0, np.float32), "x": rng.random(steps).astype(np.float32)}

    def numpy_loop(v: dict) -> list:
        s = v["s0"]
        out = np.empty(len(v["x"]), np.float32)
        for t, x in enumerate(v["x"]):
            s = s + x
            out[t] = s
        return [s, out]

    return Workload(f"running_sum_N{steps}", _model(graph), values, numpy_loop)


def while_loop(iterations: int = 5000) -> Workload:
    """A Loop with a condition and no trip count: x <- x + 1 while x + 1 < limit."""
    body = helper.make_graph(
        [
            helper.make_node("Add", ["x_in", "one"], ["x_out"]),
            helper.make_node("Less", ["x_out", "limit"], ["keep_going"]),
        ],
        "while_step",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_in", TensorProto.FLOAT, []),
        ],
        [
            helper.make_tensor_value_info("keep_going", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x_out", TensorProto.FLOAT, []),
        ],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["", "go", "x0"], ["x_final"], body=body)],
        "while_loop",
        [
            helper.make_tensor_value_info("go", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x0", TensorProto.FLOAT, []),
            helper.make_tensor_value_info("limit", TensorProto.FLOAT, []),
        ],
        [helper.make_tensor_value_info("x_final", TensorProto.FLOAT, [])],
        initializer=[numpy_helper.from_array(np.array(1.0, np.float32), "one")],
    )
    values = {
        "go": np.array(True),
        "x0": np.array(0.0, np.float32),
        "limit": np.array(float(iterations), np.float32),
    }

    def numpy_loop(v: dict) -> list:
        x = v["x0"]
        while True:
            x = x + np.float32(1.0)
            if not x < v["limit"]:
                break
        return [x]

    return Workload(f"while_loop_{iterations}", _model(graph), values, numpy_loop)


WORKLOADS = {"elman_rnn": elman_rnn, "running_sum": running_sum, "while_loop": while_loop}
