"""The torch backend: an MDF model run eagerly as torch operations, and trained in torch.

Needs ``mdf-loops[torch]``. Entry points: :func:`to_pytorch` (a trainable
``torch.nn.Module``, :mod:`.module`) and :func:`.compiled.compile` (for
``mdf_loops.run(..., backend="torch")``). torch is imported only when one of them
is called, so this package imports without it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from mdf_loops.errors import CompileError

if TYPE_CHECKING:
    from modeci_mdf.mdf import Model

    from mdf_loops.backends.torch.module import MdfModule

__all__ = ["to_pytorch"]


def to_pytorch(model: Model | str | os.PathLike, *, graph: str | None = None) -> MdfModule:
    """``model``'s graph as a ``torch.nn.Module`` whose constants torch can train.

    ``m(**inputs)`` (tensors or arrays by the graph's input names, or positional in the
    graph's input order) returns ``{output name: torch.Tensor}``. Scan, Loop and If run
    as loops in torch at any length, bounded by ``max_iterations``
    (``mdf_loops.safety.limits``). The model's floating-point constants (node
    parameters such as ``tau``, ``onnx::Constant`` weights) are ``m``'s
    ``nn.Parameter``\\ s; ``m.to_mdf()`` returns a copy of the model with their current
    values. docs/pytorch.md.

    Raises :class:`~mdf_loops.errors.CompileError` naming the node and operator when a
    node has no torch form, or when torch is not installed.
    """
    try:
        import torch  # noqa: F401
    except ImportError:
        raise CompileError("to_pytorch needs torch: pip install 'mdf-loops[torch]'") from None
    from mdf_loops.backends.torch.module import to_pytorch as build

    return build(model, graph=graph)
