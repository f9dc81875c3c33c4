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
from mdf_loops.onnx import domains as onnx_domains
from mdf_loops.timeloop.names import literal, names_read, rename

__all__ = [
    "function_parameters",
    "names_read_by_functions",
    "inline_args",
    "in_stock_order",
    "refuse_random",
]

#: ONNX operators that draw new random numbers at each evaluation
RANDOM_OPERATORS = frozenset(f"onnx::{op}" for op in onnx_domains.RANDOM_OPERATORS)


def refuse_random(function: str | None, here: str) -> None:
    """A ModelError for a random draw at every step (PsyNeuLink's integrator noise).

    modeci-mdf draws from an unseeded generator each step, so no backend can give its
    numbers (and the backends would not agree with one another).
    """
    if function in RANDOM_OPERATORS:
        raise ModelError(
            f"{here}: {function} draws new random numbers at every step, which a time "
            "loop cannot reproduce (modeci-mdf draws them unseeded). Give the noise as an "
            "input time series instead (simulate(..., inputs={port: series}))"
        )


def inline_args(args: Mapping[str, Any], mapping: Mapping[str, str], here: str) -> dict[str, Any]:
    """Each arg's expression with ``mapping`` applied and the args before it put in.

    modeci-mdf evaluates the args in order over the node's values with the earlier args
    put in, so a name an earlier arg took means that arg; here it is replaced by that
    arg's expression, so that every backend reads the same values. Numbers and lists
    stay as they are (a list read by a later arg is written as a literal).
    """
    done: dict[str, Any] = {}
    for key, value in args.items():
        if isinstance(value, str):
            earlier = {
                k: f"({v})" if isinstance(v, str) else literal(v, here) for k, v in done.items()
            }
            value = rename(value, {**mapping, **earlier}, f"{here} arg '{key}'")
        done[key] = value
    return done


def _function_and_args(f: Function) -> tuple[str | None, dict[str, Any]]:
    """The MDF function name and its args (modelspec may hold ``{name: args}``)."""
    if isinstance(f.function, dict):
        ((name, args),) = f.function.items()
        return name, dict(args or {})
    return f.function, dict(f.args or {})


def in_stock_order(node_id: str, functions: list[Function]) -> list[Function]:
    """The functions in the order modeci-mdf's ``EvaluableNode`` evaluates them.

    It takes them in declared order, and puts a function that reads a function not yet
    taken at the end of the queue (PsyNeuLink writes a mechanism's output function
    before the integrator function it reads); functions that read one another in a
    cycle are refused, as modeci-mdf refuses them.
    """
    ids = {f.id for f in functions}
    reads = {f.id: names_read_by_functions([f]) & ids for f in functions}
    queue, order = list(functions), []
    done: set[str] = set()
    deferred_at: dict[str, int] = {}
    while queue:
        f = queue.pop(0)
        if reads[f.id] <= done:
            order.append(f)
            done.add(f.id)
        elif deferred_at.get(f.id) == len(queue):  # a whole round without progress
            cycle = sorted(g.id for g in [f, *queue])
            raise ModelError(
                f"node '{node_id}': functions {cycle} read one another in a cycle; "
                "modeci-mdf cannot order them either. Let one of them read a parameter"
            )
        else:
            deferred_at[f.id] = len(queue)
            queue.append(f)
    return order


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
    calls: dict[str, str] = {}  # function id -> the MDF function it calls
    for f in functions:
        here = f"node '{node_id}' function '{f.id}'"
        if f.id in taken:
            raise ModelError(
                f"{here}: a parameter of the node has the same id; modeci-mdf's engine "
                "would let the function hide the parameter's current value. Rename one"
            )
        name, args = _function_and_args(f)
        refuse_random(name, here)
        if f.value is None and not name:
            raise ModelError(f"{here}: it has neither a function nor a value; give one")
        inlined = inline_args(args, old_name, here)
        for key, value in list(inlined.items()):
            if isinstance(value, (list, tuple)):  # a constant of its own, not numpy.array([
                out.append(Parameter(id=f"{f.id}__{key}", value=list(value)))
                inlined[key] = f"{f.id}__{key}"
        if name:
            out.append(Parameter(id=f.id, function=name, args=inlined))
            calls[f.id] = name
            continue
        _refuse_value_reading_call(f, calls, here)
        outside = {k: v for k, v in old_name.items() if k not in args}
        inlined = {k: f"({v})" if isinstance(v, str) else repr(v) for k, v in inlined.items()}
        value = f.value
        if isinstance(value, (list, tuple)):
            out.append(Parameter(id=f.id, value=list(value)))
        else:
            out.append(
                Parameter(id=f.id, value=rename(value, {**outside, **inlined}, f"{here} value"))
            )
    return out


def _refuse_value_reading_call(f: Function, calls: Mapping[str, str], here: str) -> None:
    """A ModelError for a function with a ``value`` that reads a function calling an MDF
    function (PsyNeuLink's ``variable0[0]`` over an input port's ``onnx::ReduceSum``).

    The step holds both as parameters, and modeci-mdf's first sweep of a step evaluates
    such a value parameter before any function parameter has a value (it reads None).
    """
    read = sorted(names_read_by_functions([f]) & set(calls))
    if read:
        called = ", ".join(f"'{g}' ({calls[g]})" for g in read)
        raise ModelError(
            f"{here}: its value reads function {called}, which calls an MDF function; "
            "time loops do not support that (the step holds both as parameters, and "
            "modeci-mdf's first evaluation of the step reads the call's value before it "
            "is made). PsyNeuLink writes this for an input port fed by several projections "
            "(LCAMechanism, RecurrentTransferMechanism); such a model runs only in "
            "modeci-mdf's own loop for now"
        )
