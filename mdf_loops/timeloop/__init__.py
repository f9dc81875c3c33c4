"""Time loops: a stateful MDF graph simulated as an explicit ``onnx::Loop`` (docs/timeloops.md)."""

from mdf_loops.timeloop.convert import to_time_loop
from mdf_loops.timeloop.simulate import SIMULATE_BACKENDS, Trajectories, simulate
from mdf_loops.timeloop.spec import TimeLoopSpec, time_loop_spec

__all__ = [
    "to_time_loop",
    "time_loop_spec",
    "TimeLoopSpec",
    "simulate",
    "Trajectories",
    "SIMULATE_BACKENDS",
]
