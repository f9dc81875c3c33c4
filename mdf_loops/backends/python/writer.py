"""One step of a time loop's body graph written out as straight-line Python.

Node by node in edge order, each parameter and port one assignment of its own MDF
expression (so numpy runs the same operations, in the same order, on the same scalar
types as modeci-mdf's engine). On the first step the ``numpy.where(first__step, ...)``
selections of the initial values fold away. Only expressions and ``onnx::Gather``
(input time series) are written out; :class:`NotCompilable` says why another is not.

A value that is a copy or a literal (an atom) is not assigned: it stands for its
variable wherever that is read after it (every variable of a step is assigned once, in
edge order), so a step's statements compute what its body does and copy nothing. Each
statement comes with the names it reads, for the lean code made of them
(:func:`~mdf_loops.backends.python.simplify.simplify`).

The statements are syntax trees, not text: each expression's text is parsed once per
writer (both steps share it) and its names replaced on a copy of the path to them, so
the tree parsed stays as it was and the statements written may share its unchanged
parts. No node is changed once made: whoever changes a statement makes a new one
(:func:`~mdf_loops.backends.python.simplify.simplify` does, locating each on its line);
the nodes made here are located :data:`~mdf_loops.backends.python.nodes.NOWHERE`.
"""

from __future__ import annotations

import ast
import keyword
import math
from typing import Any, TypeGuard

import numpy as np
from modeci_mdf.mdf import Graph, Node

from mdf_loops.backends.python.errors import NotCompilable
from mdf_loops.backends.python.nodes import LOAD, NOWHERE, STORE, new_node, with_fields
from mdf_loops.backends.python.simplify import is_atom
from mdf_loops.model.compat import input_default
from mdf_loops.model.standard_functions import standard_expression

__all__ = ["APPEND", "StepWriter", "Written", "variable"]

_FIRST_FLAG = "iteration == 0"

#: ``_appendK``: the ``append`` method of scan output ``K``, bound once by the loop
APPEND = "_append"

#: a statement written and the names it reads
Written = tuple[ast.stmt, set[str]]


def variable(node: str, name: str) -> str:
    """The Python variable of ``node``'s port or parameter ``name``."""
    text = f"v_{node}__{name}"
    if not text.isidentifier():
        raise NotCompilable(f"node '{node}' '{name}': not a Python identifier")
    return text


class StepWriter:
    """Writes the body's nodes as assignments, one step at a time (``reset`` between)."""

    def __init__(self, body: Graph, signature):
        self.body, self.signature = body, signature
        self.incoming = {(e.receiver, e.receiver_port): e for e in body.edges}
        #: the ports whose variables are read by name (the rest may stand for their value)
        self.read_by_name = {(e.sender, e.sender_port) for e in body.edges} | set(
            signature.formal_outputs
        )
        self.order = _topological(body)
        self.formal = {p: k for k, p in enumerate(signature.formal_inputs)}
        self.parsed: dict[str, ast.expr] = {}  # each expression's text, parsed once
        self.reset()

    def reset(self) -> None:
        self.constants: dict[str, bool] = {}  # variable -> known boolean this step
        self.replace: dict[str, ast.expr] = {}  # variable -> the atom it holds this step
        self.written: list[Written] = []
        self.loaded: set[str] = set()  # the names the value being written reads

    def step(self, first: bool, n_carried: int, n_scan: int) -> list[Written]:
        """The step's statements, each with the names it reads, ending with the carried
        values and the scans (:meth:`_tail`); call :meth:`reset` before the next step."""
        for node in self.order:
            self._node(node, first)
        self._tail(n_carried, n_scan)
        return self.written

    def _tail(self, n_carried: int, n_scan: int) -> None:
        """``cond, c0, ... = (out0, out1, ...)`` and ``_appendK(outK)`` per scan output
        (``_appendK``: the bound ``append`` of scan output ``sK``, the loop's)."""
        outputs = [variable(n, p) for n, p in self.signature.formal_outputs]
        self.loaded = set()
        carried = [self._read(var) for var in outputs[: 1 + n_carried]]
        targets: list[ast.expr] = [_store("cond"), *[_store(f"c{k}") for k in range(n_carried)]]
        values = new_node(ast.Tuple, {"elts": carried, "ctx": LOAD, **NOWHERE})
        target = new_node(ast.Tuple, {"elts": targets, "ctx": STORE, **NOWHERE})
        fields = {"targets": [target], "value": values, "type_comment": None, **NOWHERE}
        self.written.append((new_node(ast.Assign, fields), self.loaded))
        for k in range(n_scan):
            self.loaded = set()
            call = _call(f"{APPEND}{k}", [self._read(outputs[1 + n_carried + k])])
            self.written.append((new_node(ast.Expr, {"value": call, **NOWHERE}), self.loaded))

    def _read(self, var: str) -> ast.expr:
        """What stands for ``var`` where it is read: its atom, a known flag's value, or
        the variable (a name read)."""
        value = self.replace.get(var)
        if value is None:
            flag = self.constants.get(var)
            if flag is not None:
                return _constant(flag)
            value = _load(var)
        if value.__class__ is ast.Name:
            self.loaded.add(value.id)  # type: ignore[attr-defined]
        return value

    def _assign(self, var: str, value: ast.expr) -> None:
        """``var = value``, or ``value`` standing for ``var`` where it is an atom (a
        known flag read as its value)."""
        if value.__class__ is ast.Name and value.id in self.constants:  # type: ignore[attr-defined]
            value = _constant(self.constants[value.id])  # type: ignore[attr-defined]
        if is_atom(value):
            self.replace[var] = value
        else:
            self.written.append((_assign(var, value), self.loaded))

    def _node(self, node: Node, first: bool) -> None:
        scope: dict[str, ast.expr] = {}
        for port in node.input_ports:
            var = variable(node.id, port.id)
            self.loaded = set()
            value = self._input(node, port, var, self.formal)
            if is_atom(value) and (node.id, port.id) not in self.read_by_name:
                scope[port.id] = value  # a copy: the node's expressions read the value
            else:
                self._assign(var, value)
                scope[port.id] = self.replace.get(var) or _load(var)
        for param in node.parameters:
            self.loaded = set()
            value = self._parameter(node, param, scope)
            if self._atom(value):  # a parameter is read by its node's expressions only
                scope[param.id] = value
                continue
            var = variable(node.id, param.id)
            self._assign(var, value)
            scope[param.id] = self.replace.get(var) or _load(var)
        for port in node.output_ports:
            var = variable(node.id, port.id)
            if isinstance(port.value, str) and port.value.strip() == _FIRST_FLAG:
                self.constants[var] = first
                continue
            self.loaded = set()
            self._assign(var, self._expression(port.value, scope, node.id))

    def _atom(self, value: ast.expr) -> bool:
        """Whether ``value`` may stand for its variable: a copy or a literal (as
        :func:`~mdf_loops.backends.python.simplify.simplify` replaces them), but not a
        flag known this step (a selection on the flag's variable folds; one on a copy
        of it does not)."""
        return is_atom(value) and not (isinstance(value, ast.Name) and value.id in self.constants)

    def _input(self, node: Node, port, var: str, formal: dict[str, int]) -> ast.expr:
        """The value of input port ``port`` (whose variable is ``var``) as an expression."""
        edge = self.incoming.get((node.id, port.id))
        if edge is not None:
            sender = variable(edge.sender, edge.sender_port)
            weight = (edge.parameters or {}).get("weight", 1)
            if sender in self.constants:
                self.constants[var] = self.constants[sender]
            if type(weight) in (int, float) and weight == 1:
                # a flag is read by its name, so that the selections on it fold
                return _load(sender) if sender in self.constants else self._read(sender)
            fields = {
                "left": _literal(weight, node.id, port.id, weight=True),
                "op": ast.Mult(),
                "right": self._read(sender),
            }
            return new_node(ast.BinOp, {**fields, **NOWHERE})  # type: ignore[no-any-return]
        if port.id in formal:
            k = formal[port.id]
            return self._read("iteration" if k == 0 else "cond" if k == 1 else f"c{k - 2}")
        if port.id in self.signature.outer_scope_inputs:
            return self._read(variable("outer", port.id))
        if input_default(port) is not None:
            return _literal(input_default(port), node.id, port.id)
        raise NotCompilable(f"node '{node.id}' port '{port.id}': no value")

    def _parameter(self, node: Node, param, scope: dict) -> ast.expr:
        if param.function:
            if param.function == "onnx::Gather" and set(param.args or {}) == {"data", "indices"}:
                data = self._expression(param.args["data"], scope, node.id)
                index = self._expression(param.args["indices"], scope, node.id)
                fields = {"value": data, "slice": index, "ctx": LOAD, **NOWHERE}
                return new_node(ast.Subscript, fields)  # type: ignore[no-any-return]
            expression = _standard_expression(param.function)
            if expression is not None:
                return self._standard_call(node, param, expression, scope)
            raise NotCompilable(
                f"node '{node.id}' parameter '{param.id}': function '{param.function}'"
            )
        if (
            param.time_derivative is not None
            or param.default_initial_value is not None
            or param.conditions
        ):
            raise NotCompilable(f"node '{node.id}' parameter '{param.id}': stateful in a body")
        return self._expression(param.value, scope, node.id, param.id)

    def _standard_call(self, node: Node, param, expression: str, scope: dict) -> ast.expr:
        """A call of an MDF standard function, its args inlined in order (as stock
        evaluates them, each seeing the ones before it)."""
        local = dict(scope)
        for key, value in (param.args or {}).items():
            local[key] = self._expression(value, local, node.id)
        return self._expression(expression, local, node.id)

    def _expression(self, value: Any, scope: dict, node_id: str, name: str = "value") -> ast.expr:
        if not isinstance(value, str):
            return _literal(value, node_id, name)
        text = value.strip()
        if text.isidentifier() and not keyword.iskeyword(text):
            found = scope.get(text) or _load(text)  # a bare name (half of a body's values)
            if found.__class__ is ast.Name:
                self.loaded.add(found.id)  # type: ignore[attr-defined]
            return found
        tree = self.parsed.get(text)
        if tree is None:
            tree = self.parsed[text] = ast.parse(text, mode="eval").body
        return _Rewrite(scope, self.constants, self.loaded).visit(tree)


class _Rewrite:
    """An expression over the step's variables: names from ``scope``, selections on flags
    known this step folded (a flag read otherwise is its value), ``numpy.where`` as
    ``_where``, ``x[()]`` as ``_scalar(x)``; the names it reads are added to ``loaded``.

    The tree visited is not changed: a node whose children change is copied (with them),
    the others are returned as they are."""

    def __init__(
        self, scope: dict[str, ast.expr], constants: dict[str, bool], loaded: set[str]
    ) -> None:
        self.scope, self.constants, self.loaded = scope, constants, loaded

    def visit(self, n: ast.AST) -> Any:
        cls = n.__class__
        if cls is ast.Name:
            if n.ctx.__class__ is not ast.Load:  # type: ignore[attr-defined]
                return n
            value = self.scope.get(n.id, n)  # type: ignore[attr-defined]
            if value.__class__ is ast.Name:
                flag = self.constants.get(value.id)  # type: ignore[attr-defined]
                if flag is not None:
                    return _constant(flag)
                self.loaded.add(value.id)  # type: ignore[attr-defined]
            return value
        if cls is ast.Constant:
            return n
        if cls is ast.BinOp:  # the most common operation: its two operands
            left, right = self.visit(n.left), self.visit(n.right)  # type: ignore[attr-defined]
            if left is n.left and right is n.right:  # type: ignore[attr-defined]
                return n
            return new_node(ast.BinOp, {**n.__dict__, "left": left, "right": right})
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Tuple) and not n.slice.elts:
            folded = _fold_where(n.value, self.scope, self.constants)
            if folded is not None:
                return self.visit(folded)
            self.loaded.add("_scalar")
            return _call("_scalar", [self.visit(n.value)])
        if isinstance(n, ast.Call):
            folded = _fold_where(n, self.scope, self.constants)
            if folded is not None:
                return self.visit(folded)
            if _is_where(n):
                self.loaded.add("_where")
                return _call("_where", [self.visit(a) for a in n.args])
        return with_fields(n, self.visit)


def _load(name: str) -> ast.Name:
    return new_node(ast.Name, {"id": name, "ctx": LOAD, **NOWHERE})  # type: ignore[no-any-return]


def _store(name: str) -> ast.Name:
    return new_node(ast.Name, {"id": name, "ctx": STORE, **NOWHERE})  # type: ignore[no-any-return]


def _constant(value: Any) -> ast.Constant:
    return new_node(ast.Constant, {"value": value, "kind": None, **NOWHERE})  # type: ignore[no-any-return]


def _assign(name: str, value: ast.expr) -> ast.Assign:
    fields = {"targets": [_store(name)], "value": value, "type_comment": None, **NOWHERE}
    return new_node(ast.Assign, fields)  # type: ignore[no-any-return]


def _call(function: str, args: list[ast.expr]) -> ast.Call:
    fields = {"func": _load(function), "args": args, "keywords": [], **NOWHERE}
    return new_node(ast.Call, fields)  # type: ignore[no-any-return]


def _standard_expression(function: str) -> str | None:
    """The Python expression modeci-mdf evaluates for one of its standard functions."""
    if "::" in function:
        return None
    text = standard_expression(function)
    if text is None or "onnx_ops." in text or "actr." in text or "ddm." in text:
        return None
    return text


def _is_where(node: ast.AST) -> TypeGuard[ast.Call]:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "where"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in ("numpy", "np")
        and len(node.args) == 3
        and not node.keywords
    )


def _fold_where(node: ast.AST, scope: dict, constants: dict) -> ast.AST | None:
    """``numpy.where(flag, a, b)`` with a flag known this step -> ``a`` or ``b``."""
    if _is_where(node) and isinstance(node.args[0], ast.Name):
        flag = scope.get(node.args[0].id)
        if isinstance(flag, ast.Name) and flag.id in constants:
            return node.args[1] if constants[flag.id] else node.args[2]
    return None


def _literal(value: Any, node_id: str, name: str, weight: bool = False) -> ast.expr:
    """``value`` as the expression its ``repr`` parses to (a list as ``numpy.array``);
    an edge's ``weight`` may be any value whose ``repr`` is an expression."""
    if type(value) in (int, float) and math.isfinite(value):
        if math.copysign(1, value) > 0:
            return _constant(value)
        fields = {"op": ast.USub(), "operand": _constant(-value), **NOWHERE}
        return new_node(ast.UnaryOp, fields)  # type: ignore[no-any-return]
    if isinstance(value, (bool, int, float)) or weight:
        return ast.parse(repr(value), mode="eval").body
    if isinstance(value, list):
        if _more_numbers_than(value, LARGEST_LITERAL):
            raise _too_large(node_id, name)
        return ast.parse(f"numpy.array({value!r})", mode="eval").body
    if isinstance(value, np.ndarray) and value.shape and value.dtype in _LITERAL_DTYPES:
        if value.size > LARGEST_LITERAL:
            raise _too_large(node_id, name)
        # numpy.array of the nested list gives the dtype back
        return ast.parse(f"numpy.array({value.tolist()!r})", mode="eval").body
    raise NotCompilable(f"node '{node_id}' '{name}': value {value!r:.40} is not a number")


#: the most numbers a constant the loop's code holds as a literal may have (writing,
#: parsing and compiling a literal takes about 30 µs per 1,000 numbers)
LARGEST_LITERAL = 10_000

#: the dtypes of an array constant that ``numpy.array`` of its nested list gives back
_LITERAL_DTYPES = (np.dtype("int64"), np.dtype("float64"), np.dtype("bool"))


def _too_large(node_id: str, name: str) -> NotCompilable:
    return NotCompilable(
        f"node '{node_id}' '{name}': a constant of more than {LARGEST_LITERAL:,} numbers "
        "(the python backend writes constants into its code; onnxruntime holds them "
        "as tensors)"
    )


def _more_numbers_than(value: list, limit: int) -> bool:
    """Whether the nested list ``value`` holds more than ``limit`` numbers (counted
    row by row, stopping once past it)."""
    count, pending = 0, [value]
    while pending:
        item = pending.pop()
        if item and isinstance(item[0], list):
            pending.extend(item)
        else:
            count += len(item)
            if count > limit:
                return True
    return False


def _topological(graph: Graph) -> list[Node]:
    nodes = {n.id: n for n in graph.nodes}
    deps = {n.id: {e.sender for e in graph.edges if e.receiver == n.id} for n in graph.nodes}
    order: list[str] = []
    done: set[str] = set()
    while len(order) < len(nodes):
        ready = [i for i in nodes if i not in done and deps[i] <= done]
        if not ready:
            raise NotCompilable(f"graph '{graph.id}': its edges form a cycle")
        for i in ready:
            order.append(nodes[i])
            done.add(i)
    return order
