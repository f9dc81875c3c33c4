"""MDF -> ONNX: every node becomes ONNX nodes; loop bodies become subgraphs.

The exporter walks each graph in dependency order and translates, per node:

* a function parameter ``onnx::<Op>`` into that ONNX node (attributes from the
  node's parameters of the same names; ``onnx::Scan``/``Loop``/``If`` bodies
  exported recursively into ``GraphProto`` attributes, outer-scope inputs
  becoming references to the enclosing graph's values again);
* a function parameter or function with an MDF standard function (``linear``,
  ``logistic``, ``tanh``, ...) into the ONNX nodes of its expression;
* parameter values and output-port values written as expressions (``x * w + b``,
  ``tanh(a) * 2``, ``maximum(a, 0)``) into ONNX nodes, by parsing them
  (:mod:`mdf_loops.onnx.expressions`).

Element types follow the values: imported ONNX models keep theirs; an input port
of a hand-written model without a ``type`` is float64 (numpy's default), and
literals take the type of the tensor they meet.

This module is the entry point; the work is split by job:
:mod:`mdf_loops.onnx.export_graph` (graphs and nodes),
:mod:`mdf_loops.onnx.export_calls` (``onnx::<Op>`` calls and MDF standard functions),
:mod:`mdf_loops.onnx.export_loops` (Scan, Loop and If with their bodies),
:mod:`mdf_loops.onnx.export_items` (what is read off MDF parameters and ports).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import onnx
from modeci_mdf.mdf import Model
from onnx import helper

from mdf_loops.errors import ModelError
from mdf_loops.model.interface import load_model, select_graph
from mdf_loops.onnx.defaults import optional_defaults
from mdf_loops.onnx.domains import DEFAULT, DEFAULT_OPSET, other_opsets
from mdf_loops.onnx.export_graph import Exporter, UntypedInputError
from mdf_loops.onnx.ort_safe import make_safe

__all__ = [
    "mdf_to_onnx",
    "save_onnx",
    "export_model",
    "ExportResult",
    "DEFAULT_OPSET",
    "UntypedInputError",
]


@dataclass(frozen=True)
class ExportResult:
    """An exported ONNX model, and which MDF loop node each of its loop nodes came from."""

    model: onnx.ModelProto
    #: ONNX node name -> id of the MDF node, for every Scan, Loop and If at any depth
    labels: Mapping[str, str]


def mdf_to_onnx(
    model: Model | str | os.PathLike,
    *,
    graph: str | None = None,
    example_inputs: Mapping[str, Any] | None = None,
    opset: int | None = None,
) -> onnx.ModelProto:
    """Export an MDF model (with or without loops) as an ONNX model.

    Args:
        model: an MDF ``Model`` or a path to MDF JSON/YAML.
        graph: id of the graph to export (default: the first).
        example_inputs: values by input name; their dtypes and shapes type the
            ONNX inputs where the model does not declare them.
        opset: ONNX opset to declare (default: ``Model.onnx_opset_version``, else
            :data:`DEFAULT_OPSET`).

    The inputs and outputs keep the names :func:`mdf_loops.run` uses. The model
    imports the default-domain opset and the opset of each other domain its nodes
    use (``onnxml::`` functions: ``ai.onnx.ml``, at the version the graph's
    ``metadata["onnx_other_opsets"]`` records, else the newest). Inputs of a
    fixed element type (a Loop's trip count is int64) are cast to it. The result
    passes ``onnx.checker.check_model(full_check=True)``; a model that would not
    is a ModelError saying why.

    The result is the form onnxruntime runs with :func:`mdf_loops.run`'s answers
    (:func:`mdf_loops.onnx.ort_safe.make_safe`: a Scan or Loop that may run zero
    times inside an ``If`` that gives the reference answer, a scan axis other than
    0 moved out of the Scan, integer division guarded against the traps that kill
    onnxruntime's process): the compiled mode of ``run`` runs this same model. An
    input with a ``default_value`` is an input of ``optional`` type (from opset 15):
    a session may leave it out to use the default, or feed an array
    (:mod:`mdf_loops.onnx.defaults`; not an initializer, which onnxruntime warns of).
    """
    exported = export_model(model, graph=graph, example_inputs=example_inputs, opset=opset)
    runnable = optional_defaults(make_safe(exported.model))
    if runnable is not exported.model:
        _check(runnable, exported.model.graph.name)
    return runnable


def export_model(
    model: Model | str | os.PathLike,
    *,
    graph: str | None = None,
    example_inputs: Mapping[str, Any] | None = None,
    opset: int | None = None,
) -> ExportResult:
    """:func:`mdf_to_onnx`, with the MDF node id of each exported loop node (the
    onnxruntime backend names them in its errors)."""
    model = load_model(model)
    target = select_graph(model, graph)
    version = int(opset or model.onnx_opset_version or DEFAULT_OPSET)
    exporter = Exporter(version, other_opsets(target.metadata))
    onnx_graph = exporter.top_graph(target, dict(example_inputs or {}))
    opsets = [helper.make_opsetid("", version)]
    for domain in sorted(exporter.domains_used - {DEFAULT}, key=lambda d: d.name):
        opsets.append(helper.make_opsetid(domain.name, exporter.version_of(domain)))
    result = helper.make_model(onnx_graph, opset_imports=opsets, producer_name="mdf-loops")
    result.ir_version = helper.find_min_ir_version_for(opsets)
    for output in result.graph.output:
        if output.type.HasField("tensor_type") and not output.type.tensor_type.HasField("shape"):
            raise ModelError(
                f"graph '{target.id}' output '{output.name}': its rank cannot be "
                "inferred; give the inputs shapes (example_inputs)"
            )
    _check(result, target.id)
    return ExportResult(result, dict(exporter.labels))


def _check(model: onnx.ModelProto, graph_id: str) -> None:
    """A ModelError when ``model`` fails ``onnx.checker.check_model(full_check=True)``."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # ValidationError, InferenceError, and the C++ checker's others
        reason = _shortened(" ".join(str(exc).split()), 600)
        raise ModelError(
            f"graph '{graph_id}': the exported ONNX model fails onnx.checker "
            f"({type(exc).__name__}: {reason}); it was not written. Declare the types of "
            "the graph's inputs (input port 'type' or example_inputs), or fix the node "
            "the checker names"
        ) from exc


def _shortened(text: str, limit: int) -> str:
    """``text``, or its first words up to ``limit`` characters and '...' (never a cut word)."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " ..."


def save_onnx(model: Model | str | os.PathLike, path: str | os.PathLike, **kwargs: Any) -> None:
    """Export ``model`` and write it to ``path``."""
    onnx.save(mdf_to_onnx(model, **kwargs), os.fspath(path))
