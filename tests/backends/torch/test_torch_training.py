"""torch.optim trains a leaky integrator's time constant; to_mdf carries it back to MDF."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mdf_loops

torch = pytest.importorskip("torch")

LEAKY = str(Path(__file__).resolve().parents[3] / "examples" / "leaky_integrator.json")
TRUE_TAU, DT = 3.0, 0.1


def _numpy_trace(I: np.ndarray, tau: float, x0: float = 0.0) -> np.ndarray:
    x, trace = x0, []
    for current in I:
        x = x + DT * (-x + current) / tau
        trace.append(x)
    return np.array(trace)


def test_adam_recovers_tau_within_two_percent_and_to_mdf_carries_it_back():
    rng = np.random.default_rng(0)
    I = np.repeat(rng.uniform(-1, 1, 10), 8)  # steps of current, 80 time steps
    target = _numpy_trace(I, TRUE_TAU)
    module = mdf_loops.to_pytorch(LEAKY)  # the model's tau is 2.0
    module.dt.requires_grad_(False)
    optimizer = torch.optim.Adam([module.tau], lr=0.05)
    current, wanted = torch.tensor(I), torch.tensor(target)
    for _ in range(150):
        optimizer.zero_grad()
        loss = ((module(x0=0.0, I=current)["integrate.trace"] - wanted) ** 2).mean()
        loss.backward()
        optimizer.step()
    tau = float(module.tau.detach())
    assert abs(tau - TRUE_TAU) / TRUE_TAU < 0.02, tau

    trained = module.to_mdf()
    assert float(mdf_loops.to_pytorch(trained).tau.detach()) == tau  # the value in the model
    outputs = mdf_loops.run(trained, {"x0": 0.0, "I": I}, backend="scheduler")
    np.testing.assert_allclose(outputs["integrate.trace"], _numpy_trace(I, tau), rtol=1e-9)
    assert np.max(np.abs(outputs["integrate.trace"] - target)) < 0.02 * np.max(np.abs(target))
