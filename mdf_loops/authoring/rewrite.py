"""Rewrites of the canonical form before lowering (on a private copy of the traced graph).

:func:`keep_only_what_is_used` is Theano's memory optimisation: a scan output
whose only uses read its last step (``result[-1]``) is not stacked; the loop
carries it as a state and ``result[-1]`` reads the state's final value. Stacked
outputs nobody reads are dropped.

The traced graph belongs to the user, who may build several models from it, so
:func:`copy_graph` first clones everything reachable from the model's outputs.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from typing import TypeGuard

import numpy as np

from mdf_loops.authoring.canonical import (
    LoopOp,
    LoopState,
    SequenceInput,
    StackedOutput,
    all_operations,
)
from mdf_loops.authoring.symbolic import (
    ConstantOp,
    FormalOp,
    OnnxOp,
    Operation,
    Symbol,
    apply,
    tracing,
)

__all__ = ["copy_graph", "keep_only_what_is_used", "shape_empty_stacks", "optimize"]


def optimize(roots: list[Symbol]) -> list[Symbol]:
    """A rewritten copy of the graph computing ``roots``; returns the copied roots."""
    copied = copy_graph(roots)
    keep_only_what_is_used(copied)
    return shape_empty_stacks(copied)


# ---------------------------------------------------------------- copying


def copy_graph(roots: list[Symbol]) -> list[Symbol]:
    """Copies of ``roots`` computed by copies of every operation they depend on."""
    twins: dict[Symbol, Symbol] = {}

    def twin(symbol: Symbol | None) -> Symbol | None:
        return None if symbol is None else twins[symbol]

    for op in all_operations(roots):  # what an operation reads is copied before it
        new = copy.copy(op)
        new.outputs = []
        for old in op.outputs:
            twins[old] = Symbol(new, old.index, old.type, old.name)
            new.outputs.append(twins[old])
        new.inputs = tuple(twin(s) for s in op.inputs)
        if isinstance(op, LoopOp) and isinstance(new, LoopOp):
            _copy_loop(op, new, twin)
    return [twins[r] for r in roots]


def _copy_loop(op: LoopOp, new: LoopOp, twin) -> None:
    new.sequences = [SequenceInput(twin(s.formal), twin(s.source)) for s in op.sequences]
    states: dict[LoopState | None, LoopState] = {
        s: LoopState(twin(s.formal), twin(s.initial), twin(s.next), twin(s.final), s.role)
        for s in op.states
    }
    new.states = list(states.values())
    new.stacked = [
        StackedOutput(twin(o.step_value), states.get(o.state), o.state_is_window, twin(o.result))
        for o in op.stacked
    ]
    new.trip_count = twin(op.trip_count)
    new.until = twin(op.until)
    new.replacements = {twin(k): twin(v) for k, v in op.replacements.items()}


# ---------------------------------------------------------------- last step only


def _consumers(roots: list[Symbol]) -> tuple[dict[Symbol, list[Operation]], list[LoopOp]]:
    """Who reads each symbol (bodies included), and every loop, inner loops first."""
    readers: dict[Symbol, list[Operation]] = defaultdict(list)
    loops: list[LoopOp] = []
    for op in all_operations(roots):
        deps = op.dependencies()
        if isinstance(op, LoopOp):
            deps = deps + op.body_roots()
            loops.append(op)
        for dep in deps:
            readers[dep].append(op)
    return readers, loops


def _is_last_step(op: Operation, source: Symbol) -> TypeGuard[OnnxOp]:
    """True for ``source[-1]``: a Gather of index -1 along axis 0."""
    if not isinstance(op, OnnxOp) or op.op_type != "Gather" or op.inputs[0] is not source:
        return False
    if op.attributes.get("axis", 0) != 0:
        return False
    index = op.inputs[1]
    return (
        index is not None
        and isinstance(index.op, ConstantOp)
        and index.op.value.shape == ()
        and int(index.op.value) == -1
    )


def keep_only_what_is_used(roots: list[Symbol]) -> None:
    """Rewrite (in place) loops whose stacked outputs are unused or read at ``[-1]``.

    ``result[-1]`` of a recurrent output always reads the state's final value, as
    PyTensor's rewrites make it do: after zero steps that is the initial state.
    """
    readers, loops = _consumers(roots)
    outputs = set(roots)
    for loop in loops:
        for out in list(loop.stacked):
            result = out.result
            assert result is not None, "LoopOp sets every stacked output's result"
            uses = readers.get(result, [])
            last = [op for op in uses if _is_last_step(op, result)]
            if result not in outputs and not uses:
                loop.stacked.remove(out)
                continue
            if not last:
                continue
            only_last = result not in outputs and len(last) == len(uses)
            state = out.state or (_new_state(loop, out) if only_last else None)
            if state is None:
                continue
            for op in last:
                if out.state_is_window:  # the last row of the final window
                    op.inputs = (state.final,) + op.inputs[1:]
                else:
                    op.op_type, op.attributes, op.inputs = "Identity", {}, (state.final,)
            if only_last:
                loop.stacked.remove(out)


def _new_state(loop: LoopOp, out: StackedOutput) -> LoopState | None:
    """A state holding the newest value of a map-like output (only when its type is static)."""
    step_type = out.step_value.type
    if not step_type.is_static:
        return None
    with tracing(loop.scope):
        initial = apply(
            "ConstantOfShape",
            [np.array(step_type.shape, np.int64)],
            {"value": np.zeros(1, step_type.dtype)},
        )
    with tracing(loop.body):
        formal = FormalOp(step_type, "newest value of a scan output", "newest").outputs[0]
    state = LoopState(formal, initial, out.step_value, role="last step of an output")
    state.final = Symbol(loop, len(loop.outputs), step_type, None)
    loop.outputs.append(state.final)
    loop.states.append(state)
    return state


# ---------------------------------------------------------------- zero steps of a Loop


def shape_empty_stacks(roots: list[Symbol]) -> list[Symbol]:
    """Give the stacked outputs of recurrent states in ``Loop`` s the state's element shape.

    After zero iterations, onnxruntime gives the unknown element dimensions of a
    Loop's stacked outputs as 0; the element of a recurrent output has its
    state's shape, so ``Reshape(result, [rows] + shape(state))`` fixes them (and
    changes nothing otherwise). Returns ``roots`` with such results replaced.
    """
    readers, loops = _consumers(roots)
    roots = list(roots)
    for loop in loops:
        if not loop.lowers_to_loop:
            continue
        for out in loop.stacked:
            if out.state is None or out.step_value.type.is_static:
                continue
            result = out.result
            assert result is not None, "LoopOp sets every stacked output's result"
            with tracing(loop.scope):
                element = apply("Shape", [out.state.initial])
                if out.state_is_window:
                    element = apply(
                        "Slice",
                        [
                            element,
                            np.array([1], np.int64),
                            np.array([np.iinfo(np.int64).max], np.int64),
                        ],
                    )
                rows = apply(
                    "Slice",
                    [apply("Shape", [result]), np.array([0], np.int64), np.array([1], np.int64)],
                )
                shaped = apply("Reshape", [result, apply("Concat", [rows, element], {"axis": 0})])
            _replace_uses(readers.get(result, []), result, shaped)
            roots = [shaped if r is result else r for r in roots]
    return roots


def _replace_uses(uses: list[Operation], old: Symbol, new: Symbol) -> None:
    for op in uses:
        if isinstance(op, LoopOp):
            for seq in op.sequences:
                seq.source = new if seq.source is old else seq.source
            for state in op.states:
                state.initial = new if state.initial is old else state.initial
            op.trip_count = new if op.trip_count is old else op.trip_count
        else:
            op.inputs = tuple(new if s is old else s for s in op.inputs)
