"""The python backend for a time loop that is not trusted: its steps with the interpreter's rules.

:func:`guarded_time_loop` compiles a time-loop function (a :class:`LoopSource`;
the plain function is never compiled) so that every expression
of the model in it (the body's parameters and ports, the initial values, the values
appended to the outputs) runs through :func:`mdf_loops.safety.guarded_code.guarded_function`:
numbers and numeric arrays only, every result sized before it is made, only the
size-planned functions callable. The loop around them (steps, chunks, appends) is the
writer's and stays as written.

Where the carried values are floats, most of a step's arithmetic is proven to stay
floats (:func:`float_kinds`): Python's ``+ - * /`` on floats and bounded integers (the
step number, integer literals the guard has checked) give floats, so those operators
run inline, as their guard would run them, and a float step costs about what the
trusted loop costs. A carried value may also be a *number*: a bounded integer on some
steps and a float on the others, as modeci-mdf's models often start (``"90"``, then
``T + dT_dt * dt``); with a float it makes a float too. The proof assumes the carried
values it was made for are floats (or numbers); each call checks that assumption on
the values it is given and runs the loop with every operator guarded where it does not
hold.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import Any

from mdf_loops.backends.python.compiled import CompiledTimeLoop, LoopSource, _scalar, _whole
from mdf_loops.ops.common import current_limits
from mdf_loops.safety.guarded_code import guarded_function
from mdf_loops.safety.proven_kinds import (
    NUMBERS,
    ORDERS,
    ArrayKind,
    Kind,
    array_result,
    largest_array,
)
from mdf_loops.safety.untrusted_values import FLOATS, MAX_INTEGER_BITS

__all__ = ["guarded_time_loop"]

#: the writer's helpers that a step's expressions call as written (``_where`` is guarded)
_HELPERS = frozenset({"_where", "_scalar", "_whole"})


def guarded_time_loop(code: LoopSource) -> CompiledTimeLoop:
    """The loop of ``code`` with its model's expressions evaluated as an untrusted model's are."""
    namespace = {"_scalar": _scalar, "_whole": _whole}
    proven: dict[int, Kind] = {}  # the carried values the proof assumes: floats, numbers, arrays
    largest = [0]  # the most elements of a proven array: at most max_elements when run

    def kinds(tree: ast.Module) -> dict[int, Kind]:
        found, carried = float_kinds(tree, code.n_carried, code.initial_shapes)
        proven.update(carried)
        largest[0] = largest_array(found.values())
        return found

    tree = code.tree  # guarded twice where the proof's assumption can fail: not changed
    typed = guarded_function(tree, "time_loop", namespace, _model_parts, _HELPERS, kinds)
    if not proven:
        return CompiledTimeLoop(code, typed)
    plain: list[Callable[..., Any]] = []  # every operator guarded: made when first needed
    floats = [3 + k for k, kind in proven.items() if kind == "float"]  # after start, stop, cond
    numbers = [3 + k for k, kind in proven.items() if kind == "number"]
    arrays = [(3 + k, kind) for k, kind in proven.items() if isinstance(kind, ArrayKind)]

    def run(*args: Any) -> Any:
        if (
            all(type(args[p]) in FLOATS for p in floats)
            and all(_is_number(args[p]) for p in numbers)
            and all(kind.holds(args[p]) for p, kind in arrays)
            and largest[0] <= current_limits().max_elements
        ):
            return typed(*args)
        if not plain:
            plain.append(guarded_function(tree, "time_loop", namespace, _model_parts, _HELPERS))
        return plain[0](*args)

    return CompiledTimeLoop(code, run)


_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_INTEGER_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult)
_CONSTANT_KINDS = {float: "float", int: "int", bool: "bool"}


def _is_number(value: Any) -> bool:
    """A float, or an integer as bounded as the literals the guard lets through."""
    kind = type(value)
    return kind in FLOATS or (kind is int and value.bit_length() <= MAX_INTEGER_BITS)


def float_kinds(
    tree: ast.Module, n_carried: int, initial_shapes: Sequence[tuple[int, ...] | None] = ()
) -> tuple[dict[int, Kind], dict[int, Kind]]:
    """Which expressions of the time-loop function in ``tree`` are proven floats, ints
    (the step number, integer literals), numbers (a carried value that is a bounded int
    or a float), bools or numeric arrays of a known shape
    (:class:`~mdf_loops.safety.proven_kinds.ArrayKind`), and what the proof assumes of
    the carried values (``c0``...) when the function is called: ``{k: "float"}``,
    ``"number"`` for one that a step may hand on as a bounded integer (a literal, the
    step number), or an array of the shape of its initial value (``initial_shapes``:
    per carried value, the shape of its initial value where that is a numeric array).

    The assumption is the largest set of carried values that every step gives back as
    they came (a fixed point: first all floats or arrays, then what each step proves,
    until it holds); each step's variables are assigned once, in order."""
    function = next(s for s in tree.body if isinstance(s, ast.FunctionDef))
    shapes = list(initial_shapes) + [None] * (n_carried - len(initial_shapes))
    assumed: dict[int, Kind] = {
        k: "float" if shape is None else ArrayKind(shape) for k, shape in enumerate(shapes)
    }
    while True:
        kinds: dict[int, Kind] = {}
        env: dict[str, Kind] = {f"c{k}": kind for k, kind in assumed.items()}
        _statements(function.body, env, kinds, assumed)
        kept = {k: env[f"c{k}"] for k in assumed if _carried(env.get(f"c{k}"))}
        if kept == assumed:
            return kinds, kept
        assumed = kept


def _carried(kind: Kind) -> bool:
    """Whether a carried value of this kind can be checked when the function is called."""
    return kind in ("float", "number") or isinstance(kind, ArrayKind)


def _statements(
    body: list[ast.stmt],
    env: dict[str, Kind],
    kinds: dict[int, Kind],
    assumed: dict[int, Kind],
) -> None:
    """Walk ``body`` in order; a block (the first step, the steady steps) must hand every
    carried value of ``assumed`` on as it entered (a float as a float; a number as a
    float or a bounded int; an array as an array of its shape), else ``env`` marks it a
    number or drops it."""
    for statement in body:
        if isinstance(statement, ast.Assign):
            _assign(statement, env, kinds)
        elif isinstance(statement, (ast.If, ast.For)):
            inner = dict(env)
            inner["iteration"] = "int"
            _statements(statement.body, inner, kinds, assumed)
            for k in assumed:  # what leaves the block must be what entered it
                name = f"c{k}"
                left, entered = inner.get(name), env.get(name)
                if isinstance(entered, ArrayKind):
                    env[name] = entered if left == entered else None
                elif left != "float" and entered is not None:
                    env[name] = "number" if left in NUMBERS else None
        elif isinstance(statement, ast.Expr):
            _kind(statement.value, env, kinds)


def _assign(statement: ast.Assign, env: dict[str, Kind], kinds: dict[int, Kind]) -> None:
    value, target = statement.value, statement.targets[0]
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
        found = [_kind(v, env, kinds) for v in value.elts]
        for name, kind in zip(target.elts, found, strict=True):
            if isinstance(name, ast.Name):
                env[name.id] = kind
        return
    kind = _kind(value, env, kinds)
    for each in statement.targets:
        if isinstance(each, ast.Name):
            env[each.id] = "int" if each.id == "iteration" and kind == "int" else kind
        elif isinstance(each, ast.Tuple):
            for name in each.elts:
                if isinstance(name, ast.Name):
                    env[name.id] = None


def _kind(node: ast.expr, env: dict[str, Kind], kinds: dict[int, Kind]) -> Kind:
    """``"float"``, ``"int"``, ``"bool"`` or an array's kind where ``node`` is proven one,
    else None (recorded in ``kinds`` for ``node`` and every expression inside it)."""
    kind: Kind = None
    cls, fields = node.__class__, node.__dict__  # the commonest classes first, by identity
    if cls is ast.Name:
        kind = env.get(fields["id"])
    elif cls is ast.Constant:
        kind = _CONSTANT_KINDS.get(type(fields["value"]))
    elif cls is ast.BinOp:
        left, right = _kind(fields["left"], env, kinds), _kind(fields["right"], env, kinds)
        op = fields["op"].__class__
        numbers = left in NUMBERS and right in NUMBERS
        if op in _ARITHMETIC and numbers and ("float" in (left, right) or op is ast.Div):
            kind = "float"  # a float and a bounded number, or a quotient: a float
        elif op in _INTEGER_ARITHMETIC and numbers:  # guarded: the guard sizes an integer
            kind = "int" if left == right == "int" else "number"
        elif op is ast.Pow and left == "float" and right == "int":
            kind = "float"  # a float to an integer power: a float (never complex)
        elif op in _ARITHMETIC:  # numeric arrays and numbers: an array of their broadcast
            kind = array_result(left, right)
        elif op is ast.MatMult:
            kind = _matmul_kind(left, right)
    elif isinstance(node, ast.UnaryOp):
        operand = _kind(node.operand, env, kinds)
        if isinstance(node.op, (ast.USub, ast.UAdd)) and (
            operand in NUMBERS or isinstance(operand, ArrayKind)
        ):
            kind = operand  # negated: as bounded, of its kind (an array of its shape)
    elif isinstance(node, ast.Compare):
        found = [_kind(value, env, kinds) for value in (node.left, *node.comparators)]
        kind = "bool"
        if len(found) == 2 and isinstance(node.ops[0], ORDERS):  # arrays: booleans
            kind = array_result(*found) or kind
    elif isinstance(node, ast.Call) and _is_where(node):
        found = [_kind(arg, env, kinds) for arg in node.args]
        kind = array_result(*found, scalars=NUMBERS | {"bool"})
    elif isinstance(node, ast.Call) and _is_array_literal(node):
        kind = _literal_kind(node.args[0])
    elif isinstance(node, ast.IfExp):
        _kind(node.test, env, kinds)
        body, orelse = _kind(node.body, env, kinds), _kind(node.orelse, env, kinds)
        kind = body if body == orelse == "float" else None
    else:  # every expression in its fields (not a keyword argument's value), in order
        for name in node._fields:
            child = fields.get(name)
            if isinstance(child, ast.expr):
                _kind(child, env, kinds)
            elif child.__class__ is list:
                for item in child:
                    if isinstance(item, ast.expr):
                        _kind(item, env, kinds)
    kinds[id(node)] = kind
    return kind


def _matmul_kind(left: Kind, right: Kind) -> ArrayKind | None:
    """``a @ b`` of a matrix and a vector or matrix, or a vector and a matrix (numpy's
    shapes; a vector with a vector is a 0-d array, not a proven kind)."""
    if not (isinstance(left, ArrayKind) and isinstance(right, ArrayKind)):
        return None
    a, b = left.shape, right.shape
    if len(a) == 2 and len(b) in (1, 2) and a[1] == b[0]:
        return ArrayKind((a[0], *b[1:]))
    if len(a) == 1 and len(b) == 2 and a[0] == b[0]:
        return ArrayKind((b[1],))
    return None


def _is_where(node: ast.Call) -> bool:
    """The writer's ``_where(condition, a, b)``."""
    return (
        isinstance(node.func, ast.Name)
        and node.func.id == "_where"
        and len(node.args) == 3
        and not node.keywords
    )


def _is_array_literal(node: ast.Call) -> bool:
    """``numpy.array([...])``: one list or tuple written out, nothing else."""
    func = node.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "array"
        and isinstance(func.value, ast.Name)
        and func.value.id in ("numpy", "np")
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], (ast.List, ast.Tuple))
    )


def _literal_kind(literal: ast.expr) -> ArrayKind | None:
    """The array ``numpy.array`` makes of a literal of nested lists of int, float or bool
    constants, all rows alike (else None)."""
    shape: list[int] = []
    level = [literal]
    while all(isinstance(item, (ast.List, ast.Tuple)) for item in level):
        lengths = {len(item.elts) for item in level}  # type: ignore[attr-defined]
        if len(lengths) != 1:
            return None  # ragged: numpy refuses it
        shape.append(lengths.pop())
        level = [element for item in level for element in item.elts]  # type: ignore[attr-defined]
        if not level:
            break
    if not all(_is_number_literal(item) for item in level):
        return None
    return ArrayKind(tuple(shape))


def _is_number_literal(node: ast.expr) -> bool:
    """A bool, a float or an int64 written out (``-70`` is the literal negated)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    if not isinstance(node, ast.Constant):
        return False
    value = node.value
    return type(value) in (bool, float) or (type(value) is int and -(2**63) <= value < 2**63)


def _model_parts(statement: ast.stmt) -> tuple[list[ast.expr], str]:
    """The expressions of ``statement`` that come from the model and the element they
    belong to: the values assigned (except the bound ``sK.append`` methods) and the
    values recorded in the scans (``sK[iteration] = x``, ``_appendK(x)``)."""
    if isinstance(statement, ast.Assign):
        if isinstance(statement.targets[0], ast.Subscript):  # a scan's value at its step
            return [statement.value], "a recorded value"
        names = [t.id for t in statement.targets if isinstance(t, ast.Name)]
        for name in names:
            if name.startswith("_append"):
                return [], ""
        return [statement.value], _element(names[0] if names else "the carried values")
    if (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Call)
        and isinstance(statement.value.func, ast.Name)
        and statement.value.func.id.startswith("_append")
    ):
        return list(statement.value.args), "a recorded value"
    return [], ""


def _element(variable: str) -> str:
    """``v_<node>__<name>`` (the writer's variables) as the model element it holds."""
    node, _, name = variable[2:].partition("__")
    if variable.startswith("v_") and name:
        return f"node '{node}' '{name}' (python backend)"
    return f"'{variable}' (python backend)"
