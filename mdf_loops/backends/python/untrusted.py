"""The python backend for a time loop that is not trusted: its steps with the interpreter's rules.

:func:`guarded_time_loop` recompiles a :class:`CompiledTimeLoop` so that every expression
of the model in it (the body's parameters and ports, the initial values, the values
appended to the outputs) runs through :func:`mdf_loops.safety.guarded_code.guarded_function`:
numbers and numeric arrays only, every result sized before it is made, only the
size-planned functions callable. The loop around them (steps, chunks, appends) is the
writer's and stays as written.
"""

from __future__ import annotations

import ast
import dataclasses

from mdf_loops.backends.python.compiled import CompiledTimeLoop, _scalar
from mdf_loops.safety.guarded_code import guarded_function

__all__ = ["guarded_time_loop"]

#: the writer's helpers that a step's expressions call as written (``_where`` is guarded)
_HELPERS = frozenset({"_where", "_scalar"})


def guarded_time_loop(compiled: CompiledTimeLoop) -> CompiledTimeLoop:
    """``compiled`` with its model's expressions evaluated as an untrusted model's are."""
    run = guarded_function(
        compiled.source, "time_loop", {"_scalar": _scalar}, _model_parts, _HELPERS
    )
    return dataclasses.replace(compiled, run=run)


def _model_parts(statement: ast.stmt) -> tuple[list[ast.expr], str]:
    """The expressions of ``statement`` that come from the model and the element they
    belong to: the values assigned (except the bound ``sK.append`` methods) and the
    values appended to the scans."""
    if isinstance(statement, ast.Assign):
        names = [t.id for t in statement.targets if isinstance(t, ast.Name)]
        if any(n.startswith("_append") for n in names):
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
