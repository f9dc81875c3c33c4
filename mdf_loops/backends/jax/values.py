"""The values the JAX lowering passes between ONNX nodes, and the rules for them.

A value is *concrete* (a numpy array, known while the function is traced: an
initializer, a ``Constant``, a shape) or *traced* (a JAX array inside ``jit``).
An operator whose inputs are all concrete is computed with numpy, so shapes and
indices that ONNX computes at run time stay known to JAX (partial evaluation);
an operator that needs a concrete value and gets a traced one raises
:class:`NeedsStatic`, and the compiler retries with more graph inputs taken as
compile-time constants (:mod:`mdf_loops.backends.jax.compiled`).

Sequences are Python lists of values; optionals are :class:`Opt`; the scan
outputs of a ``Loop`` whose length is known only at run time are :class:`Ragged`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

__all__ = [
    "NeedsStatic",
    "Opt",
    "Ragged",
    "is_concrete",
    "concrete",
    "xp_of",
    "np_dtype",
    "label",
    "one_boolean",
    "structured",
    "same_types",
    "BUFFER_FULL",
    "LIMIT_PASSED",
    "SIZE_PASSED",
]

#: bits of the flag a compiled function returns: a Loop's scan-output buffer was too
#: short (compile again with a longer one), a Loop passed ``max_iterations``, or a Loop's
#: scan outputs would pass ``max_elements`` (its buffer holds no more); a code of
#: :mod:`.totals` above them
BUFFER_FULL, LIMIT_PASSED, SIZE_PASSED = 1, 2, 4


class NeedsStatic(Exception):
    """An operator needs a value at trace time (a shape, an index) but got a traced one."""

    def __init__(self, where: str, what: str):
        self.where, self.what = where, what
        super().__init__(f"{where}: {what}")


@dataclass(frozen=True)
class Opt:
    """An ONNX optional: ``value`` is None when empty."""

    value: Any
    elem_type: Any = None


@dataclass(frozen=True)
class Ragged:
    """Scan outputs of a Loop stopped by a run-time condition: ``buffer[:count]`` is the value."""

    buffer: Any
    count: Any
    #: why the length is only known at run time, and what would fix it (for refusals)
    why: str = ""


def is_concrete(value: Any) -> bool:
    """True for values numpy computes with (known while tracing)."""
    return isinstance(value, (np.ndarray, np.generic))


def concrete(value: Any, where: str, what: str) -> np.ndarray:
    """``value`` as a numpy array, or :class:`NeedsStatic` when it is only known at run time."""
    if is_concrete(value):
        return np.asarray(value)
    raise NeedsStatic(where, f"{what} must be known at compile time")


def xp_of(*values: Any):
    """numpy when every value is concrete, else ``jax.numpy``."""
    if all(v is None or is_concrete(v) for v in values):
        return np
    import jax.numpy as jnp

    return jnp


def np_dtype(elem_type: int) -> np.dtype:
    """The numpy dtype of an ONNX element type (bfloat16 through ml_dtypes)."""
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))


def one_boolean(value: Any, where: str, what: str, iteration: int | None = None) -> Any:
    """``value``, a condition (concrete or traced), when it holds one element; else the
    :class:`~mdf_loops.errors.LoopError` the other backends raise (its shape is known
    while tracing, so a traced condition is checked too)."""
    from mdf_loops.ops.loop import not_one_boolean

    shape = tuple(value.shape) if hasattr(value, "shape") else np.shape(value)
    if int(np.prod(shape)) != 1:
        raise not_one_boolean(what, f"shape {shape}", iteration, where)
    return value


def label(node: onnx.NodeProto) -> str:
    """How errors name an ONNX node: its MDF node when the exporter recorded one."""
    doc = node.doc_string or ""
    if doc.startswith("MDF node "):
        return f"node '{doc[len('MDF node ') :]}' ({node.op_type})"
    name = node.name or (node.output[0] if node.output else "?")
    return f"node '{name}' ({node.op_type})"


def structured(values: list, where: str) -> list:
    """Body outputs as JAX arrays; sequences, optionals and ragged values cannot cross lax."""
    import jax.numpy as jnp

    for v in values:
        if isinstance(v, (list, Opt, Ragged)) or v is None:
            raise NeedsStatic(
                where,
                "a loop body or branch returns a sequence, an optional or "
                "a Loop scan output of run-time length",
            )
    return [jnp.asarray(v) for v in values]


def same_types(where: str, new, old) -> None:
    """Raise :class:`NeedsStatic` when a loop-carried value changes shape or dtype."""
    for k, (a, b) in enumerate(zip(new, old, strict=True)):
        if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
            raise NeedsStatic(
                where,
                f"loop-carried value {k} changes from "
                f"{b.dtype}{list(b.shape)} to {a.dtype}{list(a.shape)}",
            )
