"""Semantics of ONNX Scan, Loop and If as plain functions over body callables.

Nothing here knows about MDF: a body is any ``body(values, iteration) -> values``.
The MDF scheduler path and the fast paths share these functions.
"""

from mdf_loops.ops.common import IterationGuard, Limits, current_limits, limits, observe_iterations
from mdf_loops.ops.if_ import if_
from mdf_loops.ops.loop import loop
from mdf_loops.ops.scan import ScanAttributes, scan, scan_batched

__all__ = [
    "IterationGuard",
    "Limits",
    "current_limits",
    "limits",
    "observe_iterations",
    "if_",
    "loop",
    "ScanAttributes",
    "scan",
    "scan_batched",
]
