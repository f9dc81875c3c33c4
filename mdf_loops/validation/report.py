"""Check an MDF model with loop nodes and report every problem, each with its path.

Two layers of checks, both run every time:

1. the JSON Schema of the loop-node convention (``schemas/loop-node.schema.json``,
   shipped in the package as ``mdf_loops/schemas/loop-node.schema.json``): whether a
   document conforms is answered without ``jsonschema``
   (:mod:`mdf_loops.validation.conformance`), which is imported only to say what is
   wrong in one that does not;
2. the rules a schema cannot express (:mod:`mdf_loops.validation.rules`): body
   signatures that match their loop's inputs and outputs, scan axes in range
   where shapes are known, unique ids, edges whose endpoints exist, outer-scope
   reads that resolve, formal outputs that exist, every body input bound, in
   nested bodies at every depth.

A path names a place in the model file the way its keys nest, without the model
id, e.g. ``graphs.main.nodes.rnn.parameters.body``; a list index is written
``formal_outputs[1]``.
"""

from __future__ import annotations

import json
import os
import reprlib
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from modeci_mdf.mdf import Graph, Model, Node

from mdf_loops.errors import ModelError, Problem
from mdf_loops.model.documents import format_path, graphs_as_nodes, read_document
from mdf_loops.model.references import id_problem
from mdf_loops.validation.conformance import conforms

if TYPE_CHECKING:
    import jsonschema

__all__ = ["Problem", "validate", "read_document", "schema", "format_path"]


def validate(
    model_or_path: Model | Mapping | str | os.PathLike, *, expressions: bool = True
) -> list[Problem]:
    """Every problem of a model, in file order (an empty list for a valid model).

    Args:
        model_or_path: an MDF ``Model``, the document of an MDF file as a dict
            (``{model_id: model}``), or a path to MDF JSON/YAML or to ONNX (which
            is imported first).
        expressions: also report expressions the allow-list of
            :mod:`mdf_loops.safety.checks` refuses (off for models you trust).

    Raises:
        ModelError: the file is missing or is not JSON/YAML/ONNX at all (there is
            no model to check).
    """
    try:
        return _problems(model_or_path, expressions)
    except RecursionError:
        raise ModelError(f"{_describe(model_or_path)}: nested too deeply to check") from None


def _describe(model: Any) -> str:
    return os.fspath(model) if _is_path(model) else f"model '{getattr(model, 'id', '?')}'"


def _problems(model_or_path: Any, expressions: bool) -> list[Problem]:
    from mdf_loops.validation.rules import rule_problems

    problems: list[Problem] = []
    model = model_or_path
    if _is_path(model) and os.fspath(model).endswith(".onnx"):
        from mdf_loops.onnx.import_ import onnx_to_mdf

        model = onnx_to_mdf(model)
    document: Mapping[str, Any]
    if isinstance(model, Model):
        problems += _repeated_ids_in_model(model)
        document = _model_document(model)
    elif _is_path(model):
        document = read_document(model)
        from mdf_loops.safety.checks import check_aliases

        check_aliases(document, os.fspath(model))  # a YAML alias bomb must not be walked
    elif isinstance(model, Mapping):
        document = model
    else:
        raise ModelError(
            f"cannot validate a {type(model_or_path).__name__}: expected an MDF Model, "
            "a document dict or a path"
        )
    problems += _repeated_keys(document, ())
    problems += graphs_as_nodes(document)
    problems += _schema_problems(document)
    problems += rule_problems(document)
    structure, refused = _run_refusals(model if isinstance(model, Model) else document)
    for problem in structure:  # what run refuses that the rules above did not report
        if not any(
            _within(known.path, problem.path) or _within(problem.path, known.path)
            for known in problems
        ):
            problems.append(problem)
    if expressions:  # the allow-list of mdf_loops.safety.checks (off for trusted models)
        problems += [p for p in refused if p not in problems]
    return problems


def _run_refusals(model: Model | Mapping) -> tuple[list[Problem], list[Problem]]:
    """What :func:`mdf_loops.run` refuses before evaluating (the same checks: docs/safety.md,
    the calls of :mod:`mdf_loops.validation.calls`, the inputs of
    :mod:`mdf_loops.validation.inputs`)."""
    from mdf_loops.safety.checks import refusals
    from mdf_loops.validation.calls import call_problems
    from mdf_loops.validation.inputs import input_problems

    if not isinstance(model, Model):
        try:
            model = (
                Model.from_dict(dict(model))
                if len(model) != 1
                else Model.from_dict({"id": next(iter(model)), **next(iter(model.values()))})
            )
        except Exception:  # a document the schema rules already reported as malformed
            return [], []
    structure, refused = refusals(model)
    return call_problems(model) + structure + input_problems(model), refused


def _within(path: str, outer: str) -> bool:
    """Whether ``path`` is ``outer`` or a place inside it."""
    return path == outer or path.startswith((outer + ".", outer + "["))


def _is_path(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike))


def _model_document(model: Model) -> dict:
    try:
        return json.loads(model.to_json())
    except (TypeError, ValueError) as exc:
        raise ModelError(f"model '{model.id}' cannot be written as JSON: {exc}") from exc


# ---------------------------------------------------------------- repeated ids


def _repeated_keys(value: Any, path: tuple) -> list[Problem]:
    problems = []
    if isinstance(value, dict):
        shown = path[1:] if path else path  # the model id is not part of a path
        for key in getattr(value, "repeated", ()):
            problems.append(Problem(format_path(shown), f"'{key}' is defined more than once"))
        for key, item in value.items():
            if isinstance(item, (dict, list)):
                problems += _repeated_keys(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            if isinstance(item, (dict, list)):
                problems += _repeated_keys(item, path + (index,))
    return problems


def _repeated_ids_in_model(model: Model) -> list[Problem]:
    """Ids a ``Model`` object repeats in one list (a file cannot hold them; JSON keeps the last)."""
    problems: list[Problem] = []

    def check(items: list, path: str) -> None:
        seen: set = set()
        for item in items:
            if item.id in seen:
                problems.append(Problem(path, f"'{item.id}' is defined more than once"))
            seen.add(item.id)

    def graph(g: Graph, path: str) -> None:
        check(g.nodes, f"{path}.nodes")
        check(g.edges, f"{path}.edges")
        for node in g.nodes:
            if not isinstance(node, Node):
                continue  # a graph where a node belongs: model.documents.graphs_as_nodes reports it
            node_path = f"{path}.nodes.{node.id}"
            for field in ("input_ports", "output_ports", "parameters"):
                check(getattr(node, field), f"{node_path}.{field}")
            for parameter in node.parameters:
                value = parameter.value
                if isinstance(value, Mapping) and len(value) == 1:
                    ((key, inner),) = value.items()
                    if isinstance(inner, Graph):
                        graph(inner, f"{node_path}.parameters.{parameter.id}.value.{key}")

    check(model.graphs, "graphs")
    for g in model.graphs:
        graph(g, f"graphs.{g.id}")
    return problems


# ---------------------------------------------------------------- JSON Schema


@lru_cache(maxsize=1)
def schema() -> dict:
    """The JSON Schema of the loop-node convention."""
    text = resources.files("mdf_loops").joinpath("schemas/loop-node.schema.json").read_text("utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def _validator() -> jsonschema.protocols.Validator:
    import jsonschema  # only for a document that does not conform: what is wrong, where

    cls = jsonschema.validators.validator_for(schema())
    return cls(schema())


_short = reprlib.Repr()
_short.maxstring = 40
_short.maxother = 40
_short.maxlist = 4
_short.maxdict = 3
_short.maxlevel = 2

_JSON_TYPES = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


def _schema_problems(document: Any) -> list[Problem]:
    if conforms(document, schema()):
        return []
    problems = []
    errors = sorted(
        _validator().iter_errors(document), key=lambda e: list(map(str, e.absolute_path))
    )
    for error in errors:
        error = _most_specific(error)
        path = list(error.absolute_path)[1:]  # drop the model id
        message = _schema_message(error)
        if not error.absolute_path and error.validator in _WHOLE_FILE:
            message = f"an MDF file holds one model, {{model_id: {{...}}}}: {message}"
        problems.append(Problem(format_path(path), message))
    return problems


#: schema keywords that, failing on the document itself, mean it is not one model
_WHOLE_FILE = ("type", "minProperties", "maxProperties")

#: the schema's pattern of ids (``$defs.id``)
_ID = "^[^.]+$"


def _most_specific(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For anyOf/oneOf, the failure of the alternative that got furthest into the value."""
    while error.context:
        error = max(error.context, key=lambda e: len(e.absolute_path))
    return error


def _schema_message(error: jsonschema.ValidationError) -> str:
    keyword, expected, instance = error.validator, error.validator_value, error.instance
    if keyword == "type":
        allowed = expected if isinstance(expected, list) else [expected]
        return f"expected {' or '.join(allowed)}, found {_json_type(instance)}"
    if keyword == "pattern" and expected == _ID and (problem := id_problem(instance)):
        return problem
    if keyword == "pattern":
        return f"{_short.repr(instance)} does not match {expected}"
    if keyword == "enum":
        return f"{_short.repr(instance)} is not one of {expected}"
    if keyword in ("minProperties", "minItems"):
        return f"expected at least {expected} entries, found {len(instance)}"
    if keyword in ("maxProperties", "maxItems"):
        return f"expected at most {expected} entries, found {len(instance)}"
    if keyword == "not":
        return f"{_short.repr(instance)} is not allowed here"
    if keyword in ("anyOf", "oneOf"):
        return f"{_short.repr(instance)} matches none of the allowed forms"
    return error.message if len(error.message) <= 200 else error.message[:197] + "..."


def _json_type(value: Any) -> str:
    for python_type, name in _JSON_TYPES.items():
        if type(value) is python_type or (python_type is dict and isinstance(value, dict)):
            return name
    return type(value).__name__
