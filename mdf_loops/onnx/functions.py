"""Inline an ONNX model's local functions, whatever their opset, and drop the domains left unused.

``onnx.inliner.inline_local_functions`` leaves in place the calls of a function
that imports another default-domain opset than the model (skl2onnx's KNNImputer
declares its functions at opset 21 inside an opset-22 model). Before inlining,
each such function is brought to the model's opset:

* when none of its operators changed between the two opsets (the schema in force
  is the same one), only the function's declared opset changes;
* otherwise onnx's version converter converts the function's body;
* when neither works, a ModelError names the function and the operators that changed.

After inlining, the opset imports of domains no node uses any more (the
functions' own domain, ``local_domain`` or onnxscript's ``this``) are dropped.
"""

from __future__ import annotations

import onnx
import onnx.inliner  # a submodule `import onnx` does not load
import onnx.version_converter
from onnx import helper

from mdf_loops.errors import ModelError
from mdf_loops.onnx.builder import all_nodes

__all__ = ["inline_functions", "used_domains"]

_DEFAULT = ("", "ai.onnx")


def inline_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every local function inlined and unused domains dropped."""
    if not model.functions:
        return model
    version = _default_version(model.opset_import)
    aligned = onnx.ModelProto()
    aligned.CopyFrom(model)
    if version is not None:
        for function in aligned.functions:
            _align(function, version)
    inlined = onnx.inliner.inline_local_functions(aligned)
    functions = {(f.domain, f.name) for f in model.functions}
    left = sorted({(n.domain, n.op_type) for n in all_nodes(inlined.graph)} & functions)
    if left:
        raise ModelError(
            f"local functions {[f'{d}::{n}' for d, n in left]} could not be "
            "inlined; inline them before importing (onnx.inliner)"
        )
    del inlined.functions[:]
    used = used_domains(inlined.graph)
    kept = [o for o in inlined.opset_import if o.domain in _DEFAULT or o.domain in used]
    del inlined.opset_import[:]
    inlined.opset_import.extend(kept)
    return inlined


def used_domains(graph: onnx.GraphProto) -> set[str]:
    """The domains of the nodes of ``graph`` and its subgraphs."""
    return {node.domain for node in all_nodes(graph)}


def _default_version(opsets) -> int | None:
    return next((o.version for o in opsets if o.domain in _DEFAULT), None)


def _function_nodes(function: onnx.FunctionProto):
    for node in function.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(attr.g)


def _align(function: onnx.FunctionProto, version: int) -> None:
    """Bring ``function`` to default-domain opset ``version`` in place (see the module doc)."""
    own = _default_version(function.opset_import)
    if own is None or own == version:
        return
    changed = sorted(
        {
            node.op_type
            for node in _function_nodes(function)
            if node.domain in _DEFAULT and not _same_schema(node.op_type, own, version)
        }
    )
    if changed:
        _convert(function, own, version, changed)
    for opset in function.opset_import:
        if opset.domain in _DEFAULT:
            opset.version = version


def _same_schema(op_type: str, old: int, new: int) -> bool:
    try:
        return (
            onnx.defs.get_schema(op_type, old, "").since_version
            == onnx.defs.get_schema(op_type, new, "").since_version
        )
    except onnx.defs.SchemaError:
        return False


def _convert(function: onnx.FunctionProto, old: int, new: int, changed: list[str]) -> None:
    """Convert the body of ``function`` from opset ``old`` to ``new`` with onnx's converter."""
    graph = helper.make_graph(
        list(function.node),
        function.name,
        [onnx.ValueInfoProto(name=n) for n in function.input],
        [onnx.ValueInfoProto(name=n) for n in function.output],
    )
    wrapper = helper.make_model(graph, opset_imports=list(function.opset_import))
    try:
        converted = onnx.version_converter.convert_version(wrapper, new)
    except Exception as exc:  # the converter raises RuntimeError/ConvertError of its own
        raise ModelError(
            f"local function '{function.domain}::{function.name}' imports opset {old}, the model "
            f"opset {new}; its operators {changed} changed between them and onnx's version "
            f"converter failed ({exc}); export the model with one opset"
        ) from exc
    del function.node[:]
    function.node.extend(converted.graph.node)
