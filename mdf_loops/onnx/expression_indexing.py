"""Indexing in MDF value expressions as ONNX nodes, and tuple and list displays.

A subscript of a tensor becomes ``Slice`` (and ``Squeeze``) for constant indices and
slices, ``Gather`` for a computed index; a constant tensor is indexed now. A tuple or
list display (``a, b, t + h``) whose items are not all constants is kept item by item
(:class:`Items`), as Python keeps it: a constant index or a slice picks items of any
shapes, any other use stacks them (numpy's ``array``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from mdf_loops.onnx.builder import Weak, onnx_dtype
from mdf_loops.onnx.expression_tables import INT64_MAX, INT64_MIN

if TYPE_CHECKING:
    from mdf_loops.onnx.expressions import ExpressionTranslator

__all__ = ["Items", "stack_items", "translate_subscript"]


@dataclass(frozen=True)
class Items:
    """A tuple or list display (``a, b, t + h``) of values not all known at export time,
    kept item by item as Python keeps it: a constant index (``f[0]``) or a slice picks
    items, whatever their shapes; any other use stacks them into one tensor, as numpy's
    ``array`` does, which needs items of one shape."""

    values: tuple[Any, ...]


def _differ(a: tuple | None, b: tuple | None) -> bool:
    """True when shapes ``a`` and ``b`` (None: not known) are known to differ."""
    if a is None or b is None:
        return False
    if len(a) != len(b):
        return True
    return any(x is not None and y is not None and x != y for x, y in zip(a, b, strict=True))


def _shape_text(shape: tuple | None) -> str:
    """``[3, ?]``: a shape as the messages write it (``?`` for what is not known)."""
    if shape is None:
        return "[...]"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def stack_items(translator: ExpressionTranslator, items: Items, node: ast.AST | None) -> str:
    """The items as one tensor on a new first axis; they must have one shape."""
    if not items.values:  # numpy's array([])
        return translator.b.constant(np.zeros(0))
    shapes = [
        translator.b.shape(i) if isinstance(i, str) else i.array().shape for i in items.values
    ]
    if any(_differ(shapes[0], other) for other in shapes[1:]):
        written = ", ".join(_shape_text(s) for s in shapes)
        raise translator.fail(
            node,
            f"a tuple or list of values of different shapes ({written}) is not one "
            "array; index it with a constant (x[0]) where it is used",
        )
    values = translator.common(list(items.values))
    axes = translator.b.constant(np.array([0], dtype=np.int64))
    parts = [translator.b.op("Unsqueeze", [i, axes])[0] for i in values]
    return translator.b.op("Concat", parts, axis=0)[0]


def _constant_item(
    translator: ExpressionTranslator, node: ast.AST, value: Weak, parts: list
) -> Weak:
    """``value`` (a constant) indexed by constant ``parts``, at export time."""
    constant = value.array()
    try:
        return Weak(constant[tuple(p if isinstance(p, slice) else int(p.value) for p in parts)])
    except (IndexError, TypeError, ValueError) as exc:  # numpy's words for a bad index
        raise translator.fail(
            node, f"this index does not fit a constant of shape {list(constant.shape)}: {exc}"
        ) from None


def translate_subscript(translator: ExpressionTranslator, node: ast.Subscript) -> Any:
    """ONNX value name (or :class:`Weak`, or :class:`Items`) of the subscript ``node``."""
    value = translator.evaluate(node.value)
    index = node.slice
    if isinstance(index, ast.Tuple) and not index.elts:  # x[()]: x itself (numpy: a scalar)
        return translator.stack(value, node.value) if isinstance(value, Items) else value
    items = list(index.elts) if isinstance(index, ast.Tuple) else [index]
    parts = [
        _slice(translator, item) if isinstance(item, ast.Slice) else translator.visit(item)
        for item in items
    ]
    if isinstance(value, Items):
        if not isinstance(index, ast.Tuple) and _is_position(parts[0]):
            return _pick(translator, node, value, parts[0])
        value = translator.stack(value, node.value)
    computed = [p for p in parts if not isinstance(p, (slice, Weak))]
    if isinstance(value, Weak) and not computed:
        return _constant_item(translator, node, value, parts)
    value = translator.b.strong(value)
    if computed:
        if len(parts) != 1:
            raise translator.fail(node, "a computed index among several indices")
        position = translator.b.op("Cast", [computed[0]], to=onnx_dtype(np.int64))[0]
        return translator.b.op("Gather", [value, position], axis=0)[0]
    squeeze: list[int] = []
    starts, ends, steps = [], [], []
    for axis, part in enumerate(parts):
        if isinstance(part, slice):
            step = 1 if part.step is None else part.step
            if step == 0:
                raise translator.fail(node, "a slice step of zero")
            first, past = (INT64_MAX, INT64_MIN) if step < 0 else (0, INT64_MAX)
            starts.append(first if part.start is None else part.start)
            ends.append(past if part.stop is None else part.stop)
            steps.append(step)
        else:
            k = int(part.value)
            starts.append(k)
            ends.append(k + 1 if k != -1 else INT64_MAX)
            steps.append(1)
            squeeze.append(axis)
    const = translator.b.constant
    out = translator.b.op(
        "Slice",
        [
            value,
            const(np.array(starts, np.int64)),
            const(np.array(ends, np.int64)),
            const(np.arange(len(parts), dtype=np.int64)),
            const(np.array(steps, np.int64)),
        ],
    )[0]
    if squeeze:
        out = translator.b.op("Squeeze", [out, const(np.array(squeeze, np.int64))])[0]
    return out


def _is_position(part: Any) -> bool:
    """A slice or a constant integer: Python's own indexing of a tuple or list."""
    if isinstance(part, slice):
        return True
    return isinstance(part, Weak) and part.array().ndim == 0 and part.array().dtype.kind in "iu"


def _pick(
    translator: ExpressionTranslator, node: ast.Subscript, items: Items, part: slice | Weak
) -> Any:
    """The item (or the items of a slice) of a tuple or list at a constant position."""
    if isinstance(part, slice):
        return Items(items.values[part])
    k = int(part.value)
    if not -len(items.values) <= k < len(items.values):
        raise translator.fail(node, f"index {k} of {len(items.values)} items")
    return items.values[k]


def _slice(translator: ExpressionTranslator, item: ast.Slice) -> slice:
    return slice(
        *(
            None if part is None else _int(translator, part)
            for part in (item.lower, item.upper, item.step)
        )
    )


def _int(translator: ExpressionTranslator, node: ast.AST) -> int:
    value = translator.visit(node)
    if not isinstance(value, Weak):
        raise translator.fail(node, "a computed slice bound")
    return int(value.value)
