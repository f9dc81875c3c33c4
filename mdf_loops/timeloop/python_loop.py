"""A time-loop model compiled to one Python function (the ``"python"`` backend of ``simulate``).

The body graph of the model's ``onnx::Loop`` is written out as straight-line Python,
node by node in edge order, each parameter and port one assignment of its own MDF
expression (so numpy runs the same operations, in the same order, on the same scalar
types as modeci-mdf's engine), inside one ``for`` loop over the steps. The first step
is written out separately, so that the ``numpy.where(first__step, ...)`` selections of
the initial values fold away. Only bodies of expressions and ``onnx::Gather`` (input
time series) compile; :class:`NotCompilable` says why another does not.
"""

from __future__ import annotations

import ast
import copy
import logging
import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np
from modeci_mdf.mdf import Graph, Model, Node

from mdf_loops.errors import NotCompilable
from mdf_loops.model.compat import input_default
from mdf_loops.model.convention import body_graph, body_signature
from mdf_loops.timeloop.convert import _LOOP_FUNCTION, LOOP_NODE
from mdf_loops.timeloop.python_types import python_type, specialize

__all__ = ["NotCompilable", "compile_time_loop"]

log = logging.getLogger(__name__)

_FIRST_FLAG = "iteration == 0"


@dataclass(frozen=True)
class CompiledTimeLoop:
    """``run(steps, series, initial, cond) -> (final cond, scan outputs as lists)``."""

    source: str
    run: Callable[..., Any]
    n_carried: int


def compile_time_loop(model: Model) -> CompiledTimeLoop:
    """Compile the ``onnx::Loop`` body of a time-loop model made by ``to_time_loop``."""
    graph = model.graphs[0]
    loop = next((n for n in graph.nodes if n.id == LOOP_NODE), None)
    if loop is None or len(graph.nodes) != 1:
        raise NotCompilable(f"graph '{graph.id}': expected the single node '{LOOP_NODE}'")
    params = {p.id: p for p in loop.parameters}
    body = body_graph(params["body"].value, f"node '{LOOP_NODE}' parameter 'body'")
    signature = body_signature(body)
    n_carried = len(signature.formal_inputs) - 2
    writer = _Writer(body, signature)
    first = writer.step(first=True)
    writer.reset()
    rest = writer.step(first=False)
    kinds = _scan_kinds(loop, len(signature.formal_outputs) - 1 - n_carried)
    names = params[_LOOP_FUNCTION].args["v_initial"].strip().strip("[]").split(",")
    initial = [python_type(params[n.strip()].value) for n in names if n.strip()]
    source = _function(signature, n_carried, first, rest, writer, kinds, initial)
    namespace: dict[str, Any] = {
        "numpy": np,
        "math": math,
        "np": np,
        "__builtins__": _BUILTINS,
        "_where": _where,
        "_scalar": _scalar,
        "_array": array,
    }
    exec(compile(source, f"<time loop {graph.id}>", "exec"), namespace)  # noqa: S102
    return CompiledTimeLoop(source, namespace["time_loop"], n_carried)


_SCALARS = (float, int, np.float64, np.int64)
#: ONNX element type -> array typecode, for one-dimensional float64 and int64 series
_ARRAY_CODES: dict[Any, str] = {1: "d", 11: "d", 7: "q"}


def _where(condition: Any, a: Any, b: Any) -> Any:
    """``numpy.where`` without the 0-d array when all three are scalars of one type.

    A 0-d array and a scalar give the same sums, differences, products, quotients and
    comparisons (IEEE rounding); a scalar skips numpy's array machinery.
    """
    if type(condition) in (bool, np.bool_) and type(a) is type(b) and type(a) in _SCALARS:
        return a if condition else b
    return np.where(condition, a, b)


def _scalar(value: Any) -> Any:
    """``value[()]``: a 0-d array as a numpy scalar; a scalar as it is."""
    return value[()] if isinstance(value, np.ndarray) else value


_BUILTINS = {
    "abs": abs,
    "min": min,
    "max": max,
    "float": float,
    "int": int,
    "bool": bool,
    "round": round,
    "pow": pow,
    "sum": sum,
    "len": len,
    "range": range,
    "True": True,
    "False": False,
    "None": None,
}


def _scan_kinds(loop: Node, n_scan: int) -> list[str]:
    """Per scan output: ``_array('d')``/``_array('q')`` for float64/int64 scalars, else a list.

    An ``array`` holds 8 bytes a step where a list of Python numbers holds 32.
    """
    by_index = {}
    for port in loop.output_ports:
        value = (port.value or "").strip()
        if value.startswith(f"{_LOOP_FUNCTION}[") and value.endswith("]"):
            by_index[int(value[len(_LOOP_FUNCTION) + 1 : -1])] = port
    first = min(by_index) if by_index else 0
    kinds = []
    for k in range(n_scan):
        port = by_index.get(first + k)
        tensor = (
            (((port.metadata or {}).get("onnx_type") or {}).get("tensorType") or {})
            if port is not None
            else {}
        )
        dims = (tensor.get("shape") or {}).get("dim") or []
        code = _ARRAY_CODES.get(tensor.get("elemType")) if len(dims) == 1 else None
        kinds.append("[]" if code is None or tensor.get("elemType") == 1 else f"_array({code!r})")
    return kinds


def _function(
    signature,
    n_carried: int,
    first: list[str],
    rest: list[str],
    writer,
    kinds: list[str],
    initial_types: list[str | None],
) -> str:
    carried = [f"c{k}" for k in range(n_carried)]
    outer = list(signature.outer_scope_inputs)
    args = ", ".join(
        [
            "steps",
            "cond",
            *carried,
            *[_var("outer", p) for p in outer],
            "_where=_where",
            "_scalar=_scalar",
        ]
    )
    lines = [f"def time_loop({args}):"]
    n_scan = len(signature.formal_outputs) - 1 - n_carried
    lines += [f"    s{k} = {kinds[k]}" for k in range(n_scan)]
    lines.append("    iteration = 0")
    tail = writer.tail(n_carried, n_scan)
    # the carried types: assumed from the initial values, kept where every step returns them
    assumed = list(initial_types)
    while True:
        first_code, first_out = _simplify(first + tail, _env(initial_types))
        rest_code, rest_out = _simplify(rest + tail, _env(assumed))
        agreed = [a if a == f == r else None for a, f, r in zip(assumed, first_out, rest_out)]
        if agreed == assumed:
            break
        assumed = agreed
    lines.append("    if steps > 0 and cond:")
    lines += ["        " + line for line in first_code]
    lines.append("    for iteration in range(1, steps):")
    lines.append("        if not cond:")
    lines.append("            break")
    lines += ["        " + line for line in rest_code]
    lines.append(f"    return cond, [{', '.join(f's{k}' for k in range(n_scan))}]")
    return "\n".join(lines) + "\n"


def _env(carried_types: list[str | None]) -> dict[str, str | None]:
    env: dict[str, str | None] = {"iteration": "int"}
    env.update({f"c{k}": t for k, t in enumerate(carried_types)})
    return env


def _var(node: str, name: str) -> str:
    text = f"v_{node}__{name}"
    if not text.isidentifier():
        raise NotCompilable(f"node '{node}' '{name}': not a Python identifier")
    return text


class _Writer:
    def __init__(self, body: Graph, signature):
        self.body, self.signature = body, signature
        self.incoming = {(e.receiver, e.receiver_port): e for e in body.edges}
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
        outputs = [_var(n, p) for n, p in self.signature.formal_outputs]
        targets = ["cond", *[f"c{k}" for k in range(n_carried)]]
        lines = [f"{', '.join(targets)} = {', '.join(outputs[: 1 + n_carried])}"]
        lines += [f"s{k}.append({outputs[1 + n_carried + k]})" for k in range(n_scan)]
        return lines

    def _node(self, node: Node, first: bool) -> list[str]:
        lines, scope = [], {}
        formal = {p: k for k, p in enumerate(self.signature.formal_inputs)}
        for port in node.input_ports:
            var = scope[port.id] = _var(node.id, port.id)
            edge = self.incoming.get((node.id, port.id))
            if edge is not None:
                sender = _var(edge.sender, edge.sender_port)
                weight = (edge.parameters or {}).get("weight", 1)
                if sender in self.constants:
                    self.constants[var] = self.constants[sender]
                if type(weight) in (int, float) and weight == 1:
                    lines.append(f"{var} = {sender}")
                else:
                    lines.append(f"{var} = {weight!r} * {sender}")
            elif port.id in formal:
                k = formal[port.id]
                lines.append(
                    f"{var} = " + ("iteration" if k == 0 else "cond" if k == 1 else f"c{k - 2}")
                )
            elif port.id in self.signature.outer_scope_inputs:
                lines.append(f"{var} = {_var('outer', port.id)}")
            elif input_default(port) is not None:
                lines.append(f"{var} = {_literal(input_default(port), node.id, port.id)}")
            else:
                raise NotCompilable(f"node '{node.id}' port '{port.id}': no value")
        for param in node.parameters:
            var = _var(node.id, param.id)
            lines.append(f"{var} = {self._parameter(node, param, scope)}")
            scope[param.id] = var
        for port in node.output_ports:
            var = _var(node.id, port.id)
            if isinstance(port.value, str) and port.value.strip() == _FIRST_FLAG:
                self.constants[var] = first
                lines.append(f"{var} = {first!r}")
                continue
            lines.append(f"{var} = {self._expression(port.value, scope, node.id)}")
        return lines

    def _parameter(self, node: Node, param, scope: dict) -> str:
        if param.function:
            if param.function == "onnx::Gather" and set(param.args or {}) == {"data", "indices"}:
                data = self._expression(param.args["data"], scope, node.id)
                index = self._expression(param.args["indices"], scope, node.id)
                return f"({data})[{index}]"
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

    def _expression(self, value: Any, scope: dict, node_id: str) -> str:
        if not isinstance(value, str):
            return _literal(value, node_id, "value")
        tree = ast.parse(value.strip(), mode="eval")
        constants = self.constants

        class _Rewrite(ast.NodeTransformer):
            def visit_Name(self, n: ast.Name) -> ast.AST:
                return (
                    ast.copy_location(ast.Name(id=scope[n.id], ctx=n.ctx), n)
                    if n.id in scope
                    else n
                )

            def visit_Subscript(self, n: ast.Subscript) -> ast.AST:
                if not (isinstance(n.slice, ast.Tuple) and not n.slice.elts):
                    return self.generic_visit(n)
                folded = _fold_where(n.value, scope, constants)
                if folded is not None:
                    return self.visit(folded)
                call = ast.Call(
                    func=ast.Name(id="_scalar", ctx=ast.Load()),
                    args=[self.visit(n.value)],
                    keywords=[],
                )
                return ast.copy_location(call, n)

            def visit_Call(self, n: ast.Call) -> ast.AST:
                folded = _fold_where(n, scope, constants)
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

        return ast.unparse(_Rewrite().visit(tree))


def _simplify(lines: list[str], env: dict) -> tuple[list[str], list[str | None]]:
    """Straight-line code without copies, constants held in variables, or unused values,
    and the types of the carried values it returns.

    Every variable of a step is assigned once (the carried values and the condition
    together, last), so a copy or a literal can replace its variable everywhere after.
    """
    statements = ast.parse("\n".join(lines)).body
    replace: dict[str, ast.expr] = {}

    class _Substitute(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> ast.AST:
            if isinstance(n.ctx, ast.Load) and n.id in replace:
                return ast.copy_location(copy.deepcopy(replace[n.id]), n)
            return n

    kept = []
    for statement in statements:
        if isinstance(statement, ast.Assign):
            statement.value = _Substitute().visit(statement.value)
            target = statement.targets[0]
            if isinstance(target, ast.Name) and _is_atom(statement.value):
                replace[target.id] = statement.value
                continue
        else:
            statement = _Substitute().visit(statement)
        kept.append(statement)
    types = specialize(kept, env)
    carried = sorted(
        (k for k in types if k[:1] == "c" and k[1:].isdigit()), key=lambda k: int(k[1:])
    )
    used: set[str] = set()
    result = []
    for statement in reversed(kept):
        assigned = statement.targets[0] if isinstance(statement, ast.Assign) else None
        if (
            isinstance(assigned, ast.Name)
            and assigned.id.startswith("v_")
            and assigned.id not in used
        ):
            continue
        used |= {
            n.id
            for n in ast.walk(statement)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
        }
        result.append(ast.unparse(statement))
    return result[::-1], [types[k] for k in carried]


def _is_atom(node: ast.AST) -> bool:
    """A name, a literal, or a negated literal number."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
        return isinstance(node, ast.Constant) and type(node.value) in (int, float)
    return isinstance(node, (ast.Name, ast.Constant))


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
