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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from modeci_mdf.mdf import Graph, Model

from mdf_loops.errors import ModelError

__all__ = ["MARKER_KEY", "OnnxSemantics", "mark_onnx_semantics", "onnx_semantics_of"]

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
