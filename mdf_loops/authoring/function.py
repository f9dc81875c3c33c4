"""PyTensor's ``function``: a callable that runs the model of some outputs.

``function(inputs, outputs, updates=...)`` builds the MDF model once (shared
values become extra inputs, the updates extra outputs) and returns a
:class:`Function`; each call runs the model with :func:`mdf_loops.run` on the
chosen backend, then stores each update's value in its shared value, so the
state persists between calls::

    f = function([x], y, updates={acc: acc + x.sum()})
    f([1.0, 2.0])   # y; acc.get_value() is now 3 more
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.authoring.canonical import all_operations
from mdf_loops.authoring.errors import AuthoringError
from mdf_loops.authoring.model import lower
from mdf_loops.authoring.shared import SharedOp, SharedVariable
from mdf_loops.authoring.symbolic import ROOT, InputOp, Symbol, as_symbol
from mdf_loops.backends import Backend

__all__ = ["function", "Function"]


class Function:
    """A compiled PyTensor-style function: call it with values for its inputs."""

    def __init__(
        self,
        model: Model,
        inputs: list[Symbol],
        input_names: list[str],
        output_names: list[str],
        single: bool,
        shared: list[tuple[str, SharedOp]],
        updates: list[tuple[str, SharedVariable]],
        backend: Backend,
        allow_input_downcast: bool,
    ):
        self.model = model
        self.inputs = inputs
        self._input_names = input_names
        self._output_names = output_names
        self._single = single
        self._shared = shared
        self._updates = updates
        self.backend = backend
        self._downcast = allow_input_downcast

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) > len(self.inputs):
            raise AuthoringError(
                f"{self.model.id}: called with {len(args)} arguments, it takes {len(self.inputs)}"
            )
        # strict=False: the inputs after the positional arguments come by keyword
        values = dict(zip(self._input_names, args, strict=False))
        by_name = {
            symbol.name: name for symbol, name in zip(self.inputs, self._input_names, strict=True)
        }
        for key, value in kwargs.items():
            if key not in by_name or by_name[key] in values:
                raise AuthoringError(f"{self.model.id}: unexpected or repeated argument {key!r}")
            values[by_name[key]] = value
        missing = [
            s.name for s, n in zip(self.inputs, self._input_names, strict=True) if n not in values
        ]
        if missing:
            raise AuthoringError(f"{self.model.id}: missing values for inputs {missing}")
        feeds = {
            name: _as_input(values[name], symbol, self._downcast)
            for symbol, name in zip(self.inputs, self._input_names, strict=True)
        }
        feeds.update({name: op.storage.value for name, op in self._shared})
        from mdf_loops.run import run

        results = run(self.model, feeds, backend=self.backend)
        for name, variable in self._updates:
            variable.set_value(results[name])
        outputs = [np.asarray(results[name]) for name in self._output_names]
        return outputs[0] if self._single else outputs


def function(
    inputs: Sequence[Symbol],
    outputs: Symbol | Sequence[Symbol] | None = None,
    mode: Any = None,
    updates: Mapping | Sequence[tuple] | None = None,
    givens: Any = None,
    no_default_updates: bool = False,
    accept_inplace: bool = False,
    name: str | None = None,
    rebuild_strict: bool = True,
    allow_input_downcast: bool | None = None,
    profile: Any = None,
    on_unused_input: str | None = None,
    trust_input: bool = False,
    *,
    backend: Backend = "auto",
) -> Function:
    """A callable computing ``outputs`` from ``inputs``; PyTensor's parameters.

    ``updates`` (``{shared value: new value}`` or pairs, e.g. a scan's updates)
    are stored after every call. ``backend`` is :func:`mdf_loops.run`'s.
    ``mode``, ``profile`` and the other compilation options have no effect;
    ``givens`` is not supported (substitute the values before calling
    ``function``).
    """
    if givens:
        raise AuthoringError(
            "function(): givens is not supported; build the outputs from "
            "the replacement values instead"
        )
    inputs = _input_symbols(inputs)
    single = outputs is not None and not isinstance(outputs, (list, tuple))
    out_list = [] if outputs is None else [outputs] if single else list(outputs)
    pairs = _update_pairs(updates)
    if not no_default_updates:
        pairs += _default_updates(
            out_list + [value for _, value in pairs], {key for key, _ in pairs}
        )
    named = {f"output_{k}": as_symbol(o) for k, o in enumerate(out_list)}
    named.update({f"update_{k}": value for k, (_, value) in enumerate(pairs)})
    model_name = name if name and name.isidentifier() else "function"
    onnx_model, shared_ops = lower(named, model_name, inputs, shared_as_inputs=True)
    from mdf_loops.onnx.import_ import onnx_to_mdf

    model = onnx_to_mdf(onnx_model, model_id=model_name)
    graph_names = [i.name for i in onnx_model.graph.input]
    shared = list(zip(graph_names[len(inputs) :], shared_ops, strict=True))
    update_targets = [(f"update_{k}", key) for k, (key, _) in enumerate(pairs)]
    return Function(
        model,
        inputs,
        graph_names[: len(inputs)],
        list(named)[: len(out_list)],
        single,
        shared,
        update_targets,
        backend,
        bool(allow_input_downcast),
    )


def _input_symbols(inputs: Sequence[Symbol]) -> list[Symbol]:
    """``inputs`` as a list, after checking each is a graph input (not a shared value)."""
    inputs = list(inputs)
    for k, symbol in enumerate(inputs):
        if not isinstance(symbol, Symbol) or not isinstance(symbol.op, InputOp):
            raise AuthoringError(
                f"function(): inputs[{k}] must be made by vector(), matrix(), "
                f"input(), ... (got {symbol!r}); shared values are found "
                "on their own"
            )
    return inputs


def _default_updates(roots: list[Any], given: set) -> list[tuple[SharedVariable, Symbol]]:
    """The top level's implicit updates (random streams) of the shared values ``roots`` read."""
    symbols = [as_symbol(r) for r in roots]
    found = [op for op in all_operations(symbols) if isinstance(op, SharedOp)]
    by_storage = {
        id(shared.op.storage): (shared, value)
        for shared, value in ((_shared_key(k), v) for k, v in ROOT.default_updates.items())
    }
    pairs = []
    for op in found:
        pair = by_storage.get(id(op.storage))
        if pair is not None and pair[0] not in given:
            pairs.append(pair)
    return pairs


def _shared_key(symbol: Symbol) -> SharedVariable:
    assert isinstance(symbol, SharedVariable), "top-level default updates key shared values"
    return symbol


def _update_pairs(updates: Any) -> list[tuple[SharedVariable, Symbol]]:
    if updates is None:
        return []
    items = list(updates.items()) if isinstance(updates, Mapping) else list(updates)
    pairs = []
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise AuthoringError(
                f"function(): updates must be a dict or (shared, value) pairs, got {item!r}"
            )
        key, value = item
        if not isinstance(key, SharedVariable) or not isinstance(key.op, SharedOp):
            raise AuthoringError(f"function(): an updates key must be a shared value, got {key!r}")
        value = as_symbol(value)
        if value.dtype != key.dtype:
            raise AuthoringError(
                f"function(): the update of {key.describe()} is {value.type}; "
                f"it must keep the type {key.type}"
            )
        pairs.append((key, value))
    return pairs


def _as_input(value: Any, symbol: Symbol, allow_downcast: bool) -> np.ndarray:
    """``value`` as the input's element type: a lossy conversion of an array is refused."""
    dtype = symbol.dtype
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        array = np.asarray(value)
        if (
            array.dtype != dtype
            and not allow_downcast
            and not np.can_cast(array.dtype, dtype, "safe")
        ):
            raise AuthoringError(
                f"input '{symbol.name}' is {dtype}; a {array.dtype} array would lose precision: "
                f"cast it (.astype('{dtype}')) or pass allow_input_downcast=True to function()"
            )
        array = array.astype(dtype, copy=False)
    else:  # Python numbers and lists, as PyTensor, convert to the input's type
        array = np.asarray(value, dtype=dtype)
    if symbol.ndim is not None and array.ndim != symbol.ndim:
        raise AuthoringError(
            f"input '{symbol.name}' has {symbol.ndim} dimensions "
            f"({symbol.type}); got a value of shape {array.shape}"
        )
    return array
