"""A planned graph that runs no subgraphs, written out as one straight-line Python function.

A loop body runs once per iteration; walking its steps over a dict costs about as much
as the torch calls themselves on small tensors. Written out, each step is one call
on local variables::

    def make(fns, wheres, k0, k1):         # the lowerings; the values read from outside
        f0, f1 = fns
        def body(values):
            v0, v1 = values
            ...
            s = 0; v2 = f0(v1, k0)
            s = 1; v3 = f1(v2, k1)
            return (v3,)
        return body

The text holds only generated names (``v0``, ``t0``, ``f0``, ``k0``, indices): no name or
value from the model reaches it; those come in as arguments.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NoReturn

from mdf_loops.errors import EvaluationError, MdfLoopsError

__all__ = ["write_out"]

Maker = Callable[[Mapping[str, Any]], Callable[[Sequence[Any]], tuple]]


def write_out(name: str, inputs: Sequence[str], steps: Sequence, outputs: Sequence[str]) -> Maker:
    """``make(base) -> body(values) -> outputs`` for ``steps`` (none of them scoped).

    ``base`` holds the names the graph reads from outside (free names, constants).
    """
    local: dict[str, str] = {}
    outer: list[str] = []

    def read(value: str) -> str:
        if not value:
            return "None"  # an absent optional input
        if value not in local:
            local[value] = f"k{len(outer)}"
            outer.append(value)
        return local[value]

    for k, value in enumerate(inputs):
        local[value] = f"v{k}"
    fresh = itertools.count()
    lines = []
    for j, step in enumerate(steps):
        args = ", ".join(read(value) for value in step.inputs)
        targets = [_assign(local, value, fresh) for value in step.outputs]
        if len(step.outputs) == 1:
            lines.append(f"s = {j}; {targets[0] or '_'} = f{j}({args})")
            continue
        lines.append(f"s = {j}; r = f{j}({args})")
        lines += [f"{t} = r[{m}]" for m, t in enumerate(targets) if t]
    returned = "".join(f"{read(value)}, " for value in outputs)
    source = _source(len(inputs), len(steps), len(outer), lines, returned)
    namespace: dict[str, Any] = {"MdfLoopsError": MdfLoopsError, "fail": _fail}
    exec(compile(source, "<mdf_loops torch graph>", "exec"), namespace)  # generated names only
    make = namespace["make"]
    fns = [step.fn for step in steps]
    wheres = [step.call.where for step in steps] + [f"graph '{name}'"]

    def bind(base: Mapping[str, Any]) -> Callable[[Sequence[Any]], tuple]:
        try:
            values = [base[value] for value in outer]
        except KeyError as exc:
            raise EvaluationError(f"graph '{name}': input {exc} is not defined") from None
        return make(fns, wheres, *values)

    return bind


def _assign(local: dict[str, str], value: str, fresh: Iterator[int]) -> str:
    if not value:
        return ""
    local[value] = f"t{next(fresh)}"  # a fresh local for each value computed
    return local[value]


def _source(n_inputs: int, n_steps: int, n_outer: int, lines: list[str], returned: str) -> str:
    params = "".join(f", k{k}" for k in range(n_outer))
    unpack = "".join(f"v{k}, " for k in range(n_inputs))
    body = "\n".join(f"            {line}" for line in lines) or "            pass"
    unpacked = f"{unpack} = values" if n_inputs else "() = values"
    functions = "".join(f"f{j}, " for j in range(n_steps))
    return f"""
def make(fns, wheres{params}):
    ({functions}) = fns
    def body(values):
        s = -1
        try:
            {unpacked}
{body}
        except MdfLoopsError:
            raise
        except Exception as exc:
            fail(wheres, s, exc)
        return ({returned})
    return body
"""


def _fail(wheres: list[str], step: int, exc: Exception) -> NoReturn:
    where = wheres[step]
    raise EvaluationError(f"{where}: {type(exc).__name__}: {exc}") from exc
