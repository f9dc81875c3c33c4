"""PyTorch -> MDF (mdf_loops/onnx/from_pytorch.py): loops come in as loop nodes and answer
as torch does at lengths other than the example's, on every backend, after a JSON round
trip; a module whose loop would come in unrolled, and every other bad input, is refused.

The oracle is torch itself, run eagerly on the same inputs."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import mdf_loops
from mdf_loops.errors import MdfLoopsError, ModelError

torch = pytest.importorskip("torch")

LENGTHS = (1, 9, 50)
BACKENDS = ("scheduler", "onnxruntime", "jax", "torch")
ROOT = Path(__file__).resolve().parents[2]


class ElmanRNN(torch.nn.Module):
    """h_t = tanh(x_t Wx + h_{t-1} Wh + b); returns the last state and every state."""

    def __init__(self, n_in: int = 3, n_hidden: int = 4):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.wx = torch.nn.Parameter(0.5 * torch.randn(n_in, n_hidden, generator=g))
        self.wh = torch.nn.Parameter(0.5 * torch.randn(n_hidden, n_hidden, generator=g))
        self.b = torch.nn.Parameter(0.1 * torch.randn(n_hidden, generator=g))

    def forward(self, x, h0):
        h = h0
        states = []
        for t in range(x.shape[0]):
            h = torch.tanh(x[t] @ self.wx + h @ self.wh + self.b)
            states.append(h)
        return h, torch.stack(states)


class DriftDiffusion(torch.nn.Module):
    """Accumulate drift plus noise until |x| reaches the threshold or the noise runs out."""

    def forward(self, drift, noise, threshold):
        x = torch.zeros(())
        t = torch.zeros((), dtype=torch.long)
        while bool(torch.abs(x) < threshold) and bool(t < noise.shape[0]):
            x = x + drift + noise[t]
            t = t + 1
        return x, t


def _rnn_inputs(length: int, seed: int) -> tuple:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(length, 3, generator=g), torch.randn(4, generator=g)


def _ddm_inputs(length: int, seed: int) -> tuple:
    g = torch.Generator().manual_seed(seed)
    return torch.tensor(0.05), 0.3 * torch.randn(length, generator=g), torch.tensor(0.8)


CASES = {
    # name: (the module, its input names, inputs at a length)
    "rnn": (lambda: torch.jit.script(ElmanRNN()), ("x", "h0"), _rnn_inputs),
    "ddm": (DriftDiffusion, ("drift", "noise", "threshold"), _ddm_inputs),  # scripted for us
}


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """Each case imported at length 5 and saved as JSON: (module, path)."""
    folder = tmp_path_factory.mktemp("from_pytorch")
    result = {}
    for name, (make, _, inputs) in CASES.items():
        module = make()
        path = folder / f"{name}.json"
        mdf_loops.from_pytorch(module, inputs(5, seed=1)).to_json_file(str(path))
        result[name] = module, path
    return result


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("length", LENGTHS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_loop_equals_torch_at_every_length_on_every_backend_after_json(
    imported, case, length, backend
):
    module, path = imported[case]
    _, names, make_inputs = CASES[case]
    args = make_inputs(length, seed=length)
    with torch.no_grad():
        expected = [t.numpy() for t in module(*args)]
    outputs = mdf_loops.run(str(path), {n: a.numpy() for n, a in zip(names, args)}, backend=backend)
    assert list(outputs) == ["output_0", "output_1"]
    for got, want in zip(outputs.values(), expected):
        got = np.asarray(got)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_drift_diffusion_loop_stops_at_the_threshold_and_at_the_end(imported):
    """The lengths above reach both exits of the while loop (else they test one)."""
    module, _ = imported["ddm"]
    steps = {n: int(module(*_ddm_inputs(n, seed=n))[1]) for n in LENGTHS}
    assert steps[1] == 1 and steps[50] < 50, steps


@pytest.mark.parametrize("case", sorted(CASES))
def test_loops_come_in_as_loop_nodes_not_unrolled(imported, case):
    from modeci_mdf.utils import load_mdf

    _, path = imported[case]
    functions = [
        p.function for n in load_mdf(str(path)).graphs[0].nodes for p in n.parameters or []
        if p.function
    ]
    assert "onnx::Loop" in {next(iter(f)) if isinstance(f, dict) else f for f in functions}
    assert len(functions) < 20  # one Loop node, not five copies of the body


def test_names_given_replace_forwards_parameter_names():
    model = mdf_loops.from_pytorch(
        DriftDiffusion(), _ddm_inputs(4, seed=0), input_names=["v", "eta", "bound"],
        output_names=["decision", "steps"],
    )
    args = _ddm_inputs(7, seed=2)
    outputs = mdf_loops.run(model, dict(zip(["v", "eta", "bound"], (a.numpy() for a in args))))
    assert list(outputs) == ["decision", "steps"]
    assert outputs["steps"] == int(DriftDiffusion()(*args)[1])


def test_the_module_is_left_in_its_mode_and_nothing_reaches_the_terminal(capfd, caplog):
    module = DriftDiffusion().train()
    with caplog.at_level(logging.DEBUG, logger="mdf_loops"):
        mdf_loops.from_pytorch(module, _ddm_inputs(3, seed=0))
    assert module.training
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""
    assert any("torch warned" in r.getMessage() for r in caplog.records)  # torch's, logged


class _WritesIntoItsArgument(torch.nn.Module):
    def forward(self, x):
        x.mul_(2.0)
        for _ in range(x.shape[0]):
            x = x + 1.0
        return x


def test_a_forward_that_writes_into_its_arguments_changes_nothing_the_user_gave():
    example = torch.ones(3)
    model = mdf_loops.from_pytorch(_WritesIntoItsArgument(), (example,))
    assert torch.equal(example, torch.ones(3))
    got = mdf_loops.run(model, {"x": np.ones(5, np.float32)})["output_0"]
    np.testing.assert_array_equal(got, np.full(5, 7.0, np.float32))  # 2 * 1 + 5


def test_import_mdf_loops_and_the_name_from_pytorch_import_no_torch():
    code = "import sys, mdf_loops; mdf_loops.from_pytorch; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.stdout.strip() == "False", result.stderr


# --- bad input: one ModelError that names the cause --------------------------------------


class _Noisy(torch.nn.Module):
    def forward(self, x):
        return x + torch.randn(x.shape)


class _ReturnsDict(torch.nn.Module):
    def forward(self, x):
        return {"y": x}


class _WithADefault(torch.nn.Module):
    def forward(self, x, scale: float = 2.0):
        return scale * x


class _PythonWhileOnAValue(torch.nn.Module):
    """A while on a tensor's value, in code TorchScript does not compile (``*rest``)."""

    def forward(self, drift, *rest):
        x, t = torch.zeros(()), 0
        while abs(float(x)) < 1.0 and t < rest[0].shape[0]:
            x, t = x + drift + rest[0][t], t + 1
        return x


@pytest.mark.parametrize(
    "module, args, options, says",
    [
        (lambda x: x, (torch.zeros(2),), {}, "expects a torch.nn.Module, got function"),
        (ElmanRNN(), _rnn_inputs(3, 0), {"input_names": ["x"]}, "input_names has 1 names for 2"),
        (ElmanRNN(), _rnn_inputs(3, 0), {"input_names": ["x", "x"]}, "names ['x'] more than"),
        (ElmanRNN(), _rnn_inputs(3, 0), {"input_names": ["x", "h 0"]}, "holds 'h 0'"),
        (ElmanRNN(), _rnn_inputs(3, 0), {"input_names": "x"}, "must be a list of names"),
        (ElmanRNN(), _rnn_inputs(3, 0), {"output_names": ["h"]}, "output_names has 1 names"),
        (DriftDiffusion(), (torch.tensor(0.1), torch.zeros(3), 0.5), {}, "argument 2 is float"),
        (ElmanRNN(), (torch.zeros(3, 2), torch.zeros(4)), {}, "fails on example_args"),
        (_Noisy(), (torch.zeros(3),), {}, "two calls on the same example give different"),
        (_ReturnsDict(), (torch.zeros(3),), {}, "forward returned dict"),
        (_WithADefault(), (torch.zeros(3),), {}, "forward takes x, scale, example_args gives 1"),
    ],
)
def test_bad_input_is_one_model_error_naming_the_cause(module, args, options, says):
    with pytest.raises(ModelError) as caught:
        mdf_loops.from_pytorch(module, args, **options)
    assert says in str(caught.value)


def test_a_traced_module_is_refused_its_loops_are_gone():
    traced = torch.jit.trace(ElmanRNN(), _rnn_inputs(5, 0))
    with pytest.raises(ModelError, match="made by torch.jit.trace.*torch.jit.script it"):
        mdf_loops.from_pytorch(traced, _rnn_inputs(5, 0))


def test_a_while_on_a_value_neither_exporter_keeps_is_refused_naming_both_causes():
    args = (torch.tensor(0.1), torch.full((6,), 0.3))
    with pytest.raises(MdfLoopsError) as caught:
        mdf_loops.from_pytorch(_PythonWhileOnAValue(), args)
    message = str(caught.value)
    assert isinstance(caught.value, ModelError)
    assert "torch.jit.script refused it" in message and "torch.export refused it" in message
    assert "while_loop" in message  # what to change
