"""The content of an MDF JSON or YAML file as plain data, read once through the gate.

:func:`read_document` reads a model file with :func:`mdf_loops.files.read_file`
(a regular file, of bounded size) and parses it as JSON or safe YAML, keeping
track of keys a mapping repeats; what JSON cannot hold (non-text keys, sets,
bytes, integers too long to write as text) is refused, and a YAML timestamp is
its text, as JSON would have it. :func:`format_path` writes a place in a model
(``graphs.main.nodes.n``) for messages. :func:`graphs_as_nodes` finds the graphs a
document writes where a node belongs, which loading would drop without a word
(:func:`mdf_loops.model.load_model` refuses them, :func:`mdf_loops.validate` lists them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from mdf_loops.errors import ModelError, Problem
from mdf_loops.files import read_file

__all__ = [
    "read_document",
    "read_noted_document",
    "DocumentNotes",
    "format_path",
    "MAX_INTEGER_BITS",
    "graph_as_node",
    "graphs_as_nodes",
    "check_document_nodes",
    "refuse",
    "PLAIN_SCALARS",
]

#: the types of a document's entries that hold no list or mapping (the walks skip them)
PLAIN_SCALARS = frozenset({str, int, float, bool, type(None)})


def format_path(parts: Iterable[Any]) -> str:
    """A path as text.

    ``('graphs', 'main', 'metadata', 'formal_outputs', 1)`` becomes
    ``graphs.main.metadata.formal_outputs[1]``.
    """
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


# ---------------------------------------------------------------- reading files


class _KeyedDict(dict):
    """A mapping read from a file, remembering keys the file gave more than once."""

    repeated: tuple = ()


def _from_pairs(pairs: list[tuple[Any, Any]]) -> _KeyedDict:
    result = _KeyedDict(pairs)
    if len(result) < len(pairs):  # a key given more than once (the last value kept)
        seen: set = set()
        repeated = []
        for key, _ in pairs:
            if key in seen:
                repeated.append(key)
            seen.add(key)
        result.repeated = tuple(dict.fromkeys(repeated))
    return result


class _YamlLoader(yaml.SafeLoader):
    """A safe YAML loader that keeps track of repeated keys."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict:
    loader.flatten_mapping(node)
    pairs = loader.construct_pairs(node, deep=True)
    for key, _ in pairs:
        if not isinstance(key, (str, int, float, bool)) and key is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"a {type(key).__name__} as a key (MDF keys are names)", node.start_mark
            )
    return _from_pairs(pairs)


def _construct_text(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_YamlLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_YamlLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_text)  # text, as in JSON

#: bits of the largest integer a file may hold (Python writes at most 4,300 digits as text)
MAX_INTEGER_BITS = 14_000


def _plain_data_problem(document: Any) -> str | None:
    """Where ``document`` holds something JSON cannot (a non-text key, a set, bytes, an
    integer too long to write as text), or None. (A path is written out only for a
    problem: a model's weights are thousands of numbers.)"""
    problem = _scalar_problem(document)
    if problem is not _CONTAINER:
        return problem and f"top level: {problem}"
    stack: list[tuple[Any, tuple]] = [(document, ())]
    seen: set[int] = set()
    while stack:
        item, where = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            for key, value in item.items():
                if not isinstance(key, str):
                    return f"{_place(where)}: key {key!r:.60} is not text (MDF keys are names)"
                problem = _scalar_problem(value)
                if problem is _CONTAINER:
                    stack.append((value, where + (key,)))
                elif problem:
                    return f"{_place(where + (key,))}: {problem}"
        else:
            for i, value in enumerate(item):
                problem = _scalar_problem(value)
                if problem is _CONTAINER:
                    stack.append((value, where + (i,)))
                elif problem:
                    return f"{_place(where + (i,))}: {problem}"
    return None


_CONTAINER = "a dict or a list"


def _scalar_problem(item: Any) -> str | None:
    """Why ``item`` is not MDF data, :data:`_CONTAINER` for a dict or a list, else None."""
    kind = type(item)
    if kind is float or kind is str or kind is bool or item is None:
        return None
    if isinstance(item, (dict, list)):
        return _CONTAINER
    if isinstance(item, bool) or isinstance(item, (str, float)):
        return None
    if isinstance(item, int):
        if item.bit_length() > MAX_INTEGER_BITS:
            return f"an integer of {item.bit_length()} bits is too long to use"
        return None
    return f"a {type(item).__name__} value is not MDF data"


def _place(where: tuple) -> str:
    return format_path(where) or "top level"


def read_document(path: str | os.PathLike) -> Any:
    """The content of an MDF JSON or YAML file as plain data (dicts, lists, scalars).

    Raises:
        ModelError: the file is missing, unreadable, or not valid JSON/YAML,
            with the line and column of a syntax error.
    """
    return read_noted_document(path)[0]


@dataclass
class DocumentNotes:
    """What the parser met while reading a file, so that the walks of its content after
    it run only where they can find something (each True where not known: YAML)."""

    #: a mapping gave a key more than once
    repeated_keys: bool = True
    #: a mapping's ``nodes`` holds a mapping with ``nodes`` (a graph where a node belongs)
    graphs_as_nodes: bool = True
    #: an integer too long to use (JSON's only content that is not MDF data)
    long_integers: bool = True


def read_noted_document(path: str | os.PathLike) -> tuple[Any, DocumentNotes]:
    """:func:`read_document`, and what its parser met on the way."""
    path = os.fspath(path)
    if not path.endswith((".json", ".yaml", ".yml")):
        raise ModelError(f"{path}: expected a .json, .yaml, .yml or .onnx file")
    data = read_file(path)  # a regular file, of bounded size (mdf_loops.files)
    notes = DocumentNotes()
    try:
        text = data.decode("utf-8")
        if path.endswith(".json"):
            notes = DocumentNotes(False, False, False)
            reading = _JsonReading(notes)
            document = json.loads(
                text, object_pairs_hook=reading.mapping, parse_int=reading.integer
            )
        else:
            document = yaml.load(text, Loader=_YamlLoader)
    except UnicodeDecodeError as exc:
        raise ModelError(f"{path}: not a text file ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ModelError(
            f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except yaml.YAMLError as exc:
        raise ModelError(f"{path}: not valid YAML: {_yaml_reason(exc)}") from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot be read ({exc.strerror})") from None
    except RecursionError:
        raise ModelError(f"{path}: nested too deeply to read") from None
    except (ValueError, TypeError) as exc:  # an integer of more digits than Python converts
        raise ModelError(
            f"{path}: not a readable model file ({' '.join(str(exc).split())})"
        ) from None
    # JSON has text keys and plain scalars only: its content is walked for the place of a
    # long integer, YAML's always
    problem = _plain_data_problem(document) if notes.long_integers else None
    if problem:
        raise ModelError(f"{path}: {problem}")
    return document, notes


class _JsonReading:
    """The JSON parser's hooks for one file: mappings and integers, noting what the walks
    after it look for."""

    def __init__(self, notes: DocumentNotes) -> None:
        self.notes = notes

    def mapping(self, pairs: list[tuple[Any, Any]]) -> dict:
        result = dict(pairs)
        if len(result) < len(pairs):  # a key given more than once: noted, and where
            result = _from_pairs(pairs)
            self.notes.repeated_keys = True
        nodes = result.get("nodes")
        if isinstance(nodes, dict) and any(
            isinstance(n, dict) and "nodes" in n for n in nodes.values()
        ):
            self.notes.graphs_as_nodes = True
        return result

    def integer(self, digits: str) -> int:
        value = int(digits)
        if value.bit_length() > MAX_INTEGER_BITS:
            self.notes.long_integers = True
        return value


def _yaml_reason(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    if mark is None:
        return problem
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"


def graph_as_node(node_id: Any) -> str:
    """The message for a graph written where a node belongs."""
    return (
        f"'{node_id}' is a graph, not a node: a graph inside a graph's nodes is what stock "
        "modeci-mdf's pytorch_to_mdf and onnx_to_mdf write for a loop, and it would be left "
        "out of the run. Import the PyTorch module with mdf_loops.from_pytorch (or an ONNX "
        "file with mdf_loops.onnx_to_mdf), which keep loops as onnx::Scan/Loop nodes"
    )


def graphs_as_nodes(document: Any, path: tuple = ()) -> list[Problem]:
    """The graphs written where a node belongs in a model document, at every depth.

    Loading such a file drops the graph's content without a word, so this reads the
    document itself (``path`` starts after the model id).
    """
    problems: list[Problem] = []
    stack = [(document, path, True)]
    while stack:
        value, where, top = stack.pop()
        if isinstance(value, Mapping):
            nodes = value.get("nodes") if not top else None
            if isinstance(nodes, Mapping):
                for node_id, node in nodes.items():
                    if isinstance(node, Mapping) and "nodes" in node:
                        at = format_path(where + ("nodes", node_id))
                        problems.append(Problem(at, graph_as_node(node_id)))
            stack.extend(
                (v, where + (k,) if not top else where, False)
                for k, v in value.items()
                if type(v) not in PLAIN_SCALARS
            )
        elif isinstance(value, list):
            stack.extend(
                (v, where + (i,), False)
                for i, v in enumerate(value)
                if type(v) not in PLAIN_SCALARS
            )
    return sorted(problems, key=lambda p: p.path)


def check_document_nodes(document: Any, path: str) -> None:
    """Raise :class:`ModelError` for a graph written where a node belongs in the document
    of the file ``path`` (loading it would drop the graph)."""
    refuse(graphs_as_nodes(document), f"{path}: ")


def refuse(problems: list[Problem], prefix: str = "") -> None:
    """Raise :class:`ModelError` for the first of ``problems`` (saying how many more), if any."""
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ModelError(f"{prefix}{problems[0]}{more}")
