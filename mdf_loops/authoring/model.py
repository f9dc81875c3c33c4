"""Turn traced outputs into an MDF ``Model``.

The traced graph is copied and rewritten (:mod:`.rewrite`), lowered to ONNX
(:mod:`.lowering`) and converted with :func:`mdf_loops.onnx_to_mdf`, so an
authored model is exactly what importing the same ONNX model gives: ``onnx::``
nodes, and ``onnx::Scan`` / ``onnx::Loop`` nodes with body graphs. The graph's
``formal_inputs`` / ``formal_outputs`` metadata name its inputs and outputs, so
``mdf_loops.run(model, {"A": ...})`` returns ``{"result": ...}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import onnx
from modeci_mdf.mdf import Model

from mdf_loops.authoring.canonical import all_operations
from mdf_loops.authoring.errors import AuthoringError
from mdf_loops.authoring.lowering import to_onnx
from mdf_loops.authoring.rewrite import optimize
from mdf_loops.authoring.shared import SharedOp
from mdf_loops.authoring.symbolic import ROOT, InputOp, Symbol, as_symbol
from mdf_loops.onnx.import_ import onnx_to_mdf

__all__ = ["build_model", "build_onnx", "lower"]


def build_model(
    outputs: Symbol | Sequence[Symbol] | Mapping[str, Symbol],
    name: str = "model",
    inputs: Sequence[Symbol] | None = None,
) -> Model:
    """An MDF model computing ``outputs`` from the inputs they depend on.

    Args:
        outputs: one symbol, a list (named after each symbol's name, else
            ``output_<i>``) or a dict ``{output name: symbol}``.
        name: the model id (also the ONNX graph name).
        inputs: the graph inputs in order (default: those the outputs depend on,
            in the order they were created).
    """
    model = onnx_to_mdf(build_onnx(outputs, name, inputs), model_id=name)
    return model


def build_onnx(
    outputs: Symbol | Sequence[Symbol] | Mapping[str, Symbol],
    name: str = "model",
    inputs: Sequence[Symbol] | None = None,
) -> onnx.ModelProto:
    """The ONNX model that :func:`build_model` converts to MDF."""
    return lower(outputs, name, inputs)[0]


def lower(
    outputs: Symbol | Sequence[Symbol] | Mapping[str, Symbol],
    name: str,
    inputs: Sequence[Symbol] | None,
    shared_as_inputs: bool = False,
) -> tuple[onnx.ModelProto, list[SharedOp]]:
    """The ONNX model, and the shared values it reads as inputs (after the given ``inputs``).

    Without ``shared_as_inputs`` a shared value is a constant holding its current value.
    """
    named = _named_outputs(outputs)
    roots = optimize([symbol for _, symbol in named])
    found = _inputs_of(roots)
    if inputs is None:
        graph_inputs = sorted(found.values(), key=_serial)
    else:
        graph_inputs = [_copy_of_input(s, found) for s in inputs]
        missing = sorted(set(found) - {s.name for s in graph_inputs})
        if missing:
            raise AuthoringError(
                f"model '{name}': the outputs need inputs {missing} that are not in `inputs`"
            )
    shared: list[SharedOp] = []
    if shared_as_inputs:
        shared = sorted(
            (op for op in all_operations(roots) if isinstance(op, SharedOp)),
            key=lambda op: op.serial,
        )
        graph_inputs += [op.outputs[0] for op in shared]
    return to_onnx(list(zip([n for n, _ in named], roots, strict=True)), graph_inputs, name), shared


def _named_outputs(outputs: Any) -> list[tuple[str, Symbol]]:
    if isinstance(outputs, Mapping):
        items = [(str(k), v) for k, v in outputs.items()]
    elif isinstance(outputs, (list, tuple)):
        items = [(getattr(v, "name", None) or f"output_{i}", v) for i, v in enumerate(outputs)]
    else:
        items = [(getattr(outputs, "name", None) or "output", outputs)]
    named = []
    for out_name, value in items:
        symbol = as_symbol(value)
        if symbol.op.scope is not ROOT:
            raise AuthoringError(
                f"output '{out_name}' is {symbol.describe()}, made inside the fn of "
                f"{symbol.op.scope.label}; a model output must be made at the top level"
            )
        named.append((out_name, symbol))
    return named


def _serial(symbol: Symbol) -> int:
    op = symbol.op
    assert isinstance(op, InputOp), "found inputs are input() symbols"
    return op.serial


def _inputs_of(roots: list[Symbol]) -> dict[str, Symbol]:
    """The graph inputs the (copied) roots depend on, by name; two inputs may not share one."""
    found: dict[str, Symbol] = {}
    for op in all_operations(roots):
        if isinstance(op, InputOp):
            symbol = op.outputs[0]
            if found.setdefault(op.name, symbol) is not symbol:
                raise AuthoringError(f"two different inputs are named '{symbol.name}'")
    return found


def _copy_of_input(symbol: Symbol, found: Mapping[str, Symbol]) -> Symbol:
    if not isinstance(symbol, Symbol) or not isinstance(symbol.op, InputOp):
        raise AuthoringError(f"`inputs` must hold symbols made by input(), got {symbol!r}")
    return found.get(symbol.op.name, symbol)
