"""The loop-node convention: how ONNX Scan, Loop and If live in an MDF model.

A loop node is an ordinary MDF node whose function is ``onnx::Scan`` (``onnx::Loop``,
``onnx::If``), with its body graph in the parameter ``body`` (:func:`wrap_body`); the
body names its formal inputs and outputs in its metadata (:func:`set_body_signature`,
read back by :func:`body_signature`). See docs/representation.md.

The names here build and read such models: the body convention, declared input types
(:func:`port_type`), default input values (:func:`set_input_defaults`), the names a
graph's inputs and outputs go by (:func:`graph_interface`), the marker asking for
ONNX's semantics of ``onnx::`` functions (:func:`mark_onnx_semantics`), and a run
through modeci-mdf's own engine (:func:`stock_evaluate`).
"""

from mdf_loops.model.convention import (
    BodySignature,
    body_graph,
    body_signature,
    port_type,
    set_body_signature,
    wrap_body,
)
from mdf_loops.model.interface import (
    GraphInterface,
    graph_interface,
    set_input_defaults,
    stock_evaluate,
)
from mdf_loops.model.semantics import mark_onnx_semantics

__all__ = [
    "BodySignature",
    "body_graph",
    "body_signature",
    "set_body_signature",
    "wrap_body",
    "port_type",
    "GraphInterface",
    "graph_interface",
    "set_input_defaults",
    "stock_evaluate",
    "mark_onnx_semantics",
]
