"""backend="torch" in run_batch and sweep: the same answers as numpy, one run per setting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mdf_loops

pytest.importorskip("torch")

LEAKY = str(Path(__file__).resolve().parents[3] / "examples" / "leaky_integrator.json")
CURRENT = np.sin(np.arange(30) / 4.0)


def _leaky_numpy(tau: float, dt: float = 0.1) -> np.ndarray:
    x, trace = 0.0, []
    for i in CURRENT:
        x = x + dt * (-x + i) / tau
        trace.append(x)
    return np.array(trace)


def test_run_batch_over_a_parameter_on_torch_equals_numpy():
    taus = [1.0, 2.5, 4.0]
    out = mdf_loops.run_batch(LEAKY, {"x0": 0.0, "I": CURRENT}, {"step.tau": taus},
                              backend="torch")
    assert out["integrate.trace"].shape == (3, 30)
    for k, tau in enumerate(taus):
        np.testing.assert_allclose(out["integrate.trace"][k], _leaky_numpy(tau), rtol=1e-12)


def test_sweep_on_torch_equals_numpy():
    pytest.importorskip("xarray")
    distributed = pytest.importorskip("dask.distributed")
    taus = [1.5, 3.0]
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=1,
                            dashboard_address=None) as client:
        result = mdf_loops.sweep(LEAKY, grid={"step.tau": taus}, inputs={"x0": 0.0, "I": CURRENT},
                                 outputs=["integrate.x_final"], backend="torch", client=client)
    for k, tau in enumerate(taus):
        assert float(result["integrate.x_final"][k]) == pytest.approx(_leaky_numpy(tau)[-1],
                                                                      rel=1e-12)
