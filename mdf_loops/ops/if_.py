"""ONNX ``If`` semantics over two branch callables.

Reference semantics::

    return then_branch() if bool(cond) else else_branch()

Both branches read their inputs from the enclosing scope; they take no formal inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from mdf_loops.errors import LoopError

__all__ = ["if_"]

Branch = Callable[[list, "int | None"], list]


def if_(cond: Any, then_branch: Branch, else_branch: Branch) -> list:
    array = np.asarray(cond)
    if array.size != 1:
        raise LoopError(f"If condition must hold one boolean, got shape {array.shape}")
    return (then_branch if bool(array.reshape(())) else else_branch)([], None)
