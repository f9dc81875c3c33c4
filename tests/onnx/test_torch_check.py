"""The check that an exported module follows the module at other lengths
(mdf_loops/onnx/torch_check.py): an export unrolled at the example's length is refused,
naming the input and dimension; one with its loop kept passes; a dimension the module
itself fixes is not asked to grow. The oracle is the module, run eagerly by torch."""

from __future__ import annotations

import io

import onnx
import pytest

from mdf_loops.errors import ModelError

torch = pytest.importorskip("torch")

from mdf_loops.onnx.torch_check import check_other_lengths, flat_outputs  # noqa: E402
from mdf_loops.onnx.torch_export import quiet_torch  # noqa: E402


class CumulativeTanh(torch.nn.Module):
    """h_t = tanh(x_t W + h_{t-1}); W fixes x's second dimension at 2."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([[0.5, -0.3], [0.2, 0.4]]))

    def forward(self, x):
        h = torch.zeros(2)
        for t in range(x.shape[0]):
            h = torch.tanh(x[t] @ self.w + h)
        return h


def _exported(module, args, dynamic: bool = True) -> onnx.ModelProto:
    """The TorchScript exporter's model of ``module``: traced (unrolled) if it is plain."""
    buffer = io.BytesIO()
    axes = {"x": {0: "steps", 1: "features"}} if dynamic else None
    with quiet_torch():
        torch.onnx.export(module, args, buffer, dynamo=False, input_names=["x"],
                          dynamic_axes=axes)
    return onnx.load_from_string(buffer.getvalue())


X = (torch.linspace(-1, 1, 8).reshape(4, 2),)


def test_a_loop_unrolled_at_the_examples_length_is_refused_naming_the_input():
    proto = _exported(CumulativeTanh(), X)  # traced: four copies of the step
    assert not any(n.op_type == "Loop" for n in proto.graph.node)
    with pytest.raises(ModelError) as caught:
        check_other_lengths(CumulativeTanh(), X, proto, ["x"], "'CumulativeTanh'")
    message = str(caught.value)
    assert "input 'x' dimension 0 at size 5" in message and "values differ" in message
    assert "torch.jit.script" in message


def test_an_input_size_fixed_at_the_example_is_refused_as_the_exported_model_refuses_it():
    proto = _exported(CumulativeTanh(), X, dynamic=False)
    with pytest.raises(ModelError, match="dimension 0 at size 5: the exported model refuses it"):
        check_other_lengths(CumulativeTanh(), X, proto, ["x"], "'CumulativeTanh'")


def test_a_kept_loop_passes_and_the_dimension_the_weight_fixes_is_not_grown():
    module = torch.jit.script(CumulativeTanh())
    proto = _exported(module, X)
    assert any(n.op_type == "Loop" for n in proto.graph.node)
    check_other_lengths(module, X, proto, ["x"], "'CumulativeTanh'")  # no error


def test_an_export_that_differs_at_the_example_itself_is_refused():
    class Other(CumulativeTanh):
        def forward(self, x):
            return super().forward(x) + 1.0

    proto = _exported(torch.jit.script(CumulativeTanh()), X)
    with pytest.raises(ModelError, match="at the example's sizes: output 0") as info:
        check_other_lengths(Other(), X, proto, ["x"], "'Other'")
    assert "torch's ONNX form" in str(info.value) and "unrolled" not in str(info.value)


def test_a_model_onnxruntime_cannot_run_is_checked_on_the_reference_evaluator():
    """onnxruntime has no float64 LSTM kernel; the export itself is right."""

    class Lstm64(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(3, 4).double()

        def forward(self, x):
            return self.lstm(x)[0]

    module = torch.jit.script(Lstm64())
    x = torch.randn(5, 2, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    proto = _exported(module, (x,))
    check_other_lengths(module, (x,), proto, ["x"], "'Lstm64'")  # no error
    wrong = Lstm64()  # other weights: the reference evaluator still checks
    with pytest.raises(ModelError, match="values differ"):
        check_other_lengths(wrong, (x,), proto, ["x"], "'Lstm64'")


def test_outputs_flatten_nested_tuples_and_refuse_anything_else():
    a, b, c = torch.zeros(1), torch.ones(2), torch.zeros(3)
    assert [t.shape[0] for t in flat_outputs((a, [b, (c,)]), "'m'")] == [1, 2, 3]
    with pytest.raises(ModelError, match="forward returned int"):
        flat_outputs((a, 3), "'m'")
    with pytest.raises(ModelError, match="forward returned tuple"):
        flat_outputs((), "'m'")


class _DoubleLSTM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(3, 4).double()

    def forward(self, x):
        return self.lstm(x)[0]


def test_a_kernel_onnxruntime_lacks_leaves_no_line_on_the_terminal(capfd):
    # onnxruntime has no double LSTM: the check falls back to onnx's reference evaluator,
    # and onnxruntime's own error line (written to the process's stderr) stays unwritten
    import numpy as np

    import mdf_loops

    torch.manual_seed(0)
    module = _DoubleLSTM()
    x = torch.randn(5, 1, 3, dtype=torch.float64)
    model = mdf_loops.from_pytorch(module, (x,))
    captured = capfd.readouterr()
    assert "onnxruntime" not in captured.err and "LSTM" not in captured.err, captured.err
    expected = module(x).detach().numpy()
    (out,) = mdf_loops.run(model, {model.graphs[0].nodes[0].input_ports[0].id: x.numpy()},
                           backend="scheduler").values()
    np.testing.assert_allclose(out, expected, rtol=1e-10)
