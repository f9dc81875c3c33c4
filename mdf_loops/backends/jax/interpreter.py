"""Evaluate an ONNX graph node by node on concrete or traced values (one walker for every graph).

:class:`Evaluator` runs the top graph and every loop body and branch; the
lowering of each operator comes from :data:`~mdf_loops.backends.jax.registry.OPS`.
Run under ``jax.jit``, the walk happens once, while tracing.
"""

from __future__ import annotations

import contextlib
from collections import ChainMap
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from mdf_loops.backends.jax import (  # noqa: F401  (fill the table)
    control,
    convolution,
    elementwise,
    recurrent,
    reductions,
    sequences,
    shapes,
)
from mdf_loops.backends.jax.registry import OPS, NodeCall
from mdf_loops.backends.jax.totals import Counter, loop_sites
from mdf_loops.backends.jax.values import NeedsStatic, Ragged, label
from mdf_loops.errors import (
    CompileError,
    DepthLimitError,
    IterationLimitError,
    MdfLoopsError,
    SizeLimitError,
)
from mdf_loops.ops.common import Limits, how_to_raise, limits
from mdf_loops.safety.operator_sizes import node_size_check

__all__ = ["Evaluator"]

#: iterations treated as "no limit" (a trusted run)
_UNLIMITED = 1 << 62


#: operators that act on each element alone: applied to a run-time-length value's buffer
_ROW_BY_ROW = {
    "Identity",
    "Cast",
    "Neg",
    "Abs",
    "Relu",
    "Exp",
    "Log",
    "Sqrt",
    "Tanh",
    "Sigmoid",
    "Floor",
    "Ceil",
    "Round",
    "Not",
    "Sign",
}


class Evaluator:
    """Walks ONNX graphs for one trace; ``mode`` is ``"run"`` or ``"grad"`` (see control.py)."""

    def __init__(
        self, opset: int, limits: Limits | None, *, mode: str = "run", buffer_rows: int = 4096
    ):
        self.opset = opset
        self.limits = limits
        self.mode = mode
        self.buffer_rows = buffer_rows
        self._flags: list[list] = [[]]
        #: the run's iterations together, in a model that is not trusted (:mod:`.totals`)
        self.counter: Counter | None = None
        self._depth = 0  # graphs being walked: the top graph, then bodies and branches

    # ------------------------------------------------------------ limits
    @property
    def max_iterations(self) -> int:
        return self.limits.max_iterations if self.limits is not None else _UNLIMITED

    def check_trips(self, trips: int, where: str) -> None:
        if trips > self.max_iterations:
            raise IterationLimitError(
                f"{where}: {trips} iterations, over max_iterations={self.max_iterations} "
                "(jax backend); raise it with mdf_loops.run(..., max_iterations=N)"
            )

    def check_stacked(self, sizes: Sequence[int], where: str) -> None:
        """The scan outputs of the loop at ``where``, stacked (``sizes``: elements of each,
        static while tracing), held to ``max_elements`` before they are made."""
        limit = self.limits.max_elements if self.limits is not None else None
        for k, elements in enumerate(sizes):
            if limit is not None and elements > limit:
                raise SizeLimitError(
                    f"scan output {k} (stacked) has {elements} elements, over the limit of "
                    f"{limit} (max_elements); if the model needs values this large, "
                    f"{how_to_raise('max_elements')}",
                    location=f"{where} (jax backend)",
                )

    def raise_flag(self, flag: Any) -> None:
        self._flags[-1].append(flag)

    def flag(self) -> Any:
        """The OR of the flags raised at this level (0 when none)."""
        return _combine(self._flags[-1])

    # ------------------------------------------------------------ graphs
    def graph(
        self, graph: onnx.GraphProto, inputs: Sequence[Any], outer: Mapping[str, Any]
    ) -> list:
        """The outputs of ``graph`` on ``inputs`` (formal inputs in order), reading ``outer``."""
        if self.counter is None and self.limits is not None:  # the top graph: count in it
            self.counter = Counter(self.limits.max_total_iterations, loop_sites(graph))
        self._depth += 1
        try:
            return self._graph(graph, inputs, outer)
        finally:
            self._depth -= 1

    def _graph(self, graph: onnx.GraphProto, inputs: Sequence[Any], outer: Mapping[str, Any]):
        if self.limits is not None and self._depth - 1 > self.limits.max_depth:
            raise DepthLimitError(
                f"graph '{graph.name}' (jax backend): loop bodies and branches are nested "
                f"{self._depth - 1} deep; the limit is {self.limits.max_depth} (max_depth); "
                f"if the model is meant to nest this deep, {how_to_raise('max_depth')}"
            )
        local: dict[str, Any] = {}
        # typeshed asks every map of a ChainMap to be mutable; only the first is written
        scope = ChainMap(local, outer)  # type: ignore[arg-type]
        for init in graph.initializer:
            local[init.name] = numpy_helper.to_array(init)
        for formal, value in zip(graph.input, inputs, strict=True):
            local[formal.name] = value
        for node in graph.node:
            self._node(node, scope)
        return [scope[o.name] for o in graph.output]

    def body(
        self,
        graph: onnx.GraphProto,
        inputs: Sequence[Any],
        outer: Mapping[str, Any],
        *,
        total: Any = None,
        count: tuple[str, Any] | None = None,
    ) -> tuple[list, Any, Any]:
        """:meth:`graph` inside a JAX primitive: also the OR of the flags raised within,
        and the run's iteration count after it, from ``total`` (when counting), the
        iteration ``count = (loop, iteration)`` counted first."""
        counter = self.counter
        self._flags.append([])
        saved = counter.total if counter is not None else None
        try:
            if counter is not None and total is not None:
                counter.total = total
                if count is not None:
                    counter.add(self.raise_flag, 1, *count)
            outputs = self.graph(graph, inputs, outer)
            end = counter.total if counter is not None else None
        finally:
            flags = self._flags.pop()
            if counter is not None:
                counter.total = saved
        return outputs, _combine(flags), end

    def count(self, n: Any, where: str, first: Any = 0) -> Any:
        """Count ``n`` iterations of the loop at ``where`` (:meth:`.totals.Counter.add`);
        False when not counting."""
        if self.counter is None:
            return False
        return self.counter.add(self.raise_flag, n, where, first)

    def mark(self) -> tuple:
        """The count and the flags raised so far, to :meth:`rewind` to if a lowering fails."""
        total = self.counter.total if self.counter is not None else None
        return total, len(self._flags[-1])

    def rewind(self, mark: tuple) -> None:
        total, n_flags = mark
        if self.counter is not None:
            self.counter.total = total
        del self._flags[-1][n_flags:]

    @contextlib.contextmanager
    def probing(self) -> Iterator[None]:
        """A trace only for shapes: nothing counted, no limit raised."""
        mark = self.mark()
        if self.counter is not None:
            self.counter.speculative += 1
        try:
            yield
        finally:
            if self.counter is not None:
                self.counter.speculative -= 1
            self.rewind(mark)

    def _check_size(self, call: NodeCall, args: list) -> None:
        """The scheduler's size plan of the node (:mod:`mdf_loops.safety.operator_sizes`) on
        the values it is about to get: shapes are static while tracing, and a value a plan
        reads (a shape to expand to) is one the lowering needs at compile time too."""
        node = call.proto
        check = node_size_check(node.op_type, {k: call.attr(k) for k in call.attrs}, node.domain)
        if check is None:
            return
        assert self.limits is not None
        try:
            with limits(max_elements=self.limits.max_elements):
                check(args)
        except SizeLimitError as exc:
            raise SizeLimitError(exc.reason, location=f"{call.where} (jax backend)") from None

    def _node(self, node: onnx.NodeProto, scope: ChainMap) -> None:
        where = label(node)
        lower = OPS.lowering_of(node, where)
        try:
            args = [scope[name] if name else None for name in node.input]
        except KeyError as exc:
            raise CompileError(f"{where}: input {exc} is not defined") from None
        while args and args[-1] is None:
            args.pop()
        if any(isinstance(a, Ragged) for a in args):
            if node.op_type not in _ROW_BY_ROW or len(args) != 1:
                raise NeedsStatic(
                    where, "it reads a Loop scan output whose length is only known at run time"
                )
            ragged = args[0]  # computed on the whole buffer: its rows past the count stay unread
            assert isinstance(ragged, Ragged)
            value = lower(NodeCall(node, where, self, scope), ragged.buffer)
            scope.maps[0][node.output[0]] = Ragged(value, ragged.count, ragged.why)
            return
        call = NodeCall(node, where, self, scope)
        if self.limits is not None:  # a model that is not trusted: sized while tracing
            self._check_size(call, args)
        try:
            result = lower(call, *args)
        except (NeedsStatic, MdfLoopsError):
            raise
        except Exception as exc:  # numpy's or JAX's own errors name no node
            if _needs_a_value(exc):  # numpy code met a traced value: a constant would do
                raise NeedsStatic(where, f"it needs a value known at compile time ({exc})") from exc
            raise CompileError(f"{where}: {type(exc).__name__}: {exc}") from exc
        results = result if isinstance(result, tuple) else (result,)
        # strict=False: a node may leave out trailing outputs (a Loop's or Scan's scan outputs)
        for name, value in zip(node.output, results, strict=False):
            if name:
                scope.maps[0][name] = value


def _combine(flags: list) -> Any:
    if not flags:
        return np.int32(0)
    import jax.numpy as jnp

    result = flags[0]
    for f in flags[1:]:
        result = jnp.bitwise_or(result, f)
    return result


def _needs_a_value(exc: Exception) -> bool:
    import jax

    return isinstance(
        exc, (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError)
    )
