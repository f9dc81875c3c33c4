"""to_pytorch: the module's outputs, inputs, parameters, to_mdf, devices and errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import mdf_loops
from mdf_loops.errors import CompileError, InputError, IterationLimitError
from mdf_loops.workloads import elman_rnn, while_loop

torch = pytest.importorskip("torch")

LEAKY = str(Path(__file__).resolve().parents[3] / "examples" / "leaky_integrator.json")


def _leaky_numpy(I, x0=0.0, dt=0.1, tau=2.0):
    x, trace = x0, []
    for current in I:
        x = x + dt * (-x + current) / tau
        trace.append(x)
    return np.array(trace)


def test_rnn_module_equals_the_numpy_loop_at_several_lengths():
    work = elman_rnn(30)
    module = mdf_loops.to_pytorch(mdf_loops.onnx_to_mdf(work.model))
    for steps in (1, 9, 30):
        inputs = {**work.inputs, "X": work.inputs["X"][:steps]}
        outputs = module(**inputs)
        h_last, H = work.numpy_loop(inputs)
        assert isinstance(outputs["H"], torch.Tensor)
        np.testing.assert_allclose(outputs["H"].detach().numpy(), H, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(outputs["h_last"].detach().numpy(), h_last, rtol=1e-5, atol=1e-6)


def test_inputs_by_position_in_the_graphs_order():
    module = mdf_loops.to_pytorch(LEAKY)
    I = np.sin(np.arange(12) / 3.0)
    by_name = module(x0=torch.tensor(0.5, dtype=torch.float64), I=torch.tensor(I))
    by_position = module(torch.tensor(0.5, dtype=torch.float64), torch.tensor(I))
    expected = _leaky_numpy(I, x0=0.5)
    for outputs in (by_name, by_position):
        np.testing.assert_allclose(outputs["integrate.trace"].detach().numpy(), expected, rtol=1e-12)


def test_the_constants_are_parameters_and_the_weights_too():
    leaky = mdf_loops.to_pytorch(LEAKY)
    assert {n: float(p.detach()) for n, p in leaky.named_parameters()} == {"tau": 2.0, "dt": 0.1}
    assert leaky.mdf_parameter("step.tau") is leaky.tau
    rnn = mdf_loops.to_pytorch(mdf_loops.onnx_to_mdf(elman_rnn(5).model))
    shapes = {n: tuple(p.shape) for n, p in rnn.named_parameters()}
    assert shapes == {"Wx_constant": (32, 64), "Wh_constant": (64, 64), "b_constant": (64,)}


def test_to_mdf_carries_the_values_back_and_leaves_the_model_alone():
    model = mdf_loops.load_model(LEAKY)
    module = mdf_loops.to_pytorch(model)
    with torch.no_grad():
        module.tau.fill_(3.5)
    I = np.cos(np.arange(20) / 4.0)
    returned = module.to_mdf()
    assert returned is not model
    again = mdf_loops.run(returned, {"x0": 0.0, "I": I}, backend="scheduler")
    np.testing.assert_allclose(again["integrate.trace"], _leaky_numpy(I, tau=3.5), rtol=1e-12)
    before = mdf_loops.run(model, {"x0": 0.0, "I": I}, backend="scheduler")
    np.testing.assert_allclose(before["integrate.trace"], _leaky_numpy(I, tau=2.0), rtol=1e-12)


def test_to_mdf_writes_onnx_constant_weights_back():
    work = elman_rnn(6)
    module = mdf_loops.to_pytorch(mdf_loops.onnx_to_mdf(work.model))
    with torch.no_grad():
        module.b_constant.add_(0.5)
    returned = module.to_mdf()
    outputs = mdf_loops.run(returned, work.inputs, backend="onnxruntime")
    h = work.inputs["h0"]
    wx, wh, b = (onnx.numpy_helper.to_array(t) for t in work.model.graph.initializer)
    for x in work.inputs["X"]:
        h = np.tanh(x @ wx + h @ wh + b + 0.5)
    np.testing.assert_allclose(outputs["h_last"], h, rtol=1e-5, atol=1e-6)


def test_the_module_moves_with_to():
    module = mdf_loops.to_pytorch(LEAKY).to(torch.device("cpu"), dtype=torch.float64)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    module = module.to(device)
    I = torch.linspace(0, 1, 8, dtype=torch.float64, device=device)
    out = module(x0=torch.tensor(0.0, dtype=torch.float64, device=device), I=I)
    assert out["integrate.trace"].device.type == device
    np.testing.assert_allclose(out["integrate.trace"].cpu().detach().numpy(),
                               _leaky_numpy(I.cpu().numpy()), rtol=1e-12)


def test_torch_compile_gives_the_eager_answer_at_two_lengths():
    module = mdf_loops.to_pytorch(LEAKY)
    compiled = torch.compile(module, backend="eager")
    for steps in (4, 7):
        I = np.linspace(-1, 1, steps)
        out = compiled(x0=0.0, I=I)
        np.testing.assert_allclose(out["integrate.trace"].detach().numpy(), _leaky_numpy(I),
                                   rtol=1e-12)


def test_unknown_or_missing_inputs_are_named():
    module = mdf_loops.to_pytorch(LEAKY)
    with pytest.raises(InputError, match="unknown input 'i'.*did you mean 'I'"):
        module(x0=0.0, i=np.ones(3))
    rnn = mdf_loops.to_pytorch(mdf_loops.onnx_to_mdf(elman_rnn(3).model))
    with pytest.raises(InputError, match="missing input 'X'"):
        rnn(h0=np.zeros(64, np.float32))
    with pytest.raises(InputError, match="given twice"):
        module(0.0, x0=0.0, I=np.ones(3))
    with pytest.raises(InputError, match="takes 2 inputs"):
        module(0.0, np.ones(3), np.ones(3))


def test_an_operator_without_a_torch_form_is_named_with_its_node():
    graph = helper.make_graph(
        [helper.make_node("Det", ["x"], ["y"], name="determinant")],
        "det",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
    )
    model = mdf_loops.onnx_to_mdf(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(CompileError, match=r"\(Det\).*no torch lowering for ai.onnx::Det"):
        mdf_loops.to_pytorch(model)
    with pytest.raises(CompileError, match="Det"):
        mdf_loops.run(model, {"x": np.eye(2, dtype=np.float32)}, backend="torch")


def test_a_loop_past_max_iterations_stops_with_the_limit_error():
    work = while_loop(50)
    model = mdf_loops.onnx_to_mdf(work.model)
    with pytest.raises(IterationLimitError, match="max_iterations"):
        mdf_loops.run(model, work.inputs, backend="torch", max_iterations=10)
    module = mdf_loops.to_pytorch(model)
    with mdf_loops.safety.limits(max_iterations=10):
        with pytest.raises(IterationLimitError, match="iteration 10"):
            module(**work.inputs)
    expected = work.numpy_loop(work.inputs)
    for actual, value in zip(module(**work.inputs).values(), expected):
        np.testing.assert_allclose(actual.detach().numpy(), value, rtol=1e-6)


def test_import_mdf_loops_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, mdf_loops; mdf_loops.to_pytorch; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_string_constant_is_refused_before_running():
    words = helper.make_tensor("words", TensorProto.STRING, [2], [b"a", b"b"])
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["w"], value=words),
         helper.make_node("Identity", ["w"], ["y"])],
        "strings", [], [helper.make_tensor_value_info("y", TensorProto.STRING, [2])],
    )
    model = mdf_loops.onnx_to_mdf(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(CompileError, match="constant 'w' holds strings"):  # a trusted model
        mdf_loops.run(model, {}, backend="torch", trusted=True)


EXAMPLES = sorted(str(p) for p in (Path(LEAKY).parent).glob("*.json"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[Path(p).stem for p in EXAMPLES])
def test_every_example_as_a_module_equals_onnxruntime_and_comes_back_unchanged(path):
    expected = mdf_loops.run(path, {}, backend="onnxruntime")  # the examples' default inputs
    module = mdf_loops.to_pytorch(path)
    outputs = module()
    returned = mdf_loops.run(module.to_mdf(), {}, backend="onnxruntime")
    for name, value in expected.items():
        np.testing.assert_allclose(outputs[name].detach().numpy(), value, rtol=1e-6, atol=1e-9)
        np.testing.assert_array_equal(returned[name], value)
