"""A node's ``functions`` list, rewritten as parameters of its time-loop step node.

modeci-mdf's ``EvaluableNode.evaluate`` (0.4.x) evaluates a node's functions between
its two parameter sweeps, in the order they are declared: each function sees the
*current* value of every parameter (the previous step's, or the initial value on the
first) and the values of the functions declared before it; the new values of the
parameters then see the functions' values. A function with ``args`` evaluates them in
order, each seeing the ones before it, then its ``value`` expression (or the named
MDF function) over them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modeci_mdf.mdf import Function, Parameter

from mdf_loops.errors import ModelError
from mdf_loops.timeloop.names import names_read, rename

__all__ = ["function_parameters", "names_read_by_functions"]


def _function_and_args(f: Function) -> tuple[str | None, dict[str, Any]]:
    """The MDF function name and its args (modelspec may hold ``{name: args}``)."""
    if isinstance(f.function, dict):
        ((name, args),) = f.function.items()
        return name, dict(args or {})
    return f.function, dict(f.args or {})


def names_read_by_functions(functions: list[Function]) -> set[str]:
    """Names the functions read from outside themselves (their args are their own)."""
    read: set[str] = set()
    for f in functions:
        _, args = _function_and_args(f)
        for value in args.values():
            read |= names_read(value)
        read |= names_read(f.value) - set(args)
    return read


def function_parameters(
    node_id: str, functions: list[Function], old_name: Mapping[str, str], taken: set[str]
) -> list[Parameter]:
    """One parameter per function (plus constants for list-valued args), in order.

    ``old_name`` maps each parameter the functions read to the name of its current
    value in the step node; ``taken`` holds the parameter ids of the source node.
    """
    out: list[Parameter] = []
    for f in functions:
        here = f"node '{node_id}' function '{f.id}'"
        if f.id in taken:
            raise ModelError(
                f"{here}: a parameter of the node has the same id; modeci-mdf's engine "
                "would let the function hide the parameter's current value. Rename one"
            )
        name, args = _function_and_args(f)
        outside = {k: v for k, v in old_name.items() if k not in args}
        if name:
            renamed = {}
            for key, value in args.items():
                renamed[key] = _arg(out, f"{f.id}__{key}", value, outside, f"{here} arg '{key}'")
            out.append(Parameter(id=f.id, function=name, args=renamed))
            continue
        if f.value is None:
            raise ModelError(f"{here}: it has neither a function nor a value; give one")
        inlined: dict[str, str] = {}
        for key, value in args.items():
            text = _arg(out, f"{f.id}__{key}", value, {**outside, **inlined}, f"{here} arg '{key}'")
            inlined[key] = f"({text})" if isinstance(text, str) else repr(text)
        value = f.value
        if isinstance(value, (list, tuple)):
            out.append(Parameter(id=f.id, value=list(value)))
        else:
            out.append(
                Parameter(id=f.id, value=rename(value, {**outside, **inlined}, f"{here} value"))
            )
    return out


def _arg(out: list[Parameter], constant: str, value: Any, mapping: Mapping[str, str], here: str):
    """An arg's expression; a list value becomes a constant parameter of its own."""
    if isinstance(value, (list, tuple)):
        out.append(Parameter(id=constant, value=list(value)))
        return constant
    return rename(value, mapping, here)
