"""Bounds on what a run may do, and what must hold before an untrusted model runs.

:func:`limits` changes the work limits (:class:`Limits`: iterations, nesting, sizes)
for a block; :func:`onnx_file_access` lets ONNX files read external tensor data from
a folder; :func:`run_limited` is :func:`mdf_loops.run` in a child process the kernel
stops when it runs out of time or memory. The checks of a model's expressions and
structure run inside :func:`mdf_loops.run` and :func:`mdf_loops.validate`; see
docs/safety.md.
"""

from mdf_loops.ops.common import Limits, limits
from mdf_loops.safety.onnx_files import onnx_file_access
from mdf_loops.safety.sandbox import run_limited

__all__ = ["Limits", "limits", "onnx_file_access", "run_limited"]
