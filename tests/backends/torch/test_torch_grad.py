"""Gradients through loops in torch equal mdf_loops.grad (JAX) on the same models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import mdf_loops
from mdf_loops.workloads import elman_rnn

torch = pytest.importorskip("torch")
jnp = pytest.importorskip("jax.numpy")

LEAKY = str(Path(__file__).resolve().parents[3] / "examples" / "leaky_integrator.json")


def test_rnn_gradients_wrt_its_inputs_equal_jax():
    work = elman_rnn(25)
    model = mdf_loops.onnx_to_mdf(work.model)
    _, jax_grads = mdf_loops.value_and_grad(
        model, lambda out: jnp.sum(out["H"] ** 2), ["h0", "X"], work.inputs
    )
    module = mdf_loops.to_pytorch(model)
    h0 = torch.tensor(work.inputs["h0"], requires_grad=True)
    X = torch.tensor(work.inputs["X"], requires_grad=True)
    (module(h0=h0, X=X)["H"] ** 2).sum().backward()
    np.testing.assert_allclose(h0.grad.numpy(), jax_grads["h0"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(X.grad.numpy(), jax_grads["X"], rtol=1e-4, atol=1e-5)


def test_rnn_weight_gradient_equals_finite_differences_of_a_numpy_loop():
    work = elman_rnn(15)
    module = mdf_loops.to_pytorch(mdf_loops.onnx_to_mdf(work.model))
    (module(**work.inputs)["h_last"] ** 2).sum().backward()
    analytic = module.b_constant.grad.numpy()
    wx, wh, b = (np.float64(onnx.numpy_helper.to_array(t)) for t in work.model.graph.initializer)

    def loss(bias):  # the same cell in float64 numpy
        h = np.float64(work.inputs["h0"])
        for x in work.inputs["X"]:
            h = np.tanh(x @ wx + h @ wh + bias)
        return np.sum(h**2)

    eps = 1e-6
    for k in range(0, b.size, 9):
        step = np.zeros_like(b)
        step[k] = eps
        numeric = (loss(b + step) - loss(b - step)) / (2 * eps)
        np.testing.assert_allclose(analytic[k], numeric, rtol=1e-3, atol=1e-5)


def test_leaky_integrator_gradients_wrt_tau_and_the_input_equal_jax():
    I = np.sin(np.arange(40) / 5.0)
    inputs = {"x0": np.array(0.3), "I": I}
    _, jax_grads = mdf_loops.value_and_grad(
        LEAKY, lambda out: jnp.sum(out["integrate.trace"] ** 3), ["tau", "dt", "I"], inputs
    )
    module = mdf_loops.to_pytorch(LEAKY)
    current = torch.tensor(I, requires_grad=True)
    (module(x0=0.3, I=current)["integrate.trace"] ** 3).sum().backward()
    np.testing.assert_allclose(module.tau.grad.numpy(), jax_grads["tau"], rtol=1e-10)
    np.testing.assert_allclose(module.dt.grad.numpy(), jax_grads["dt"], rtol=1e-10)
    np.testing.assert_allclose(current.grad.numpy(), jax_grads["I"], rtol=1e-10)
