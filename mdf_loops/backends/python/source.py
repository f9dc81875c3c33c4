"""The text of the ``time_loop`` function: the first step, a loop over the rest, the scans.

The first step is written out separately, so that the selections of the initial values
fold away; the types of the carried values are assumed from the initial values and
kept where every step returns them (:mod:`~mdf_loops.backends.python.scalar_types`).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from modeci_mdf.mdf import Node

from mdf_loops.backends.python.simplify import simplify
from mdf_loops.backends.python.writer import variable
from mdf_loops.timeloop.spec import LOOP_FUNCTION

__all__ = ["function_source", "scan_kinds"]

#: ONNX element type -> array typecode, for one-dimensional float64 and int64 series
_ARRAY_CODES: dict[Any, str] = {1: "d", 11: "d", 7: "q"}


def scan_kinds(loop: Node, n_scan: int) -> list[str | None]:
    """Per scan output: the ``array`` typecode (``'d'``/``'q'``) for float64/int64 scalars,
    else None (a list).

    An ``array`` holds 8 bytes a step where a list of Python numbers holds 32.
    """
    by_index = {}
    for port in loop.output_ports:
        value = (port.value or "").strip()
        if value.startswith(f"{LOOP_FUNCTION}[") and value.endswith("]"):
            by_index[int(value[len(LOOP_FUNCTION) + 1 : -1])] = port
    first = min(by_index) if by_index else 0
    kinds: list[str | None] = []
    for k in range(n_scan):
        port = by_index.get(first + k)
        tensor = (
            (((port.metadata or {}).get("onnx_type") or {}).get("tensorType") or {})
            if port is not None
            else {}
        )
        dims = (tensor.get("shape") or {}).get("dim") or []
        code = _ARRAY_CODES.get(tensor.get("elemType")) if len(dims) == 1 else None
        kinds.append(None if tensor.get("elemType") == 1 else code)
    return kinds


def function_source(
    outer: Sequence[str],
    n_carried: int,
    n_scan: int,
    first: Sequence[str],
    rest: Sequence[str],
    tail: Sequence[str],
    initial_types: Sequence[str | None],
) -> str:
    """Python source of ``time_loop(start, stop, cond, *carried, *series, *scans)``.

    It runs the steps ``start`` to ``stop`` (the first written out when ``start`` is 0),
    appends to the scan outputs it is given, and returns ``(cond, carried)``: a long
    simulation runs in chunks, each continuing from the last. ``first``, ``rest``: the
    written-out steps; ``tail``: their ending (``StepWriter.tail``); ``outer``: series.
    """
    carried = [f"c{k}" for k in range(n_carried)]
    args = ", ".join(
        [
            "start",
            "stop",
            "cond",
            *carried,
            *[variable("outer", p) for p in outer],
            *[f"s{k}" for k in range(n_scan)],
            "_where=_where",
            "_scalar=_scalar",
        ]
    )
    lines = [f"def time_loop({args}):"]
    lines.append("    iteration = 0")
    # the scans' append methods bound once (an attribute lookup a step and value less)
    lines += [f"    _append{k} = s{k}.append" for k in range(n_scan)]
    first, rest, tail = list(first), list(rest), list(tail)
    # the carried types: assumed from the initial values, kept where every step returns them
    assumed = list(initial_types)
    while True:
        first_code, first_out = simplify(first + tail, _env(initial_types))
        rest_code, rest_out = simplify(rest + tail, _env(assumed))
        agreed = [
            a if a == f == r else None for a, f, r in zip(assumed, first_out, rest_out, strict=True)
        ]
        if agreed == assumed:
            break
        assumed = agreed
    appends = {f"s{k}.append(": f"_append{k}(" for k in range(n_scan)}
    first_code, rest_code = _bound(first_code, appends), _bound(rest_code, appends)
    lines.append("    if start == 0 and stop > 0 and cond:")
    lines += ["        " + line for line in first_code]
    lines.append("        start = 1")
    steady = _without_steady_condition(rest_code)
    if steady is None:
        lines.append("    for iteration in range(max(start, 1), stop):")
        lines.append("        if not cond:")
        lines.append("            break")
    else:  # the condition is tested once: the first step may have ended the loop
        lines.append("    for iteration in range(max(start, 1), stop if cond else 0):")
    lines += ["        " + line for line in (rest_code if steady is None else steady)]
    lines.append(f"    return cond, [{', '.join(carried)}]")
    return "\n".join(lines) + "\n"


def _without_steady_condition(code: list[str]) -> list[str] | None:
    """The steps after the first without their condition, when a step hands on the
    condition it was given (no termination, no ``until``): ``cond, c0 = (cond, x)``
    becomes ``c0 = x`` and the loop needs no test. None when the condition can change."""
    out, found = [], False
    for line in code:
        tree = ast.parse(line).body[0]
        if (
            isinstance(tree, ast.Assign)
            and isinstance(tree.targets[0], ast.Tuple)
            and isinstance(tree.value, ast.Tuple)
            and [getattr(t, "id", None) for t in tree.targets[0].elts[:1]] == ["cond"]
        ):
            first = tree.value.elts[0]
            if not (isinstance(first, ast.Name) and first.id == "cond"):
                return None
            found = True
            targets, values = tree.targets[0].elts[1:], tree.value.elts[1:]
            if targets:
                out.append(
                    ast.unparse(
                        ast.Assign(
                            targets=[ast.Tuple(elts=targets, ctx=ast.Store())],
                            value=ast.Tuple(elts=values, ctx=ast.Load()),
                            lineno=0,
                        )
                    )
                )
            continue
        out.append(line)
    return out if found else None


def _bound(code: list[str], appends: dict[str, str]) -> list[str]:
    """``sK.append(x)`` statements (the writer's tail) as calls of the bound method."""
    out = []
    for line in code:
        head = line.split("(", 1)[0] + "("
        out.append(appends[head] + line[len(head) :] if head in appends else line)
    return out


def _env(carried_types: Sequence[str | None]) -> dict[str, str | None]:
    env: dict[str, str | None] = {"iteration": "int"}
    env.update({f"c{k}": t for k, t in enumerate(carried_types)})
    return env
