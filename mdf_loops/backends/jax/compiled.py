"""The JAX backend's entry point: ``compile(model, example_inputs) -> JaxModel``.

The MDF model is exported to one ONNX model (:func:`mdf_loops.onnx.export.export_model`,
without the rewrites for onnxruntime; bodies as subgraphs, types known), and that graph is
traced into a JAX function (:mod:`.interpreter`), ``jax.jit``-compiled once per input shapes
and dtypes.
64-bit types are switched on only while mdf-loops traces and runs (``jax.enable_x64``
as a context), never for the caller.

Graph inputs whose values decide a shape or an index (a ``Range`` length, a
``Slice`` start, a loop's trip count that a body uses as an index) cannot be
traced; the compiler then takes integer and boolean inputs, and failing that all
inputs, as compile-time constants (compiled again for each new value).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import Error as ProtobufError
from modeci_mdf.mdf import Model

from mdf_loops.backends.jax.flat import feed_value, flatten, is_discrete, static_key, unflatten
from mdf_loops.backends.jax.jitted import JittedFunctions
from mdf_loops.backends.jax.precision import uses_64_bits, x64
from mdf_loops.backends.jax.replay import FormRunner, mdf_error
from mdf_loops.backends.jax.totals import limits_error
from mdf_loops.backends.jax.values import (
    BUFFER_FULL,
    LIMIT_PASSED,
    NeedsStatic,
    Opt,
    is_concrete,
    np_dtype,
)
from mdf_loops.caches import CompileCache, clear_compiled, input_signature
from mdf_loops.errors import (
    CompileError,
    IterationLimitError,
    MdfLoopsError,
    ModelError,
)
from mdf_loops.onnx.export import export_model
from mdf_loops.ops.common import Limits

__all__ = [
    "JaxModel",
    "compile",
    "cached_compile",
    "clear_compiled",
    "jax_runner",
    "jax_errors",
    "x64",
]

log = logging.getLogger(__name__)

#: how input values are taken: 0 all traced, 1 integers and booleans constant, 2 all constant
_LEVELS = (0, 1, 2)


@dataclass
class JaxModel:
    """An MDF graph lowered to JAX: :meth:`run` it, or take :meth:`function` to transform it."""

    onnx_model: onnx.ModelProto
    limits: Limits | None
    level: int
    opset: int
    input_types: dict[str, onnx.TypeProto]
    output_names: tuple[str, ...]
    buffer_rows: int = 4096
    #: whether the traced program holds a 64-bit value (:mod:`.precision`)
    needs_x64: bool = True
    #: compiled functions, the most recently used (:mod:`.jitted`)
    _jitted: JittedFunctions = field(default_factory=JittedFunctions, repr=False)

    # ------------------------------------------------------------ running
    def run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """Outputs by name (numpy arrays, lists for sequences, None for empty optionals)."""
        feed = self.feed(inputs)
        with self._precision():
            while True:
                static, dynamic = self.split(feed)
                fn, layout = self._entry(static, dynamic)
                flat, flag = fn(dynamic)
                flag = 0 if flag is None else int(flag)
                if not self.grew_buffer(flag):
                    break
        self.check_limits(flag)
        if flag & LIMIT_PASSED:
            limit = self.limits.max_iterations if self.limits else None
            raise IterationLimitError(
                f"a Loop passed max_iterations={limit} (jax backend); raise the limit with "
                "mdf_loops.run(..., max_iterations=N), or run with backend='scheduler' to see "
                "the loop and the iteration"
            )
        return unflatten(flat, layout)

    def runner(self, example: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
        """:meth:`run` for inputs of the form of ``example`` (the same names, dtypes and
        shapes): the compiled function is looked up once, not on each call.

        Falls back to :meth:`run` where that cannot hold: inputs compiled in as constants
        (``level`` > 0), inputs that need converting, and calls whose loop filled its
        output buffer or passed a limit (run again there, to grow it or to raise).
        """
        feed = self.feed(example)
        if self.level or feed.keys() != example.keys():
            return self.run
        if any(feed[name] is not value for name, value in example.items()):
            return self.run
        return FormRunner(self, self._key({}, feed))

    def _precision(self) -> contextlib.AbstractContextManager:
        """64-bit types on while running, where the traced program has them (:mod:`.precision`)."""
        return x64() if self.needs_x64 else contextlib.nullcontext()

    def check_limits(self, flag: int) -> None:
        """Raise the error of a returned ``flag`` whose loops passed ``max_total_iterations``
        (:mod:`.totals`) or whose scan outputs would pass ``max_elements``."""
        if self.limits is not None and flag & ~(BUFFER_FULL | LIMIT_PASSED):
            raise limits_error(flag, self.onnx_model.graph, self.limits)

    def grew_buffer(self, flag: int) -> bool:
        """Whether a loop filled its scan-output buffer and the buffer grew (8x, up to
        ``max_iterations`` rows): the caller runs again."""
        if not flag & BUFFER_FULL or self.buffer_rows >= self._max_rows():
            return False
        self.buffer_rows = min(self.buffer_rows * 8, self._max_rows())
        self._jitted.clear()
        return True

    def _max_rows(self) -> int:
        return self.limits.max_iterations if self.limits is not None else 1 << 40

    @staticmethod
    def _key(static: Mapping[str, Any], dynamic: Mapping[str, Any]) -> tuple:
        """What a compiled function is kept by: static values, dynamic shapes and dtypes."""
        return (
            static_key(static) if static else (),
            tuple(
                (k, v.shape, v.dtype) if isinstance(v, np.ndarray) else (k, static_key({k: v}))
                for k, v in dynamic.items()
            ),
        )

    def _entry(self, static: dict, dynamic: dict) -> tuple[Callable, list]:
        import jax

        key = self._key(static, dynamic)
        entry = self._jitted.get(key)
        if entry is None:
            layout: list = []
            traced = self.function(static, mode="run")

            def flat_outputs(values):
                outputs, flag = traced(values)
                layout.clear()
                # no loop that stops at run time: no flag to copy back each call
                return flatten(outputs, layout), None if is_concrete(flag) else flag

            entry = self._jitted[key] = (jax.jit(flat_outputs), layout)
        return entry

    # ------------------------------------------------------------ transforming
    def function(
        self, static: Mapping[str, Any], *, mode: str = "run", buffer_rows: int | None = None
    ) -> Callable:
        """``f(dynamic inputs by name) -> ({output name: value}, flag)`` to trace with JAX.

        ``static`` are the inputs taken as constants (see :meth:`split`); ``mode``
        ``"grad"`` lowers condition-stopped loops in a differentiable form.
        """
        from mdf_loops.backends.jax.interpreter import Evaluator

        graph = self.onnx_model.graph

        def traced(dynamic: Mapping[str, Any]) -> tuple[dict, Any]:
            evaluator = Evaluator(
                self.opset, self.limits, mode=mode, buffer_rows=buffer_rows or self.buffer_rows
            )
            values = {**static, **dynamic}
            outputs = evaluator.graph(graph, [values.get(i.name) for i in graph.input], {})
            return dict(zip(self.output_names, outputs, strict=True)), evaluator.flag()

        return traced

    def feed(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """User inputs in the form the lowered function takes (declared dtypes)."""
        feed = {}
        for name, type_proto in self.input_types.items():
            if name in inputs:
                value, dtype = inputs[name], self._dtypes.get(name)
                if isinstance(value, np.ndarray) and value.dtype == dtype:
                    feed[name] = value  # the common case, without conversions
                else:
                    feed[name] = feed_value(value, type_proto)
        return feed

    def __post_init__(self) -> None:
        self._dtypes = {
            name: np_dtype(t.tensor_type.elem_type)
            for name, t in self.input_types.items()
            if t.WhichOneof("value") == "tensor_type" and t.tensor_type.elem_type
        }

    def split(self, feed: Mapping[str, Any]) -> tuple[dict, dict]:
        """``(static, dynamic)`` inputs at this model's level."""
        if self.level == 0:
            return {}, dict(feed)
        static: dict[str, Any] = {}
        dynamic: dict[str, Any] = {}
        for name, value in feed.items():
            constant = self.level == 2 or (self.level == 1 and is_discrete(value))
            (static if constant else dynamic)[name] = value
        return static, dynamic


def compile(
    model: Model,
    example_inputs: Mapping[str, Any],
    *,
    graph: str | None = None,
    limits: Limits | None = None,
) -> JaxModel:
    """Lower ``model``'s graph to JAX; ``example_inputs`` type its inputs.

    Raises :class:`~mdf_loops.errors.CompileError` naming the node when the model cannot
    be lowered (an operator with no JAX lowering, a shape JAX cannot fix).
    """
    try:
        import jax  # noqa: F401
    except ImportError:
        raise CompileError("the jax backend needs JAX: pip install 'mdf-loops[jax]'") from None
    _register_pytrees()
    try:
        exported = export_model(model, graph=graph, example_inputs=example_inputs).model
    except ModelError as exc:
        raise CompileError(f"cannot export to ONNX: {exc}") from exc
    except (RecursionError, ValueError, TypeError, ProtobufError) as exc:  # nesting limits
        raise CompileError(f"cannot export to ONNX: {type(exc).__name__}: {exc}") from exc
    opset = next((o.version for o in exported.opset_import if o.domain in ("", "ai.onnx")), 21)
    types = {i.name: i.type for i in exported.graph.input}
    lowered = JaxModel(
        exported, limits, 0, opset, types, tuple(o.name for o in exported.graph.output)
    )
    feed = lowered.feed(example_inputs)
    reason = None
    for level in _LEVELS:
        lowered.level = level
        static, dynamic = lowered.split(feed)
        try:
            lowered.needs_x64 = uses_64_bits(_probe(lowered, static, dynamic))
            return lowered
        except NeedsStatic as exc:
            reason = exc
            log.info(
                "jax backend, model '%s': %s; taking %s inputs as constants",
                model.id,
                exc,
                "integer and boolean" if level == 0 else "all",
            )
    assert reason is not None, "every level failed with NeedsStatic"
    raise CompileError(
        f"{reason.where}: {reason.what}, and it depends on values computed "
        "inside a loop; run it with backend='onnxruntime' or 'scheduler'"
    )


_REGISTERED: list[bool] = []


def _unflatten_optional(empty: bool, children: Sequence[Any]) -> Opt:
    return Opt(None if empty else children[0])


def _register_pytrees() -> None:
    """Let optionals pass through JAX transformations (once per process)."""
    if _REGISTERED:
        return
    import jax

    jax.tree_util.register_pytree_node(
        Opt,
        lambda o: ((() if o.value is None else (o.value,)), o.value is None),
        _unflatten_optional,
    )
    _REGISTERED.append(True)


def _probe(lowered: JaxModel, static: dict, dynamic: dict) -> Any:
    """Trace once (no compilation): the traced program, if this level lowers."""
    import jax

    with x64():
        return jax.make_jaxpr(lambda values: _drop_python(lowered.function(static)(values)))(
            dynamic
        )


def _drop_python(result):
    outputs, flag = result
    layout: list = []
    return flatten(outputs, layout), flag


# ---------------------------------------------------------------- cache

_CACHE: CompileCache[JaxModel] = CompileCache(CompileError)


def cached_compile(
    model: Model, inputs: Mapping[str, Any], graph: str | None = None, limits: Limits | None = None
) -> JaxModel:
    """:func:`compile`, cached per ``Model`` object, input dtypes and ranks, and limits."""
    key = (graph, limits, input_signature(inputs))
    return _CACHE.get(model, key, lambda: compile(model, inputs, graph=graph, limits=limits))


def jax_runner(lowered: JaxModel, example: Mapping[str, Any]) -> Callable[..., dict[str, Any]]:
    """:func:`mdf_loops.run`'s runner of ``lowered`` for inputs of the form of ``example``:
    inputs in, the user's values out (:func:`.flat.unflatten` gives them: numpy arrays,
    lists, ``None``), JAX's errors as mdf-loops errors."""
    where = f"graph '{lowered.onnx_model.graph.name}' (jax backend)"
    run = lowered.runner(example)
    if isinstance(run, FormRunner):
        return FormRunner(lowered, run.key, where)  # converts errors itself: one call less
    return functools.partial(_user_outputs, run, where)


def _user_outputs(run: Callable, where: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    try:  # not jax_errors(): a context manager costs microseconds on every call
        return run(inputs)
    except MdfLoopsError:
        raise
    except Exception as exc:
        raise mdf_error(exc, where) from exc


@contextlib.contextmanager
def jax_errors(where: str) -> Iterator[None]:
    """Errors of JAX and XLA (while tracing or running) as mdf-loops errors saying ``where``:
    a lowering that needs a value known at compile time is a :class:`CompileError`, any
    other an :class:`EvaluationError`."""
    try:
        yield
    except MdfLoopsError:
        raise
    except Exception as exc:
        raise mdf_error(exc, where) from exc
