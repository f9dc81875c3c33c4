"""One step of a time loop's body graph written out as straight-line Python.

Node by node in edge order, each parameter and port one assignment of its own MDF
expression (so numpy runs the same operations, in the same order, on the same scalar
types as modeci-mdf's engine). On the first step the ``numpy.where(first__step, ...)``
selections of the initial values fold away. Only expressions and ``onnx::Gather``
(input time series) are written out; :class:`NotCompilable` says why another is not.
"""

from __future__ import annotations

import ast
import keyword
from typing import Any, TypeGuard

from modeci_mdf.mdf import Graph, Node

from mdf_loops.backends.python.errors import NotCompilable
from mdf_loops.model.compat import input_default

__all__ = ["StepWriter", "variable"]

_FIRST_FLAG = "iteration == 0"


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
        self.reset()

    def reset(self) -> None:
        self.constants: dict[str, bool] = {}  # variable -> known boolean this step

    def step(self, first: bool) -> list[str]:
        lines: list[str] = []
        for node in self.order:
            lines += self._node(node, first)
        return lines

    def tail(self, n_carried: int, n_scan: int) -> list[str]:
        outputs = [variable(n, p) for n, p in self.signature.formal_outputs]
        targets = ["cond", *[f"c{k}" for k in range(n_carried)]]
        lines = [f"{', '.join(targets)} = {', '.join(outputs[: 1 + n_carried])}"]
        lines += [f"s{k}.append({outputs[1 + n_carried + k]})" for k in range(n_scan)]
        return lines

    def _node(self, node: Node, first: bool) -> list[str]:
        lines, scope = [], {}
        formal = {p: k for k, p in enumerate(self.signature.formal_inputs)}
        for port in node.input_ports:
            var = scope[port.id] = variable(node.id, port.id)
            value = self._input(node, port, var, formal)
            if value.isidentifier() and (node.id, port.id) not in self.read_by_name:
                scope[port.id] = value  # a copy: the node's expressions read the value's name
            else:
                lines.append(f"{var} = {value}")
        for param in node.parameters:
            var = variable(node.id, param.id)
            lines.append(f"{var} = {self._parameter(node, param, scope)}")
            scope[param.id] = var
        for port in node.output_ports:
            var = variable(node.id, port.id)
            if isinstance(port.value, str) and port.value.strip() == _FIRST_FLAG:
                self.constants[var] = first
                lines.append(f"{var} = {first!r}")
                continue
            lines.append(f"{var} = {self._expression(port.value, scope, node.id)}")
        return lines

    def _input(self, node: Node, port, var: str, formal: dict[str, int]) -> str:
        """The value of input port ``port`` (whose variable is ``var``) as an expression."""
        edge = self.incoming.get((node.id, port.id))
        if edge is not None:
            sender = variable(edge.sender, edge.sender_port)
            weight = (edge.parameters or {}).get("weight", 1)
            if sender in self.constants:
                self.constants[var] = self.constants[sender]
            if type(weight) in (int, float) and weight == 1:
                return sender
            return f"{weight!r} * {sender}"
        if port.id in formal:
            k = formal[port.id]
            return "iteration" if k == 0 else "cond" if k == 1 else f"c{k - 2}"
        if port.id in self.signature.outer_scope_inputs:
            return variable("outer", port.id)
        if input_default(port) is not None:
            return _literal(input_default(port), node.id, port.id)
        raise NotCompilable(f"node '{node.id}' port '{port.id}': no value")

    def _parameter(self, node: Node, param, scope: dict) -> str:
        if param.function:
            if param.function == "onnx::Gather" and set(param.args or {}) == {"data", "indices"}:
                data = self._expression(param.args["data"], scope, node.id)
                index = self._expression(param.args["indices"], scope, node.id)
                return f"({data})[{index}]"
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
        return self._expression(param.value, scope, node.id)

    def _standard_call(self, node: Node, param, expression: str, scope: dict) -> str:
        """A call of an MDF standard function, its args inlined in order (as stock
        evaluates them, each seeing the ones before it)."""
        local = dict(scope)
        for key, value in (param.args or {}).items():
            local[key] = f"({self._expression(value, local, node.id)})"
        return self._expression(expression, local, node.id)

    def _expression(self, value: Any, scope: dict, node_id: str) -> str:
        if not isinstance(value, str):
            return _literal(value, node_id, "value")
        text = value.strip()
        if text.isidentifier() and not keyword.iskeyword(text):
            return self._name(text, scope)  # a bare name (half of a body's values)
        tree = ast.parse(text, mode="eval")
        return ast.unparse(_Rewrite(scope, self.constants).visit(tree))

    @staticmethod
    def _name(name: str, scope: dict) -> str:
        """What :class:`_Rewrite` makes of the expression ``name``, without parsing it."""
        return scope.get(name, name)


class _Rewrite(ast.NodeTransformer):
    """An expression over the step's variables: names from ``scope``, selections on flags
    known this step folded, ``numpy.where`` as ``_where``, ``x[()]`` as ``_scalar(x)``."""

    def __init__(self, scope: dict, constants: dict) -> None:
        self.scope, self.constants = scope, constants

    def visit_Name(self, n: ast.Name) -> ast.AST:
        if n.id in self.scope:
            return ast.copy_location(ast.Name(id=self.scope[n.id], ctx=n.ctx), n)
        return n

    def visit_Subscript(self, n: ast.Subscript) -> ast.AST:
        if not (isinstance(n.slice, ast.Tuple) and not n.slice.elts):
            return self.generic_visit(n)
        folded = _fold_where(n.value, self.scope, self.constants)
        if folded is not None:
            return self.visit(folded)
        call = ast.Call(
            func=ast.Name(id="_scalar", ctx=ast.Load()), args=[self.visit(n.value)], keywords=[]
        )
        return ast.copy_location(call, n)

    def visit_Call(self, n: ast.Call) -> ast.AST:
        folded = _fold_where(n, self.scope, self.constants)
        if folded is not None:
            return self.visit(folded)
        if _is_where(n):
            call = ast.Call(
                func=ast.Name(id="_where", ctx=ast.Load()),
                args=[self.visit(a) for a in n.args],
                keywords=[],
            )
            return ast.copy_location(call, n)
        return self.generic_visit(n)


def _standard_expression(function: str) -> str | None:
    """The Python expression modeci-mdf evaluates for one of its standard functions."""
    if "::" in function:
        return None
    from modeci_mdf.execution_engine import create_python_expression
    from modeci_mdf.functions.standard import mdf_functions

    entry = mdf_functions.get(function)
    if entry is None or not isinstance(entry.get("expression_string"), str):
        return None
    text = create_python_expression(entry["expression_string"])
    if "onnx_ops." in text or "actr." in text or "ddm." in text:
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
    if (
        _is_where(node)
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id in scope
        and scope[node.args[0].id] in constants
    ):
        return node.args[1] if constants[scope[node.args[0].id]] else node.args[2]
    return None


def _literal(value: Any, node_id: str, name: str) -> str:
    if isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, list):
        return f"numpy.array({value!r})"
    raise NotCompilable(f"node '{node_id}' '{name}': value {value!r:.40} is not a number")


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
