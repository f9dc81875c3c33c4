"""The marker that asks for ONNX semantics: models that mdf-loops imported or built.

modeci-mdf's own engine evaluates an ``onnx::<Op>`` function its own way
(onnxruntime at opset 15, float32 results widened to float64). A model that
mdf-loops converted from ONNX (or lowered from the authoring layer) means the
operators of its ONNX opset, with ONNX's exact element types. The converter
marks each of its top-level graphs (the engine sees graphs, not models)::

    graph.metadata["mdf_loops"] = {"semantics": "onnx", "onnx_opset": 8}

and the scheduler backend gives a marked graph ONNX semantics under the stock
``EvaluableGraph`` as under :func:`mdf_loops.run`. Unmarked graphs keep stock
modeci-mdf's behaviour, except inside loop bodies.

Where ONNX semantics apply while modeci-mdf's engine runs is a context variable
(:class:`onnx_semantics`). Outside it, the engine hooks leave the stock behaviour
(stock ``onnx::`` evaluation, errors, prints, formatting, no step limit). It is set
by the calls of ``onnx::Scan``, ``onnx::Loop`` and ``onnx::If`` (their bodies
included), by ``EvaluableGraph`` for marked graphs, and by :func:`mdf_loops.run` on
the scheduler backend. :class:`prints_logged` sends the engine's prints to the log
where mdf-loops runs the stock engine for its own purposes (the time-loop probe).
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass
from typing import Any

from modeci_mdf.mdf import Graph, Model

from mdf_loops.errors import ModelError

__all__ = [
    "MARKER_KEY",
    "OnnxSemantics",
    "mark_onnx_semantics",
    "onnx_semantics_of",
    "onnx_semantics",
    "onnx_semantics_active",
    "engine_prints_logged",
    "prints_logged",
]

#: the key of the marker in ``Graph.metadata`` (and ``Model.metadata``)
MARKER_KEY = "mdf_loops"


@dataclass(frozen=True)
class OnnxSemantics:
    """A graph's request for ONNX semantics, under ``opset`` (None: the newest)."""

    opset: int | None = None

    def to_metadata(self) -> dict[str, Any]:
        marker: dict[str, Any] = {"semantics": "onnx"}
        if self.opset is not None:
            marker["onnx_opset"] = self.opset
        return marker


def mark_onnx_semantics(model: Model | Graph, opset: int | None = None) -> Model | Graph:
    """Mark ``model`` (each of its graphs) or one graph for ONNX semantics; returns it."""
    marker = OnnxSemantics(None if opset is None else int(opset)).to_metadata()
    graphs = model.graphs if isinstance(model, Model) else [model]
    for element in ([model] if isinstance(model, Model) else []) + list(graphs):
        element.metadata = {**(element.metadata or {}), MARKER_KEY: dict(marker)}
    return model


def onnx_semantics_of(graph: Graph) -> OnnxSemantics | None:
    """The marker of ``graph``, or None when it has none."""
    metadata = graph.metadata
    if not metadata or MARKER_KEY not in metadata:
        return None
    marker = metadata[MARKER_KEY]
    if not isinstance(marker, dict) or marker.get("semantics") != "onnx":
        raise ModelError(
            f"graph '{graph.id}': metadata '{MARKER_KEY}' must be "
            f"{{'semantics': 'onnx', 'onnx_opset': <int>}}, not {marker!r}; "
            "remove it to run the graph with stock modeci-mdf semantics"
        )
    opset = marker.get("onnx_opset")
    try:
        return OnnxSemantics(None if opset in (None, "") else int(opset))
    except (TypeError, ValueError):
        raise ModelError(
            f"graph '{graph.id}': metadata '{MARKER_KEY}' has onnx_opset "
            f"{opset!r}, which is not a number"
        ) from None


_ACTIVE: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "mdf_loops_onnx_semantics", default=False
)


def onnx_semantics_active() -> bool:
    """True while the engine evaluates with ONNX semantics."""
    return _ACTIVE.get()


class onnx_semantics:  # noqa: N801 (used as a context manager, like a function)
    """Evaluate with ONNX semantics inside the ``with`` block (once per iteration: kept cheap)."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _ACTIVE.set(True)

    def __exit__(self, *exc_info: object) -> None:
        _ACTIVE.reset(self._token)


_PRINTS_LOGGED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "mdf_loops_engine_prints_logged", default=False
)


def engine_prints_logged() -> bool:
    """True while the stock engine's prints go to the DEBUG log (ONNX semantics, or
    mdf-loops itself running the stock engine, as the time-loop probe does)."""
    return _ACTIVE.get() or _PRINTS_LOGGED.get()


class prints_logged:  # noqa: N801 (used as a context manager, like a function)
    """Send the stock engine's prints to the DEBUG log inside the ``with`` block
    (library code that runs the engine for its own purposes must not print)."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _PRINTS_LOGGED.set(True)

    def __exit__(self, *exc_info: object) -> None:
        _PRINTS_LOGGED.reset(self._token)
