"""A lowered model run for one form of inputs, as :func:`mdf_loops.run` replays it.

:meth:`JaxModel.runner <mdf_loops.backends.jax.compiled.JaxModel.runner>` gives a
:class:`FormRunner`: the compiled function and how to rebuild its outputs, found on its
first call and held, and split in two so that a replayed ``run`` compares the model
with its snapshot while the compiled loop runs (:class:`mdf_loops.run_plans.Dispatching`).
A replayed ``run`` spends most of its own time here and in that comparison
(docs/performance.md), each Python call costing microseconds when the compiled loop has
just left the CPU caches cold: hence few calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from mdf_loops.backends.jax.flat import unflatten
from mdf_loops.backends.jax.precision import x64
from mdf_loops.backends.jax.values import NeedsStatic
from mdf_loops.errors import CompileError, EvaluationError, MdfLoopsError

if TYPE_CHECKING:
    from mdf_loops.backends.jax.compiled import JaxModel

__all__ = ["FormRunner", "mdf_error"]


#: (compiled function, output names if all are arrays, layout, buffer rows)
_Held = tuple[Callable, tuple | None, list, int]
#: what :meth:`FormRunner.start` hands to :meth:`FormRunner.finish`: the inputs, the held
#: compiled function (None: run in full), its outputs (not yet computed) and flag
_Started = tuple[Mapping[str, Any], _Held | None, Any, Any]


class FormRunner:
    """:meth:`JaxModel.run` for one form of inputs (:meth:`JaxModel.runner`): the compiled
    function and how to rebuild its outputs, found on the first call and held while the
    model's buffers keep their size. With ``where``, JAX's errors become mdf-loops errors
    saying where (as :func:`~mdf_loops.backends.jax.compiled.jax_errors` does).

    A call is :meth:`start` then :meth:`finish` (the split of
    :class:`mdf_loops.run_plans.Dispatching`): JAX returns from the compiled function
    before its loop has run, and waits only when the outputs are read, so ``run``
    compares the model with its snapshot in between (docs/jax.md).
    """

    __slots__ = ("lowered", "key", "where", "held")

    def __init__(self, lowered: JaxModel, key: tuple, where: str | None = None) -> None:
        self.lowered, self.key, self.where = lowered, key, where
        self.held: _Held | None = None

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        return self.finish(self.start(inputs))

    def start(self, inputs: Mapping[str, Any]) -> _Started:
        """Set the compiled function going on ``inputs`` (JAX dispatches it and returns
        before it has run), or nothing where :meth:`finish` runs the model in full."""
        lowered, held = self.lowered, self.held
        try:
            if held is None or held[3] != lowered.buffer_rows:
                held = self._find()
                if held is None:  # not compiled yet, or its buffer grew: the full run
                    return inputs, None, (), None
            if lowered.needs_x64:
                with x64():
                    flat, flag = held[0](inputs)
            else:
                flat, flag = held[0](inputs)
        except Exception as exc:
            ours = self._ours(exc)
            if ours is exc:
                raise
            raise ours from exc
        return inputs, held, flat, flag

    def finish(self, started: _Started) -> dict[str, Any]:
        """Wait for what :meth:`start` set going; its outputs (numpy arrays, rebuilt)."""
        inputs, held, flat, flag = started
        try:
            # the flag is read only here: reading it waits for the loop
            if held is None or flag is not None and int(flag):
                return self.lowered.run(inputs)  # to grow the buffer, or to raise at the limit
            if held[1] is None:
                return unflatten(flat, held[2])
            return dict(zip(held[1], map(np.asarray, flat), strict=True))
        except Exception as exc:
            ours = self._ours(exc)
            if ours is exc:
                raise
            raise ours from exc

    def _ours(self, exc: Exception) -> Exception:
        """``exc`` as the caller gets it: an mdf-loops error as it is, JAX's saying where."""
        if self.where is None or isinstance(exc, MdfLoopsError):
            return exc
        return mdf_error(exc, self.where)

    def _find(self) -> _Held | None:
        entry = self.lowered._jitted.get(self.key)
        if entry is None or not entry[1]:  # no layout: not traced (or its tracing failed)
            return None
        fn, layout = entry
        # only arrays, in order (as flat.flatten lays them out): no rebuilding
        plain = all(spec == ("array", i) for i, (_, spec) in enumerate(layout))
        names = tuple(name for name, _ in layout) if plain else None
        self.held = (fn, names, layout, self.lowered.buffer_rows)
        return self.held


def mdf_error(exc: Exception, where: str) -> MdfLoopsError:
    """A JAX or XLA error (not an mdf-loops one) as an mdf-loops error saying ``where``: a
    lowering that needs a value known at compile time is a :class:`CompileError`, any
    other an :class:`EvaluationError`."""
    if isinstance(exc, NeedsStatic):
        return CompileError(
            f"{where}: {exc.where}: {exc.what}; run it with backend='onnxruntime' or 'scheduler'"
        )
    return EvaluationError(f"{where}: {type(exc).__name__}: {exc}")  # XLA's name no element
