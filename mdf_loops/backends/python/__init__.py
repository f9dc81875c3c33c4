"""The python backend (time loops only): a time-loop model's steps as one Python loop.

Entry point :func:`compile_time_loop` (``compile_time_loop(model) -> CompiledTimeLoop``);
:func:`run_time_loop` runs it for :func:`mdf_loops.simulate`. A body it does not write
out raises :class:`NotCompilable` (docs/timeloops.md, "Backends").
"""

from mdf_loops.backends.python.compiled import CompiledTimeLoop, compile_time_loop
from mdf_loops.backends.python.errors import NotCompilable
from mdf_loops.backends.python.simulate import run_time_loop

__all__ = ["CompiledTimeLoop", "NotCompilable", "compile_time_loop", "run_time_loop"]
