"""What must hold before mdf-loops evaluates a model it does not trust.

modeci-mdf evaluates a model's value expressions with Python's ``eval``, so a
model file could run any code. Before :func:`mdf_loops.run` evaluates anything,
:func:`check_model` parses every expression, in bodies at every depth, and
refuses anything outside the allow-list of :mod:`mdf_loops.safety.allowlist`.
:func:`check_structure` refuses the model shapes that would hang or crash
modeci-mdf's engine (a body that contains itself, and those of
:mod:`mdf_loops.safety.structure`: edges it can never order, dangling edges,
repeated ids, text edge weights, unknown scheduler conditions).
:func:`check_document` does the same for the raw content of a JSON/YAML file
(YAML alias bombs, repeated keys).

``docs/safety.md`` lists what is allowed and what ``trusted=True`` risks.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from modeci_mdf.mdf import Graph, Model, Node

from mdf_loops.errors import ModelError, Problem, UnsafeExpressionError, did_you_mean
from mdf_loops.model.compat import input_default
from mdf_loops.model.convention import body_graph
from mdf_loops.model.documents import format_path
from mdf_loops.model.references import id_problem, parameter_reference_refusal
from mdf_loops.model.standard_functions import is_standard_function
from mdf_loops.onnx.domains import DOMAINS, domain_of_function
from mdf_loops.ops.common import current_limits
from mdf_loops.safety.allowlist import UNSAFE_BUILTINS, expression_refusal
from mdf_loops.safety.documents import (  # noqa: F401 - part of this module's interface
    check_aliases,
    check_document,
    current_limits_key,
    model_digest,
)
from mdf_loops.safety.evaluation import function_refusal
from mdf_loops.safety.structure import (
    condition_problems,
    edge_problems,
    field_of,
    listed_elements,
)

__all__ = [
    "UnsafeExpressionError",
    "check_model",
    "check_structure",
    "check_document",
    "check_aliases",
    "find_unsafe",
    "refusals",
    "model_digest",
    "current_limits_key",
    "known_function",
    "function_names",
]


def known_function(name: str) -> bool:
    """Whether ``name`` is (or, once mdf-loops registers, will be) in modeci-mdf's registry."""
    from mdf_loops.model.convention import CONTROL_FLOW_FUNCTIONS

    if name in CONTROL_FLOW_FUNCTIONS:
        return True
    found = domain_of_function(name)  # every operator of a supported domain is registered
    if found is not None:
        import onnx.defs

        domain, op_type = found
        if onnx.defs.has(op_type, domain.name):
            return True
    return is_standard_function(name)


def function_names() -> list[str]:
    """Every name :func:`known_function` accepts (for the suggestions of a refusal)."""
    import onnx.defs
    from modeci_mdf.functions.standard import mdf_functions

    return list(mdf_functions) + [
        domain.function(s.name)
        for domain in DOMAINS
        for s in onnx.defs.get_all_schemas()
        if s.domain == domain.name
    ]


# ---------------------------------------------------------------- public checks


def find_unsafe(model: Model, *, structure: bool = True) -> list[Problem]:
    """Every unsafe expression of ``model`` (and, with ``structure``, every structure the
    engine would hang or crash on), each with its path in the model file."""
    walker = _walked(model)
    return (walker.structure if structure else []) + walker.mistakes + walker.expressions


def refusals(model: Model) -> tuple[list[Problem], list[Problem]]:
    """(structure problems, refused text) of ``model``: everything :func:`mdf_loops.run`
    refuses before evaluating (the structure always; unless trusted, text that is no
    expression, unknown functions and refused expressions)."""
    walker = _walked(model)
    return walker.structure, walker.mistakes + walker.expressions


def check_model(model: Model) -> None:
    """Raise :class:`UnsafeExpressionError` unless every expression of ``model`` is allowed
    (:class:`ModelError` for text that is no expression or an unknown function)."""
    walker = _walked(model, structure=False)
    if walker.mistakes:
        more = f" (and {len(walker.mistakes) - 1} more)" if len(walker.mistakes) > 1 else ""
        raise ModelError(f"{walker.mistakes[0]}{more}")
    if walker.expressions:
        raise UnsafeExpressionError(walker.expressions)


def check_structure(model: Model) -> None:
    """Raise :class:`ModelError` for a model the engine would hang or crash on."""
    walker = _walked(model)
    if walker.structure:
        more = f" (and {len(walker.structure) - 1} more)" if len(walker.structure) > 1 else ""
        raise ModelError(f"{walker.structure[0]}{more}")


def _parses(text: str) -> bool:
    try:
        ast.parse(text.lstrip(" \t"), mode="eval")
    except (SyntaxError, ValueError):
        return False
    except (RecursionError, MemoryError):
        return True
    return True


def _walked(model: Model, structure: bool = True) -> _ModelWalker:
    walker = _ModelWalker(structure)
    try:
        walker.model(model)
    except RecursionError:
        walker.structure.append(Problem("", "the model nests too deeply to be checked"))
    return walker


# ---------------------------------------------------------------- models

#: the types of a field's value that hold no text to check
_NOTHING_TO_CHECK = frozenset({type(None), int, float, bool})


class _ModelWalker:
    """Walks a model, its bodies at every depth, collecting structure and expression problems."""

    def __init__(self, structure: bool = True) -> None:
        """``structure``: look for the shapes the engine would hang or crash on too."""
        self._structure = structure
        self.structure: list[Problem] = []
        self.mistakes: list[Problem] = []  # not expressions at all, unknown functions
        self.expressions: list[Problem] = []
        self._open: set[int] = set()  # bodies being walked: one seen again contains itself
        self._max_depth = current_limits().max_depth
        self._bound_later: frozenset = frozenset()  # see node()

    def model(self, model: Model) -> None:
        for graph in self._elements(model, "graphs", ()):
            self.graph(graph, ("graphs", graph.id), 0)

    def graph(self, graph: Graph, path: tuple, depth: int) -> None:
        nodes = self._elements(graph, "nodes", path)
        edges = self._elements(graph, "edges", path)
        if self._structure:
            self.structure.extend(edge_problems(graph.id, nodes, edges, path))
            self.structure.extend(condition_problems(graph, path))
        for node in nodes:
            self.node(node, path + ("nodes", node.id), depth)

    def node(self, node: Node, path: tuple, depth: int) -> None:
        input_ports_, output_ports, parameters, functions = (
            self._elements(node, field, path)
            for field in ("input_ports", "output_ports", "parameters", "functions")
        )
        names = frozenset(item.id for item in (*input_ports_, *parameters, *functions))
        # A parameter named like a builtin ('input') is read as the node's value (the
        # allow-list refuses calling it) where modeci-mdf has evaluated it: in the node's
        # functions, output ports and the parameters listed after it. modeci-mdf orders
        # parameters counting every builtin's name as known, so one listed before it
        # would meet the builtin.
        unbound = frozenset(p.id for p in parameters) & UNSAFE_BUILTINS
        for port in input_ports_:  # text here is data: evaluated only if a bare name reads it
            self.value(
                input_default(port),
                path + ("input_ports", port.id, "default_value"),
                names,
                depth,
                text_is_data=True,
            )
        for parameter in parameters:
            where = path + ("parameters", parameter.id)
            bound, self._bound_later = (names - unbound if unbound else names), unbound
            self._callable(parameter, where, bound, depth)
            conditions = parameter.conditions or ()
            for index, condition in enumerate(conditions if isinstance(conditions, list) else ()):
                cid = field_of(condition, "id") or index
                for field in ("test", "value"):
                    self.value(
                        field_of(condition, field), where + ("conditions", cid, field), bound, depth
                    )
            unbound -= {parameter.id}
        self._bound_later = frozenset()
        for function in functions:
            self._callable(function, path + ("functions", function.id), names, depth)
        for port in output_ports:
            self.value(port.value, path + ("output_ports", port.id, "value"), names, depth)

    def _callable(self, item: Any, where: tuple, node_names: frozenset, depth: int) -> frozenset:
        """Check a parameter's or function's value fields and args; return its names."""
        args = item.args or {}
        if not isinstance(args, Mapping):
            self.structure.append(
                Problem(
                    format_path(where + ("args",)),
                    f"expected a mapping of arguments, found {args!r:.40}",
                )
            )
            args = {}
        names = node_names | frozenset(args) if args else node_names
        for field in ("value", "default_initial_value", "time_derivative"):
            value = getattr(item, field, None)
            if type(value) not in _NOTHING_TO_CHECK:  # what value() returns at once for
                self.value(value, where + (field,), names, depth)
                self._reference(value, where + (field,), names)
        for name, arg in args.items():
            self.value(arg, where + ("args", name), names, depth)
            self._reference(arg, where + ("args", name), names)
        function = getattr(item, "function", None)
        if function is None:
            return names
        refusal = function_refusal(function)
        if refusal:
            self.expressions.append(Problem(format_path(where + ("function",)), refusal))
        elif isinstance(function, str) and not known_function(function):
            if "::" in function:  # the form of a registered function's name
                self.mistakes.append(
                    Problem(
                        format_path(where + ("function",)),
                        f"unknown function '{function}'"
                        + did_you_mean(function, function_names(), "registered functions"),
                    )
                )
            else:
                self.value(function, where + ("function",), names, depth)  # run as code
        return names

    def _reference(self, text: Any, path: tuple, names: frozenset) -> None:
        """A parameter's field that is exactly an id that is not a Python name, which
        modeci-mdf's engine cannot build (``model/references.py``)."""
        if type(text) is str and text in names:  # a reference at all (few fields are)
            refusal = parameter_reference_refusal(text, names)
            if refusal:
                self.structure.append(Problem(format_path(path), refusal))

    def value(
        self, value: Any, path: tuple, names: frozenset, depth: int, text_is_data: bool = False
    ) -> None:
        if type(value) in _NOTHING_TO_CHECK:  # most fields
            return
        if isinstance(value, str):
            reason = expression_refusal(value, names, text_is_data, self._bound_later)
            if reason:
                (self.expressions if _parses(value) else self.mistakes).append(
                    Problem(format_path(path), reason)
                )
        elif isinstance(value, (Graph, Mapping)):
            if not self._body(value, path, depth) and isinstance(value, Mapping):
                self._data(value, path, names)
        elif isinstance(value, (list, tuple)):
            self._data(value, path, names)

    def _data(self, value: Any, path: tuple, names: frozenset) -> None:
        """Text inside a dict or list value, at any depth: data, never an allowed expression's
        disguise (modeci-mdf's ACT-R functions join such text into code)."""
        stack = [(value, path)]
        while stack:
            item, where = stack.pop()
            if isinstance(item, str):
                reason = expression_refusal(item, names, True, self._bound_later)
                if reason:
                    self.expressions.append(Problem(format_path(where), reason))
            elif isinstance(item, Mapping):
                stack.extend((v, where + (str(k),)) for k, v in item.items())
            elif isinstance(item, (list, tuple)):
                stack.extend((v, where + (i,)) for i, v in enumerate(item))

    def _body(self, value: Any, path: tuple, depth: int) -> bool:
        """Walk ``value`` as a loop body; False when it is no graph."""
        wrapped = False  # the stored form of a body, {"graph_<id>": graph}
        if isinstance(value, Mapping) and len(value) == 1:
            ((key, inner),) = value.items()
            if isinstance(key, str) and key.startswith("graph_"):
                path = path + (key,)
                wrapped = isinstance(inner, Mapping)
        try:
            graph = body_graph(value, format_path(path))
        except ModelError as exc:
            if wrapped:  # meant as a body: the engine would fail to build it
                self.structure.append(Problem(format_path(path), str(exc)))
                return True
            return False  # not a graph: the engine never builds it as a body
        if depth + 1 > self._max_depth:
            return True  # never built: the run stops with DepthLimitError before this depth
        key = id(value)
        if key in self._open or id(graph) in self._open:
            self.structure.append(Problem(format_path(path), "this body contains itself"))
            return True
        self._open |= {key, id(graph)}
        try:
            self.graph(graph, path, depth + 1)
        finally:
            self._open -= {key, id(graph)}
        return True

    def _elements(self, owner: Any, field: str, path: tuple) -> list:
        """The elements of a list field, after reporting a field of another type or repeated ids."""
        items, problems = listed_elements(owner, field, path)
        self.structure.extend(problems)
        if field != "edges":  # an edge's id is a label (modeci-mdf writes 'a.out_b.in')
            self.structure.extend(_id_problems(items, path + (field,)))
        return items


def _id_problems(items: list, path: tuple) -> list[Problem]:
    """The ids no element can hold (empty, or with '.': ``model/references.py``)."""
    return [
        Problem(format_path(path), problem) for item in items if (problem := id_problem(item.id))
    ]
