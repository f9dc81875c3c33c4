"""Time loops: a stateful MDF graph as an explicit ``onnx::Loop`` (docs/timeloops.md); it runs by
:func:`mdf_loops.simulate` (:mod:`mdf_loops.simulation`)."""

from mdf_loops.timeloop.convert import to_time_loop
from mdf_loops.timeloop.spec import TimeLoopSpec, time_loop_spec
from mdf_loops.timeloop.trajectories import Trajectories

__all__ = [
    "to_time_loop",
    "time_loop_spec",
    "TimeLoopSpec",
    "Trajectories",
]
