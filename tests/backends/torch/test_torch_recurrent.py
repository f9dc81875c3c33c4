"""torch.nn's recurrent layers through from_pytorch and back out with to_pytorch
(mdf_loops/backends/torch/recurrent.py): the module's values and gradients at other
lengths, its parameters trained (one SGD step on both sides gives the same model), and
the trained model saved as MDF JSON and run again.

The oracle is the torch module itself: its forward, and torch.autograd through it."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import mdf_loops

torch = pytest.importorskip("torch")


class RNNStepped(torch.nn.Module):
    """An nn.RNN stepped in a Python for loop: the export's Loop body holds an RNN node
    and the layer's biases; the outputs are stacked."""

    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.RNN(3, 4)

    def forward(self, x, h0):
        h, outs = h0, []
        for t in range(x.size(0)):
            out, h = self.rnn(x[t : t + 1], h)
            outs.append(out)
        return torch.cat(outs, 0), h


class LSTMBatchFirst(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(3, 4, batch_first=True)

    def forward(self, x):
        y, (h, c) = self.lstm(x)
        return y, h, c


class BidirectionalReluRNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.RNN(3, 4, nonlinearity="relu", bidirectional=True)

    def forward(self, x, h0):
        return self.rnn(x, h0)


class DeepBidirectionalLSTM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x):
        return (self.lstm(x)[0],)


CASES = {
    # name: (module class, inputs at a length)
    "rnn_stepped": (RNNStepped, lambda n, g: (torch.randn(n, 1, 3, generator=g),
                                              torch.randn(1, 1, 4, generator=g))),
    "lstm_batch_first": (LSTMBatchFirst, lambda n, g: (torch.randn(2, n, 3, generator=g),)),
    "lstm_deep_bidirectional": (DeepBidirectionalLSTM,
                                lambda n, g: (torch.randn(2, n, 3, generator=g),)),
    "rnn_bidirectional": (BidirectionalReluRNN, lambda n, g: (torch.randn(n, 2, 3, generator=g),
                                                              torch.randn(2, 2, 4, generator=g))),
}


def _inputs(name: str, length: int) -> tuple:
    return CASES[name][1](length, torch.Generator().manual_seed(length))


def _feeds(args: tuple) -> dict:
    return dict(zip(("x", "h0")[: len(args)], (a.numpy() for a in args), strict=True))


def _loss(outputs) -> torch.Tensor:
    return sum((k + 1) * (o**2).sum() for k, o in enumerate(outputs))


@pytest.fixture(scope="module", params=sorted(CASES))
def imported(request):
    torch.manual_seed(0)
    module = CASES[request.param][0]()
    model = mdf_loops.from_pytorch(module, _inputs(request.param, 5))
    return request.param, module, model


def test_the_import_runs_as_the_module_at_other_lengths(imported):
    name, module, model = imported
    for length in (2, 9):
        args = _inputs(name, length)
        feeds = _feeds(args)
        expected = [e.detach().numpy() for e in module(*args)]
        for backend in ("torch", "jax"):
            out = list(mdf_loops.run(model, feeds, backend=backend).values())
            for got, want in zip(out, expected, strict=True):
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=backend)


def test_to_pytorch_gives_the_module_values_gradients_and_training(imported, tmp_path):
    name, module, model = imported
    ours, theirs = mdf_loops.to_pytorch(model), copy.deepcopy(module)
    args = _inputs(name, 7)
    mine = [a.clone().requires_grad_() for a in args]
    other = [a.clone().requires_grad_() for a in args]
    out, expected = list(ours(*mine).values()), theirs(*other)
    for got, want in zip(out, expected, strict=True):
        np.testing.assert_allclose(got.detach(), want.detach(), rtol=1e-5, atol=1e-5)
    _loss(out).backward()
    _loss(expected).backward()
    for a, b in zip(mine, other, strict=True):
        np.testing.assert_allclose(a.grad, b.grad, rtol=1e-5, atol=1e-5)
    # every weight and bias is trained: one step on each side leaves the same model
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    for m in (ours, theirs):
        with torch.no_grad():
            for p in m.parameters():
                p -= 0.1 * p.grad
    args = _inputs(name, 3)
    path = tmp_path / f"{name}.json"
    ours.to_mdf().to_json_file(str(path))
    again = mdf_loops.run(str(path), _feeds(args))
    for got, want in zip(again.values(), theirs(*args), strict=True):
        np.testing.assert_allclose(got, want.detach(), rtol=1e-5, atol=1e-5)
