"""The drift-diffusion example (examples/drift_diffusion.json) as a numpy loop: the oracle
of the tests that sweep it (tests/sweep/) or batch its exported model
(tests/backends/onnxruntime/batching/); it does not import mdf_loops."""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: the model this oracle describes
DDM = Path(__file__).resolve().parents[1] / "examples" / "drift_diffusion.json"
#: its time step (the model's ``accumulate.dt``)
DT = 0.01


def noise(seed: int, steps: int = 200) -> np.ndarray:
    """A noise series for the model's input ``noise`` (standard normal, from ``seed``)."""
    return np.random.default_rng(seed).standard_normal(steps)


def ddm_numpy(noise_values, drift=1.0, threshold=1.0, decide_threshold=1.0, sd=1.0, dt=DT):
    """Euler-Maruyama steps ``x += drift * dt + sd * sqrt(dt) * noise`` from 0 until
    ``|x| >= threshold`` or the noise runs out: (trace, decision time, choice), where the
    choice is 1 at or above ``decide_threshold``, -1 at or below its negative, else 0.
    The arguments are the model's parameters ``accumulate.drift``, ``accumulate.threshold``,
    ``decide.threshold``, ``accumulate.noise_sd`` and ``accumulate.dt``."""
    x, trace = 0.0, []
    for sample in noise_values:
        x = x + drift * dt + sd * np.sqrt(dt) * sample
        trace.append(x)
        if not abs(x) < threshold:
            break
    choice = 1 if x >= decide_threshold else -1 if x <= -decide_threshold else 0
    return np.array(trace), len(trace) * dt, choice
