"""When an MDF expression is a reference to a value by its id: stock modeci-mdf's rule.

modelspec's ``evaluate`` (which modeci-mdf's engine calls for every expression) looks
the expression up as a whole key among the values in scope before it evaluates it as
Python, so an expression that is *exactly* the id of a value in scope is that value,
whatever characters the id holds. modeci-mdf's own ONNX importer relies on it: it
names nodes and parameters by ONNX node names (``/A/Add``) and writes an output port
``{"value": "/A/Add"}``. An id that is not a Python name can be named only so: inside
a larger expression (``/A/Add + 1``) it is Python's syntax, not a name.

Every consumer asks :func:`referenced_id` (the allow-list, which validation and the
safety checks apply; the scheduler's expression evaluator, trusted or not; the ONNX
exporter, which the compiled backends start from), so the rule is stated once. Where
stock's engine cannot read such a reference (a parameter's fields) and which ids no
element can hold (empty, or with ``'.'``, which splits ``node.port``) are stated here
too: :func:`parameter_reference_refusal`, :func:`id_problem`.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from keyword import iskeyword
from typing import Any

__all__ = [
    "referenced_id",
    "is_python_name",
    "ids_inside",
    "id_refusal",
    "parameter_reference_refusal",
    "id_problem",
]


def referenced_id(expression: Any, scope: Container[str]) -> str | None:
    """``expression`` itself when it is exactly the id of a value in ``scope`` (the
    names the node binds where it is evaluated), else None.

    The text is compared as written, as modelspec does: ``" x"`` is no reference.
    """
    if type(expression) is str and expression in scope:
        return expression
    return None


def is_python_name(text: str) -> bool:
    """Whether ``text`` is one name as Python's parser reads it (ASCII: it normalizes
    other names, so a non-ASCII id could read as another name)."""
    return text.isascii() and text.isidentifier() and not iskeyword(text)


def ids_inside(expression: str, scope: Iterable[str]) -> list[str]:
    """The ids of ``scope`` that are not Python names and that ``expression`` holds as a
    piece of a larger text (where they cannot be read as names), longest first."""
    found = [
        name
        for name in scope
        if name and name != expression and not is_python_name(name) and name in expression
    ]
    return sorted(found, key=lambda name: (-len(name), name))


def id_refusal(expression: str, scope: Iterable[str]) -> str | None:
    """The advice for an expression that refers to an id that is not a Python name
    inside a larger text (``'/A/Add + 1'``), else None."""
    inside = ids_inside(expression, scope)
    if not inside:
        return None
    name = inside[0]
    return (
        f"'{name}' is an id but not a Python name: an expression names such an id only "
        f"whole (exactly '{name}', which modeci-mdf looks up before it reads Python); give "
        f"it a name with a parameter whose value is exactly '{name}' and use that name "
        "here, or rename the id to letters, digits and '_'"
    )


def parameter_reference_refusal(expression: Any, scope: Container[str]) -> str | None:
    """Why a parameter's field (value, argument, initial value, derivative) may not be
    exactly an id that is not a Python name, else None.

    Stock modeci-mdf reads such a reference only in an output port's value: building a
    node, its engine orders the parameters by the Python names their expressions read
    (``'/A/Add'`` reads as ``A / Add``), so it cannot build a node whose parameter names
    ``'/A/Add'`` (a ValueError or SyntaxError before anything runs).
    """
    name = referenced_id(expression, scope)
    if name is None or is_python_name(name) or id_problem(name):
        return None  # an id that is no id at all is reported where it is defined
    return (
        f"'{name}' is an id but not a Python name, and modeci-mdf's engine reads a "
        "parameter's expressions as Python to order them (it cannot build this node); "
        "only an output port's value may be exactly such an id: rename the id to "
        "letters, digits and '_'"
    )


def id_problem(element_id: Any) -> str | None:
    """Why ``element_id`` cannot be the id of a graph, node, port, parameter or function
    (empty, or holding ``'.'``), else None."""
    if not isinstance(element_id, str) or (element_id and "." not in element_id):
        return None
    return (
        f"{element_id!r:.60} is not an id: an id is not empty and holds no '.', which "
        "splits the 'node.port' of edges and output names; rename it"
    )
