"""torch.nn.RNNCell and GRUCell in loops, and loops over x.unbind(0), come in through
from_pytorch (mdf_loops/onnx/torch_symbolics.py: the ONNX forms torch's TorchScript
exporter lacks or writes wrong, lent for one export), answer as the module at other
lengths, train, and save back;
torch's exporter is left as it was, and a form the user registered is theirs.

The oracle is the torch module itself: its forward and torch.autograd through it."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import mdf_loops

torch = pytest.importorskip("torch")


class CellLoop(torch.nn.Module):
    """A cell stepped over the first (or, batch first, the second) axis; every state stacked."""

    def __init__(self, cell: torch.nn.Module, batch_first: bool = False):
        super().__init__()
        self.cell, self.batch_first = cell, batch_first

    def forward(self, x, h0):
        h, states = h0, []
        steps = x.size(1) if self.batch_first else len(x)
        for t in range(steps):
            h = self.cell(x[:, t] if self.batch_first else x[t], h)
            states.append(h)
        return torch.stack(states, dim=1 if self.batch_first else 0)


class Unbound(torch.nn.Module):
    """``for x_t in x.unbind(0)``: torch's own ONNX form of unbind keeps the axis."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 4)

    def forward(self, x, h0):
        h, states = h0, []
        for x_t in x.unbind(0):
            h = torch.tanh(self.lin(x_t) + h)
            states.append(h)
        return torch.stack(states)


def _cases():
    torch.manual_seed(0)
    return {
        # name: (module, inputs at a length)
        "rnn_cell_unbatched": (
            CellLoop(torch.nn.RNNCell(3, 4)),
            lambda n, g: (torch.randn(n, 3, generator=g), torch.randn(4, generator=g)),
        ),
        "rnn_cell_relu_no_bias": (
            CellLoop(torch.nn.RNNCell(3, 4, bias=False, nonlinearity="relu")),
            lambda n, g: (torch.randn(n, 2, 3, generator=g), torch.randn(2, 4, generator=g)),
        ),
        "gru_cell_batch_first": (
            CellLoop(torch.nn.GRUCell(3, 4), batch_first=True),
            lambda n, g: (torch.randn(2, n, 3, generator=g), torch.randn(2, 4, generator=g)),
        ),
        "unbind": (
            Unbound(),
            lambda n, g: (torch.randn(n, 2, 3, generator=g), torch.randn(2, 4, generator=g)),
        ),
        "gru_cell_float64": (
            CellLoop(torch.nn.GRUCell(3, 4).double()),
            lambda n, g: (
                torch.randn(n, 3, generator=g, dtype=torch.float64),
                torch.randn(4, generator=g, dtype=torch.float64),
            ),
        ),
    }


CASES = _cases()


def _inputs(name: str, length: int) -> tuple:
    return CASES[name][1](length, torch.Generator().manual_seed(length))


def _feeds(args: tuple) -> dict:
    return {"x": args[0].numpy(), "h0": args[1].numpy()}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cells_come_in_as_loops_that_train_and_save_back(name, tmp_path):
    module = CASES[name][0]
    model = mdf_loops.from_pytorch(module, _inputs(name, 5))
    for length, backend in ((2, "onnxruntime"), (9, "torch"), (9, "scheduler")):
        args = _inputs(name, length)
        (out,) = mdf_loops.run(model, _feeds(args), backend=backend).values()
        np.testing.assert_allclose(out, module(*args).detach(), rtol=1e-5, atol=1e-5)

    ours, theirs = mdf_loops.to_pytorch(model), copy.deepcopy(module)
    args = _inputs(name, 7)
    mine, other = ([a.clone().requires_grad_() for a in args] for _ in range(2))
    (out,) = ours(*mine).values()
    ((out**3).sum()).backward()
    ((theirs(*other) ** 3).sum()).backward()
    for a, b in zip(mine, other, strict=True):
        np.testing.assert_allclose(a.grad, b.grad, rtol=1e-5, atol=1e-5)
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in theirs.parameters())
    for m in (ours, theirs):  # one step each: the same model if every gradient is right
        with torch.no_grad():
            for p in m.parameters():
                p -= 0.1 * p.grad
    path = tmp_path / "trained.json"
    ours.to_mdf().to_json_file(str(path))
    args = _inputs(name, 4)
    (again,) = mdf_loops.run(str(path), _feeds(args)).values()
    np.testing.assert_allclose(again, theirs(*args).detach(), rtol=1e-5, atol=1e-5)


def _exports(module: torch.nn.Module, args: tuple) -> bool:
    import io
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(torch.jit.script(module), args, io.BytesIO(), dynamo=False)
        except Exception:  # torch's exporter refuses GRUCell on its own
            return False
    return True


def test_torch_exporter_is_left_as_it_was():
    name = "gru_cell_batch_first"
    assert not _exports(CASES[name][0], _inputs(name, 3))
    mdf_loops.from_pytorch(CASES[name][0], _inputs(name, 3))
    assert not _exports(CASES[name][0], _inputs(name, 3))


def test_a_form_the_user_registered_is_used_and_kept():
    calls = []

    def users_rnn_cell(g, x, h, w_ih, w_hh, b_ih, b_hh):
        calls.append(1)
        ih = g.op("Add", g.op("MatMul", x, g.op("Transpose", w_ih, perm_i=[1, 0])), b_ih)
        hh = g.op("Add", g.op("MatMul", h, g.op("Transpose", w_hh, perm_i=[1, 0])), b_hh)
        return g.op("Tanh", g.op("Add", ih, hh))

    torch.onnx.register_custom_op_symbolic("aten::rnn_tanh_cell", users_rnn_cell, 9)
    try:
        name = "rnn_cell_unbatched"
        module = CASES[name][0]
        model = mdf_loops.from_pytorch(module, _inputs(name, 5))
        assert calls, "the user's form was not used"
        args = _inputs(name, 3)
        (out,) = mdf_loops.run(model, _feeds(args)).values()
        np.testing.assert_allclose(out, module(*args).detach(), rtol=1e-5, atol=1e-5)
        calls.clear()
        mdf_loops.from_pytorch(module, _inputs(name, 5))
        assert calls, "the user's form was unregistered"
    finally:
        torch.onnx.unregister_custom_op_symbolic("aten::rnn_tanh_cell", 9)


def test_unbind_unpacked_into_names_keeps_torch_s_form():
    class Unpacked(torch.nn.Module):
        def forward(self, x):
            a, b, c = x.unbind(1)
            return a * b + c

    module = Unpacked()
    model = mdf_loops.from_pytorch(module, (torch.randn(5, 3),))
    x = torch.randn(8, 3, generator=torch.Generator().manual_seed(2))
    (out,) = mdf_loops.run(model, {"x": x.numpy()}).values()
    np.testing.assert_allclose(out, module(x), rtol=1e-6)


class Shrink(torch.nn.Module):
    """A while loop on ``x.norm()``, which torch's own ONNX form of norm refuses."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([[0.5, 0.1], [-0.2, 0.6]]))

    def forward(self, x):
        steps = torch.zeros((), dtype=torch.long)
        while bool(x.norm() > 0.05) and bool(steps < 200):
            x = x @ self.w
            steps = steps + 1
        return x, steps, x.norm(1)


def test_a_while_on_a_norm_comes_in_as_a_loop():
    module = Shrink()
    model = mdf_loops.from_pytorch(module, (torch.tensor([1.0, 2.0]),))
    for start in ([0.1, 0.0], [30.0, -40.0]):
        x = torch.tensor(start)
        out = list(mdf_loops.run(model, {"x": x.numpy()}).values())
        for got, want in zip(out, module(x), strict=True):
            np.testing.assert_allclose(got, want.detach(), rtol=1e-5, atol=1e-6)
