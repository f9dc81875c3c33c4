"""torch's exporters chosen by what the module is (mdf_loops/onnx/torch_export.py): scripted
code keeps its loops through the TorchScript exporter, torch's higher-order while_loop
through the dynamo exporter, and torch's own output stays off the terminal."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest

import mdf_loops

torch = pytest.importorskip("torch")

from mdf_loops.onnx.torch_export import export_module, quiet_torch, scripted  # noqa: E402


class Doubling(torch.nn.Module):
    """x doubled n times (a for loop over range(n), n a tensor)."""

    def forward(self, x, n):
        for _ in range(int(n)):
            x = 2 * x
        return x


def test_a_plain_module_is_scripted_and_its_loop_kept():
    args = (torch.ones(3), torch.tensor(4))
    with quiet_torch():
        exported = export_module(Doubling(), args, ["x", "n"], ["y"], [1])
    assert exported.exporter == "torchscript" and not exported.scripting_error
    assert any(node.op_type == "Loop" for node in exported.proto.graph.node)
    model = mdf_loops.onnx_to_mdf(exported.proto)
    y = mdf_loops.run(model, {"x": np.ones(2, np.float32), "n": np.array(6)})["y"]
    np.testing.assert_array_equal(y, np.full(2, 64.0, np.float32))  # 2**6, not 2**4


def test_scripted_says_why_torchscript_refuses_a_module():
    class Varargs(torch.nn.Module):
        def forward(self, *xs):
            return xs[0]

    module, why = scripted(Varargs())
    assert module is None and "variable number of arguments" in why


def test_quiet_torch_sends_warnings_logs_and_prints_to_the_debug_log(capfd, caplog):
    torch_logger = logging.getLogger("torch.onnx")
    handlers = torch_logger.handlers[:]
    with caplog.at_level(logging.DEBUG, logger="mdf_loops"), quiet_torch():
        warnings.warn("a torch warning", UserWarning, stacklevel=1)
        torch_logger.warning("a torch log line")
        print("a torch print")
    assert capfd.readouterr() == ("", "")
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "a torch warning" in text and "a torch log line" in text and "a torch print" in text
    assert torch_logger.handlers == handlers  # torch's own handlers are back


def _while_loop():
    try:
        from torch._higher_order_ops.while_loop import while_loop
    except ImportError:
        pytest.skip("this torch has no higher-order while_loop")
    return while_loop


class HigherOrderDriftDiffusion(torch.nn.Module):
    """The drift-diffusion process written with torch's higher-order while_loop."""

    def forward(self, drift, noise, threshold):
        while_loop = _while_loop()

        def cond(x, t):
            return (torch.abs(x) < threshold) & (t < noise.shape[0])

        def body(x, t):
            step = noise.index_select(0, t.reshape(1)).reshape(())
            return x + drift + step, t + 1

        return while_loop(cond, body, (torch.zeros(()), torch.zeros((), dtype=torch.long)))


def test_torchs_higher_order_while_loop_comes_in_through_the_dynamo_exporter(tmp_path):
    _while_loop()
    pytest.importorskip("onnxscript")  # torch's dynamo exporter writes ONNX with it
    module = HigherOrderDriftDiffusion()
    g = torch.Generator().manual_seed(3)
    example = (torch.tensor(0.05), 0.3 * torch.randn(5, generator=g), torch.tensor(0.8))
    model = mdf_loops.from_pytorch(module, example, output_names=["x", "t"])
    path = tmp_path / "ddm.json"
    model.to_json_file(str(path))
    for length in (1, 9, 50):
        args = (torch.tensor(0.05), 0.3 * torch.randn(length, generator=g), torch.tensor(0.8))
        want = [t.numpy() for t in module(*args)]
        feeds = dict(zip(["drift", "noise", "threshold"], (a.numpy() for a in args)))
        for backend in ("scheduler", "onnxruntime"):  # jax: test_from_pytorch.py
            got = mdf_loops.run(str(path), feeds, backend=backend)
            np.testing.assert_allclose(got["x"], want[0], rtol=1e-6, err_msg=backend)
            assert int(got["t"]) == int(want[1]), backend


class HigherOrderRNN(torch.nn.Module):
    """h_t = tanh(x_t W + h_{t-1}) written with torch's higher-order scan."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([[0.5, -0.3], [0.2, 0.4]]))

    def forward(self, x, h0):
        try:
            from torch._higher_order_ops.scan import scan
        except ImportError:
            pytest.skip("this torch has no higher-order scan")

        def step(h, xt):
            h = torch.tanh(xt @ self.w + h)
            return h, h.clone()

        return scan(step, h0, x)


def test_torchs_higher_order_scan_comes_in_as_a_scan_node():
    pytest.importorskip("onnxscript")
    module = HigherOrderRNN()
    g = torch.Generator().manual_seed(4)
    model = mdf_loops.from_pytorch(module, (torch.randn(5, 2, generator=g), torch.zeros(2)))
    functions = {next(iter(p.function)) if isinstance(p.function, dict) else p.function
                 for n in model.graphs[0].nodes for p in n.parameters or [] if p.function}
    assert "onnx::Scan" in functions
    for length, backend in ((1, "scheduler"), (9, "onnxruntime"), (50, "onnxruntime")):
        x, h0 = torch.randn(length, 2, generator=g), torch.randn(2, generator=g)
        want = [t.detach().numpy() for t in module(x, h0)]
        got = mdf_loops.run(model, {"x": x.numpy(), "h0": h0.numpy()}, backend=backend)
        for have, expected in zip(got.values(), want, strict=True):
            np.testing.assert_allclose(have, expected, rtol=1e-5, atol=1e-6)
