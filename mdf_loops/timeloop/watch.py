"""What a simulation reports while it runs: progress, and the first non-finite values.

Progress goes where the iterations of every loop go (``mdf_loops.ops.observe_iterations``,
which the command line draws as its progress line, and :func:`~mdf_loops.simulate`'s
``progress`` callback), and to the ``mdf_loops.timeloop`` log at INFO level every few
seconds. The first time a recorded value becomes NaN or infinite, a WARNING names the
node, the port and the step (later ones are recorded as they come, without a word).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import numpy as np

from mdf_loops.ops import IterationGuard

__all__ = ["SimulationWatch"]

log = logging.getLogger("mdf_loops.timeloop")

#: seconds between two progress lines in the log
_LOG_EVERY = 5.0


class SimulationWatch:
    """Progress and non-finite values of one simulation of ``steps`` steps."""

    def __init__(self, model_id: str, steps: int, dt: float):
        self.model_id, self.steps, self.dt = model_id, steps, dt
        self.guard = IterationGuard(kind=f"the simulation of model '{model_id}'")
        self.guard.check_planned(steps)  # refused before anything runs past the limits
        self.started = self.logged = time.monotonic()
        self.warned: set[str] = set()

    def progress(self, done: int) -> None:
        """Before the step ``done`` (0-based) starts: observers, limits, the log."""
        self.guard.step(done)
        now = time.monotonic()
        if now - self.logged >= _LOG_EVERY:
            self.logged = now
            log.info(
                "model '%s': step %d of %d (%.0f s)",
                self.model_id,
                done,
                self.steps,
                now - self.started,
            )

    def check(self, ref: str, values: np.ndarray, first_step: int = 0) -> None:
        """Warn once when ``values`` (rows = steps from ``first_step``) hold NaN or inf."""
        if ref in self.warned or values.dtype.kind not in "fc" or not values.size:
            return
        finite = np.isfinite(values)
        if finite.all():
            return
        if finite.ndim > 1:  # a step's row is finite where all its elements are
            finite = finite.reshape(len(values), -1).all(axis=1)
        step = first_step + int(np.argmin(finite))
        self.warned.add(ref)
        node, _, name = ref.partition(".")
        row = values[step - first_step]
        kind = "NaN" if np.isnan(row).any() else "infinite"
        log.warning(
            "model '%s': node '%s' port '%s' becomes %s at step %d (t=%.6g); it stays "
            "recorded as computed (a smaller dt often keeps an explicit Euler step stable)",
            self.model_id,
            node,
            name,
            kind,
            step,
            step * self.dt,
        )

    def check_all(self, values: Iterable[tuple[str, np.ndarray]]) -> None:
        for ref, array in values:
            self.check(ref, np.asarray(array))
