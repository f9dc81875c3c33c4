"""mdf_loops/backends/onnxruntime/runner.py: ``auto`` passes onnxruntime over for the
scheduler where onnxruntime cannot run a model (a session it cannot open, a kernel that
refuses the model's types while running), with one WARNING per model; ``backend=
"onnxruntime"`` says so in one line.

Oracles: torch's own LSTM module in float64; numpy's maximum for ONNX's Relu. Each test
first asks onnxruntime itself whether it lacks the kernel, and skips where a release has it.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import mdf_loops
from mdf_loops import run


def _onnx_model(node: onnx.NodeProto, inputs: list, outputs: list, weights=()) -> onnx.ModelProto:
    graph = helper.make_graph([node], "g", inputs, outputs,
                              [numpy_helper.from_array(w, n) for n, w in weights])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _onnxruntime_runs(proto: onnx.ModelProto, feed: dict) -> bool:
    """Whether this onnxruntime opens a session for ``proto`` and runs ``feed`` (the tests
    below are about what it lacks; a release that has it makes them moot)."""
    options = ort.SessionOptions()
    options.log_severity_level = 4
    try:
        ort.InferenceSession(proto.SerializeToString(), options,
                             providers=["CPUExecutionProvider"]).run(None, feed)
    except Exception:
        return False
    return True


def _double_lstm_runs() -> bool:
    rng = np.random.default_rng(0)
    weights = [("W", rng.normal(size=(1, 8, 3))), ("R", rng.normal(size=(1, 8, 2)))]
    proto = _onnx_model(
        helper.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=2),
        [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [4, 1, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, None)], weights)
    return _onnxruntime_runs(proto, {"X": rng.normal(size=(4, 1, 3))})


def _passed_over(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "runs on the scheduler" in r.getMessage()]


def test_auto_runs_a_float64_lstm_onnxruntime_has_no_kernel_for_on_the_scheduler(caplog):
    torch = pytest.importorskip("torch")
    if _double_lstm_runs():
        pytest.skip("this onnxruntime runs LSTM on float64")

    class Recurrent(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(3, 4)

        def forward(self, x):
            return self.lstm(x)[0]

    torch.manual_seed(0)
    net = Recurrent().double()
    example = torch.randn(5, 2, 3, dtype=torch.float64)
    model = mdf_loops.from_pytorch(net, (example,))
    (name,) = mdf_loops.model.graph_interface(model.graphs[0]).inputs
    with caplog.at_level(logging.WARNING, logger="mdf_loops"):
        for _ in range(2):
            x = torch.randn(5, 2, 3, dtype=torch.float64)
            (ours,) = run(model, {name: x.numpy()}).values()
            with torch.no_grad():
                expected = net(x).numpy()
            assert ours.dtype == np.float64
            np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-12)
    (warning,) = _passed_over(caplog)  # once: the second call goes straight to the scheduler
    assert "onnxruntime cannot run it" in warning and "LSTM" in warning and "\n" not in warning
    with pytest.raises(mdf_loops.errors.EvaluationError) as info:
        run(model, {name: example.numpy()}, backend="onnxruntime")
    message = str(info.value)
    assert message.startswith(f"graph '{model.graphs[0].id}' (onnxruntime backend): onnxruntime")
    assert "backend='auto' or 'scheduler'" in message and "\n" not in message
    assert info.value.__suppress_context__  # not onnxruntime's traceback under ours


def _relu_int64() -> onnx.ModelProto:
    return _onnx_model(helper.make_node("Relu", ["x"], ["y"]),
                       [helper.make_tensor_value_info("x", TensorProto.INT64, [4])],
                       [helper.make_tensor_value_info("y", TensorProto.INT64, [4])])


def test_auto_passes_over_a_session_onnxruntime_cannot_open_once_per_model(caplog):
    x = np.array([-3, 0, 5, 2**40], dtype=np.int64)
    if _onnxruntime_runs(_relu_int64(), {"x": x}):
        pytest.skip("this onnxruntime runs Relu on int64")
    model = mdf_loops.onnx_to_mdf(_relu_int64())
    with caplog.at_level(logging.WARNING, logger="mdf_loops"):
        for _ in range(3):
            y = run(model, {"x": x})["y"]
            assert y.dtype == np.int64 and y.tolist() == np.maximum(x, 0).tolist()
        assert len(_passed_over(caplog)) == 1
        run(mdf_loops.onnx_to_mdf(_relu_int64()), {"x": x})  # another model: warned again
        model.graphs[0].metadata["note"] = "edited"  # an edited model: chosen again
        run(model, {"x": x})
    warnings = _passed_over(caplog)
    assert len(warnings) == 3 and "cannot open a session" in warnings[0]
    with pytest.raises(mdf_loops.errors.CompileError) as info:
        run(model, {"x": x}, backend="onnxruntime")
    message = str(info.value)
    assert message.startswith("graph 'g': onnxruntime cannot open a session for it: ")
    assert "backend='auto' or 'scheduler'" in message and "\n" not in message
    assert info.value.__suppress_context__
