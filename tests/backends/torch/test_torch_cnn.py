"""The CNN constructs of ModECI's PyTorch examples (Conv2d, PReLU, ZeroPad2d, average and
max pools, torch.cat, Linear) through from_pytorch and to_pytorch
(mdf_loops/backends/torch/convolution.py), against the module and torch.autograd
through it, and through mdf_loops.grad (JAX) against torch.autograd."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import mdf_loops

torch = pytest.importorskip("torch")


class SmallInception(torch.nn.Module):
    """The layers ModECI's inception.py and simple_Convolution.py use, in small."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, kernel_size=3, padding=1)
        self.prelu = torch.nn.PReLU(init=0.1)
        self.branch = torch.nn.Conv2d(4, 2, kernel_size=1)
        self.pad = torch.nn.ZeroPad2d((0, 1, 0, 1))
        self.average = torch.nn.AvgPool2d(2, stride=1)
        self.maximum = torch.nn.MaxPool2d(2, stride=2)
        self.fc = torch.nn.Linear(6 * 4 * 4, 5)

    def forward(self, x):
        y = self.prelu(self.conv(x))
        y = torch.cat((self.branch(y), self.average(self.pad(y))), dim=1)
        y = torch.relu(self.maximum(y))
        return self.fc(y.reshape(y.shape[0], -1))


def test_a_small_inception_trains_as_the_module():
    torch.manual_seed(0)
    module = SmallInception()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 8, 8, generator=g)
    model = mdf_loops.from_pytorch(module, (x,))
    ours, theirs = mdf_loops.to_pytorch(model), copy.deepcopy(module)
    mine, other = x.clone().requires_grad_(), x.clone().requires_grad_()
    (out,) = ours(mine).values()
    np.testing.assert_allclose(out.detach(), module(x).detach(), rtol=1e-5, atol=1e-5)
    (out**2).sum().backward()
    (theirs(other) ** 2).sum().backward()
    np.testing.assert_allclose(mine.grad, other.grad, rtol=1e-4, atol=1e-5)
    assert sum(p.numel() for p in ours.parameters()) >= sum(p.numel() for p in theirs.parameters())
    for m in (ours, theirs):  # one step each: the same model if every gradient is right
        with torch.no_grad():
            for p in m.parameters():
                if p.grad is not None:  # ours also holds the pad's fill value, unread
                    p -= 0.05 * p.grad
    (again,) = ours(x).values()
    np.testing.assert_allclose(again.detach(), theirs(x).detach(), rtol=1e-4, atol=1e-5)


def test_jax_gradients_of_the_imported_cnn_equal_torch_autograd():
    jnp = pytest.importorskip("jax.numpy")
    torch.manual_seed(0)
    module = SmallInception()
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(3))
    model = mdf_loops.from_pytorch(module, (x,))
    _, grads = mdf_loops.value_and_grad(
        model, lambda out: jnp.sum(out["output_0"] ** 2), ["x"], {"x": x.numpy()}
    )
    wanted = x.clone().requires_grad_()
    (module(wanted) ** 2).sum().backward()
    np.testing.assert_allclose(grads["x"], wanted.grad, rtol=1e-4, atol=1e-5)
