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
from collections.abc import Callable
from typing import Any

from mdf_loops.backends.python.compiled import CompiledTimeLoop, LoopSource, _scalar
from mdf_loops.safety.guarded_code import guarded_function
from mdf_loops.safety.untrusted_values import FLOATS, MAX_INTEGER_BITS

__all__ = ["guarded_time_loop"]

#: the writer's helpers that a step's expressions call as written (``_where`` is guarded)
_HELPERS = frozenset({"_where", "_scalar"})


def guarded_time_loop(code: LoopSource) -> CompiledTimeLoop:
    """The loop of ``code`` with its model's expressions evaluated as an untrusted model's are."""
    namespace = {"_scalar": _scalar}
    proven: dict[int, str] = {}  # the carried values the proof assumes: floats or numbers

    def kinds(tree: ast.Module) -> dict[int, str | None]:
        found, carried = float_kinds(tree, code.n_carried)
        proven.update(carried)
        return found

    tree = code.tree  # guarded twice where the proof's assumption can fail: not changed
    typed = guarded_function(tree, "time_loop", namespace, _model_parts, _HELPERS, kinds)
    if not proven:
        return CompiledTimeLoop(code, typed)
    plain: list[Callable[..., Any]] = []  # every operator guarded: made when first needed
    floats = [3 + k for k, kind in proven.items() if kind == "float"]  # after start, stop, cond
    numbers = [3 + k for k, kind in proven.items() if kind == "number"]

    def run(*args: Any) -> Any:
        if all(type(args[p]) in FLOATS for p in floats) and all(
            _is_number(args[p]) for p in numbers
        ):
            return typed(*args)
        if not plain:
            plain.append(guarded_function(tree, "time_loop", namespace, _model_parts, _HELPERS))
        return plain[0](*args)

    return CompiledTimeLoop(code, run)


_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_INTEGER_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult)
#: kinds of bounded numbers: with a float, ``+ - * /`` give a float
_NUMBERS = frozenset({"float", "int", "number"})
_CONSTANT_KINDS = {float: "float", int: "int", bool: "bool"}


def _is_number(value: Any) -> bool:
    """A float, or an integer as bounded as the literals the guard lets through."""
    kind = type(value)
    return kind in FLOATS or (kind is int and value.bit_length() <= MAX_INTEGER_BITS)


def float_kinds(tree: ast.Module, n_carried: int) -> tuple[dict[int, str | None], dict[int, str]]:
    """Which expressions of the time-loop function in ``tree`` are proven floats, ints
    (the step number, integer literals), numbers (a carried value that is a bounded int
    or a float) or bools, and what the proof assumes of the carried values (``c0``...)
    when the function is called: ``{k: "float"}``, or ``"number"`` for one that a step
    may hand on as a bounded integer (a literal, the step number).

    The assumption is the largest set of carried values that every step gives back as
    floats or numbers again (a fixed point: first all floats, then what each step
    proves, until it holds); each step's variables are assigned once, in order."""
    function = next(s for s in tree.body if isinstance(s, ast.FunctionDef))
    assumed = dict.fromkeys(range(n_carried), "float")
    while True:
        kinds: dict[int, str | None] = {}
        env: dict[str, str | None] = {f"c{k}": kind for k, kind in assumed.items()}
        _statements(function.body, env, kinds, assumed)
        kept = {k: env[f"c{k}"] for k in assumed if env.get(f"c{k}") in ("float", "number")}
        if kept == assumed:
            return kinds, {k: str(kind) for k, kind in kept.items()}
        assumed = {k: str(kind) for k, kind in kept.items()}


def _statements(
    body: list[ast.stmt],
    env: dict[str, str | None],
    kinds: dict[int, str | None],
    assumed: dict[int, str],
) -> None:
    """Walk ``body`` in order; a block (the first step, the steady steps) must hand every
    carried value of ``assumed`` on as it entered (a float as a float; a number as a
    float or a bounded int), else ``env`` marks it a number or drops it."""
    for statement in body:
        if isinstance(statement, ast.Assign):
            _assign(statement, env, kinds)
        elif isinstance(statement, (ast.If, ast.For)):
            inner = dict(env)
            inner["iteration"] = "int"
            _statements(statement.body, inner, kinds, assumed)
            for k in assumed:  # what leaves the block must be what entered it
                name = f"c{k}"
                left = inner.get(name)
                if left != "float" and env.get(name) is not None:
                    env[name] = "number" if left in _NUMBERS else None
        elif isinstance(statement, ast.Expr):
            _kind(statement.value, env, kinds)


def _assign(
    statement: ast.Assign, env: dict[str, str | None], kinds: dict[int, str | None]
) -> None:
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


def _kind(node: ast.expr, env: dict[str, str | None], kinds: dict[int, str | None]) -> str | None:
    """``"float"``, ``"int"`` or ``"bool"`` where ``node`` is proven one, else None
    (recorded in ``kinds`` for ``node`` and every expression inside it)."""
    kind: str | None = None
    cls, fields = node.__class__, node.__dict__  # the commonest classes first, by identity
    if cls is ast.Name:
        kind = env.get(fields["id"])
    elif cls is ast.Constant:
        kind = _CONSTANT_KINDS.get(type(fields["value"]))
    elif cls is ast.BinOp:
        left, right = _kind(fields["left"], env, kinds), _kind(fields["right"], env, kinds)
        op = fields["op"].__class__
        numbers = left in _NUMBERS and right in _NUMBERS
        if op in _ARITHMETIC and numbers and ("float" in (left, right) or op is ast.Div):
            kind = "float"  # a float and a bounded number, or a quotient: a float
        elif op in _INTEGER_ARITHMETIC and numbers:  # guarded: the guard sizes an integer
            kind = "int" if left == right == "int" else "number"
        elif op is ast.Pow and left == "float" and right == "int":
            kind = "float"  # a float to an integer power: a float (never complex)
    elif isinstance(node, ast.UnaryOp):
        operand = _kind(node.operand, env, kinds)
        if isinstance(node.op, (ast.USub, ast.UAdd)) and operand in _NUMBERS:
            kind = operand  # a bounded number negated: as bounded, of its kind
    elif isinstance(node, ast.Compare):
        for value in (node.left, *node.comparators):
            _kind(value, env, kinds)
        kind = "bool"
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
