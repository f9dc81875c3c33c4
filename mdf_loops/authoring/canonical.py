"""The canonical form of a scan: one recorded :class:`LoopOp` per ``scan`` call.

``scan`` turns its arguments into this form (as Theano's ``canonical_arguments``
does): every sequence tap is its own :class:`SequenceInput` reading an already
shifted, reversed and truncated slice one element per step; every recurrent
output and every update is a :class:`LoopState`; every output whose steps are
kept is a :class:`StackedOutput`. Rewrites (:mod:`.rewrite`) change this form;
lowering (:mod:`.lowering`) turns it into ONNX ``Scan`` or ``Loop``.

Semantics, with ``step(t)`` the body evaluated on the values of step ``t``::

    states = [s.initial for s in states]
    stacked = [[] for _ in stacked_outputs]
    for t in range(trip_count):          # the sequences' length, or n_steps
        values = step(elements at t, states)
        states = [values[s.next] for s in states]
        for acc, out in zip(stacked, stacked_outputs):
            acc.append(values[out.step_value])
        if until is not None and values[until]:
            break
    finals = states; results = [stack(acc) for acc in stacked]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from mdf_loops.authoring.symbolic import ConstantOp, Operation, Scope, Symbol

__all__ = [
    "SequenceInput",
    "LoopState",
    "StackedOutput",
    "LoopOp",
    "walk_scope",
    "all_operations",
    "post_order",
]


@dataclass(eq=False)
class SequenceInput:
    """``formal`` (in the body) is element ``t`` of ``source`` (outside) at step ``t``."""

    formal: Symbol
    source: Symbol


@dataclass(eq=False)
class LoopState:
    """A value carried across steps.

    ``formal`` is its name in the body, ``next`` its value for the next step.
    """

    formal: Symbol
    initial: Symbol
    next: Symbol
    final: Symbol | None = None  # the value after the last step (set by LoopOp)
    role: str = "state"


@dataclass(eq=False)
class StackedOutput:
    """A body value kept at every step; ``result`` stacks them along a new first axis."""

    step_value: Symbol
    #: the state whose newest value ``step_value`` is: the last step is then that
    #: state's final value (or the last row of it, for a window of past values)
    state: LoopState | None = None
    state_is_window: bool = False
    result: Symbol | None = None  # set by LoopOp


class LoopOp(Operation):
    """One scan in canonical form; its outputs are the states' finals and the stacked results."""

    def __init__(
        self,
        name: str,
        body: Scope,
        sequences: list[SequenceInput],
        states: list[LoopState],
        stacked: list[StackedOutput],
        trip_count: Symbol | None,
        steps_known: int | None,
        until: Symbol | None,
        replacements: dict[Symbol, Symbol],
        steps_may_be_zero: bool = False,
    ):
        super().__init__(())
        self.name = name
        self.body = body
        self.sequences = sequences
        self.states = states
        self.stacked = stacked
        self.trip_count = trip_count
        self.steps_known = steps_known
        self.until = until
        #: outer symbols the body reads as a state instead (the keys of updates)
        self.replacements = replacements
        #: n_steps decides the number of steps and may be 0 (onnxruntime's Scan
        #: cannot read empty sequences, its Loop can run zero times)
        self.steps_may_be_zero = steps_may_be_zero
        for state in states:
            state.final = Symbol(self, len(self.outputs), state.initial.type, None)
            self.outputs.append(state.final)
        for out in stacked:
            self.add_stacked_result(out)

    def add_stacked_result(self, out: StackedOutput) -> None:
        length = None if self.until is not None else self.steps_known
        out.result = Symbol(self, len(self.outputs), out.step_value.type.stacked(length), None)
        self.outputs.append(out.result)

    @property
    def lowers_to_loop(self) -> bool:
        """ONNX ``Loop`` (a stop condition, no sequence, or n_steps may be 0), else ``Scan``."""
        return self.until is not None or not self.sequences or self.steps_may_be_zero

    def body_roots(self) -> list[Symbol]:
        roots = [s.next for s in self.states] + [o.step_value for o in self.stacked]
        return roots + ([self.until] if self.until is not None else [])

    def free_variables(self) -> list[Symbol]:
        """Values from enclosing scopes that the body reads (in first-use order)."""
        free: dict[Symbol, None] = {}
        for symbol in walk_scope(self.body, self.body_roots()):
            if symbol.op.scope is not self.body and symbol not in self.replacements:
                free[symbol] = None
        return list(free)

    def referenced(self) -> list[Symbol]:
        """Every symbol this loop refers to: outer inputs and the body's formals and roots."""
        refs = [s for seq in self.sequences for s in (seq.formal, seq.source)]
        refs += [s for st in self.states for s in (st.formal, st.initial, st.next)]
        refs += [o.step_value for o in self.stacked]
        refs += [s for s in (self.trip_count, self.until) if s is not None]
        return refs + [s for pair in self.replacements.items() for s in pair]

    def dependencies(self) -> list[Symbol]:
        deps = [s.source for s in self.sequences] + [s.initial for s in self.states]
        if self.lowers_to_loop and self.trip_count is not None:
            deps.append(self.trip_count)
        return deps + self.free_variables()

    def describe(self) -> str:
        return f"the result of {self.body.label} made at {self.origin}"


def walk_scope(scope: Scope, roots: list[Symbol]) -> Iterator[Symbol]:
    """Every symbol reachable from ``roots`` without leaving ``scope``, each once.

    Symbols of enclosing scopes are yielded but not entered; constants are
    entered nowhere (they have no inputs).
    """
    seen: set[Symbol] = set()
    stack = list(reversed(roots))
    while stack:
        symbol = stack.pop()
        if symbol in seen:
            continue
        seen.add(symbol)
        yield symbol
        if symbol.op.scope is scope and not isinstance(symbol.op, ConstantOp):
            stack.extend(reversed(symbol.op.dependencies()))


def post_order(
    roots: list[Symbol],
    reads: Callable[[Operation], list[Symbol]],
    wanted: Callable[[Symbol], bool] = lambda symbol: True,
) -> list[Operation]:
    """The operations of the wanted ``roots`` and what they ``reads``, each after what it reads."""
    order: list[Operation] = []
    seen: set[Operation] = set()
    stack: list[tuple[Operation, bool]] = [(r.op, False) for r in reversed(roots) if wanted(r)]
    while stack:
        op, expanded = stack.pop()
        if expanded:
            order.append(op)
            continue
        if op in seen:
            continue
        seen.add(op)
        stack.append((op, True))
        stack.extend((s.op, False) for s in reversed(reads(op)) if wanted(s) and s.op not in seen)
    return order


def all_operations(roots: list[Symbol]) -> list[Operation]:
    """Every operation ``roots`` need, loop bodies included, each after what it reads."""
    return post_order(
        roots, lambda op: op.referenced() if isinstance(op, LoopOp) else op.dependencies()
    )
