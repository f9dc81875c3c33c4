"""The dtypes and shapes of a graph's values as the stock probe finds them, worked out
without evaluating the model through the engine.

The probe (:func:`~mdf_loops.timeloop.probe.probe`) runs two stock steps and keeps the
dtype and shape of each parameter and output port. In a graph of scalar numbers, what
those steps compute is known from the model: the literals are Python numbers, and every
value the engine computes from them is either a Python number (arithmetic on Python
numbers, computed here with Python's own operators, the allow-list interpreter's
tables) or a numpy value (``numpy.add`` of a time derivative, ``numpy.where`` of a
parameter condition, and anything computed from those), whose dtype numpy gives for any
value of its dtype. So :func:`infer_values` follows the engine's two steps, node by
node as ``EvaluableNode.evaluate`` does, over those values: exact numbers where stock
has Python numbers (an expression's whole-number float result becomes an ``int`` there,
as modelspec does), and a representative of the dtype where stock has numpy values.

A list literal is what modelspec makes of it, ``numpy.array(list)`` (NeuroML's exports
write every constant as ``[0.7]``); a parameter set only by ``conditions`` holds the
engine's None until it is first evaluated (an expression reading it then is left to the
probe), then 0.0 before the first test. ``a and b``, ``a or b`` give one of their
operands, proven where all have one type and shape. A parameter calling a numeric standard
function (``linear``, ``MatMul``, ... :mod:`~mdf_loops.model.standard_functions`) is its
expression over its args, each evaluated in order; an edge's list weight times an array
is numpy's product.

It answers only what it can prove and returns None for anything else (the lean or stock
probe then runs): names that do not resolve, expressions other than numbers, names,
``+ - * / ** @``, unary ``-``/``+``, one order comparison, ``and``/``or``,
``numpy.where`` and ``numpy.exp`` and its kin (:data:`_UNARY_NUMPY`), other functions, a
Python operation that raises or gives a complex or huge number, a whole-number check of
a non-finite float, lists that are ragged or not numbers, a list where a scalar is read
(a port's default, an edge's weight times anything but an array), arrays of more than
4,096 elements or shapes that do not broadcast, a shape that changes, a port that sums
what several edges send, input time series. An input port nothing is sent to holds
modeci-mdf's zeros of its shape, a numpy value (:func:`_ports`); a port that sums holds
what its one edge sends.

It runs after the allow-list, on the model's own text, and its work is bounded: Python
arithmetic on numbers, each int result under 2**62 and each int power's exponent at most
64, and numpy on arrays of at most 4,096 elements, each result's size known before it
is made.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from modeci_mdf.mdf import Graph, Node, Parameter

from mdf_loops.caches import by_text
from mdf_loops.errors import ModelError
from mdf_loops.model.inputs import engine_zeros
from mdf_loops.model.standard_functions import EXPRESSIONS
from mdf_loops.safety.allowlist import parsed_expression, text_number
from mdf_loops.safety.untrusted_values import BINARY, COMPARE, UNARY
from mdf_loops.timeloop.lean_engine import is_stateful
from mdf_loops.timeloop.probe import common_value

__all__ = ["infer_values"]

_PYTHON = (int, float, bool)
_NUMPY_KINDS = frozenset("bif")  # bool, signed int, float
_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.MatMult)
_ORDER = frozenset({ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE})  # not is, in
_INT_LIMIT = 2**62  # a Python int numpy holds as int64 whatever it meets
_MAX_ELEMENTS = 4096  # the most elements of an array followed here (else the probe decides)
_MAX_EXPONENT = 64
_DEFAULT_INIT_VALUE = 0.0  # modeci-mdf's EvaluableParameter.DEFAULT_INIT_VALUE
#: numpy functions of one value followed here (NeuroML's exports call ``numpy.exp``)
_UNARY_NUMPY = frozenset(
    {"exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "abs", "arcsin", "arccos", "arctan"}
    | {"sinh", "cosh"}
)


class Unproven(Exception):
    """Something :func:`infer_values` does not prove: the probe decides."""


def infer_values(graph: Graph, sets: list[list[str]], dt: float) -> dict | None:
    """What ``probe(graph, dt, {}).values`` gives (zeros of each value's dtype and shape),
    for a graph the lean engine accepted (``sets``: its consideration sets), or None."""
    nodes = {node.id: node for node in graph.nodes}
    incoming: dict[str, list[Any]] = {node: [] for node in nodes}
    for edge in graph.edges:
        incoming[edge.receiver].append(edge)
    try:
        with np.errstate(all="ignore"):  # numpy values are representatives of their dtype
            return _steps(nodes, incoming, sets, dt)
    except (Unproven, KeyError, ModelError):  # KeyError: an edge from a port the sender lacks
        return None  # ModelError: a shape that changes, which the probe says in its words


def _steps(
    nodes: dict[str, Node], incoming: dict[str, list], sets: list[list[str]], dt: float
) -> dict:
    """The probe's two steps over the nodes, in the lean engine's order."""
    state: dict[str, dict[str, Any]] = {node: {} for node in nodes}
    outputs: dict[str, dict[str, Any]] = {node: {} for node in nodes}
    seen: dict[tuple[str, str], list[Any]] = {}
    for step in range(2):
        for node_id in (n for s in sets for n in s):
            ports = _ports(nodes[node_id], incoming[node_id], outputs, step)
            _node_step(nodes[node_id], ports, state[node_id], outputs[node_id], step, dt)
            for name, value in (*state[node_id].items(), *outputs[node_id].items()):
                seen.setdefault((node_id, name), []).append(np.asarray(value))
    return {key: common_value(values, key) for key, values in seen.items()}


def _ports(node: Node, edges: list, outputs: Mapping[str, dict], step: int) -> dict[str, Any]:
    """The node's input-port values this step: an edge's (weighted) value, else the port's
    default (its sender ran earlier in the step: the lean engine's order), else what
    modeci-mdf's ``EvaluableInput`` gives at a scalar port nothing is sent to: the 0-d
    array it starts with, ``numpy.full((), 0)`` (``0.0`` for a float ``type``), on the
    first step, and ``numpy.full((), 0.0)`` on the later ones (its value is read once and
    forgotten, then made again as float zeros): numpy values here."""
    values = {}
    received = [edge.receiver_port for edge in edges]
    for port in node.input_ports:
        if port.reduce not in (None, "overwrite") and received.count(port.id) > 1:
            raise Unproven  # summed in place, into the first sender's array
        if port.default_value is not None:
            values[port.id] = _scalar(port.default_value)
        else:
            values[port.id] = engine_zeros(port, read_before=step > 0)
    for edge in edges:
        value = outputs[edge.sender][edge.sender_port]
        weight = (edge.parameters or {}).get("weight", 1)
        if type(weight) is list and isinstance(value, np.ndarray):
            value = _binary(ast.Mult, _number(weight), value)  # numpy's product of the two
        elif not (type(weight) in (int, float) and weight == 1):
            value = _binary(ast.Mult, _scalar(weight), value)  # a list times a number repeats
        values[edge.receiver_port] = value
    return values


def _node_step(node: Node, ports: dict, state: dict, outputs: dict, step: int, dt: float) -> None:
    """``EvaluableNode.evaluate`` (its parameters' ``get_current_value``, ``evaluate``
    and conditions, then its outputs) over known numbers and dtype representatives."""
    scope = dict(ports)
    for parameter in node.parameters:
        scope[parameter.id] = _current(parameter, state, scope)
    for parameter in node.parameters:
        scope[parameter.id] = state[parameter.id] = _evaluated(parameter, state, scope, step, dt)
    for port in node.output_ports:
        outputs[port.id] = _evaluate(port.value, scope)
        if outputs[port.id] is None:
            raise Unproven  # a parameter's None, read whole


def _current(parameter: Parameter, state: dict, scope: dict) -> Any:
    """``EvaluableParameter.get_current_value``: the last value, or the first one."""
    if parameter.id in state:
        return state[parameter.id]
    if parameter.value is None and parameter.default_initial_value is None:
        return None  # the engine's None: an expression reading it is Unproven
    if is_stateful(parameter):
        if parameter.default_initial_value is None:
            return _DEFAULT_INIT_VALUE
        return _evaluate(parameter.default_initial_value, scope)
    value = state[parameter.id] = _evaluate(
        parameter.value, {**scope, parameter.id: _DEFAULT_INIT_VALUE}
    )
    return value


def _evaluated(parameter: Parameter, state: dict, scope: dict, step: int, dt: float) -> Any:
    """``EvaluableParameter.evaluate``: its value (else its standard function, its args
    evaluated in order, each seeing the ones before it), time derivative and conditions."""
    value = state.get(parameter.id)
    if parameter.value is not None:
        value = _evaluate(parameter.value, scope)
    elif parameter.function is not None:
        expression = EXPRESSIONS.get(parameter.function)
        if expression is None or not isinstance(parameter.args, dict):
            raise Unproven  # not a numeric standard function: the probe says
        local = dict(scope)
        for name, arg in parameter.args.items():
            local[name] = _evaluate(arg, local)
        value = _evaluate(expression, local)
    elif parameter.time_derivative is not None:
        if step == 0:
            if parameter.default_initial_value is None:
                raise Unproven
            value = _evaluate(parameter.default_initial_value, scope)
        else:
            change = _binary(ast.Mult, _evaluate(parameter.time_derivative, scope), dt)
            value = _numpy(np.add, value, change)
    for condition in parameter.conditions or ():
        mask = _evaluate(_field(condition, "test"), scope)
        chosen = _evaluate(_field(condition, "value"), scope)
        value = _numpy(np.where, mask, chosen, _DEFAULT_INIT_VALUE if value is None else value)
    if value is None:
        raise Unproven
    return value


def _field(condition: Any, name: str) -> Any:
    """A parameter condition's field (modeci-mdf keeps some as plain mappings)."""
    return getattr(condition, name) if hasattr(condition, name) else condition[name]


def _evaluate(expression: Any, scope: Mapping[str, Any]) -> Any:
    """modeci-mdf's ``evaluate_expr`` (modelspec's ``evaluate``): a number as it is, a name's
    value, a number's text as ``int`` or ``float``, else the expression's value, a
    whole-number Python float made an ``int``."""
    if type(expression) is str:
        if expression in scope:
            return scope[expression]
        number = text_number(expression)
        if number is not None:
            return _number(number)
        value = _value(_parsed(expression), scope)
        if type(value) is float:
            if not math.isfinite(value):
                raise Unproven  # stock's whole-number check differs trusted and not
            if int(value) == value:
                return int(value)
        return value
    return _number(expression)


def _number(value: Any) -> Any:
    """A literal of the model as the engine evaluates it: a Python number, or a list as
    modelspec's ``numpy.array(list)``."""
    if type(value) is list:
        try:
            array = np.array(value)
        except (ValueError, TypeError, RecursionError) as exc:  # ragged, or not numbers
            raise Unproven from exc
        return _numpy_value(array)
    return _scalar(value)


def _scalar(value: Any) -> Any:
    if type(value) in _PYTHON:
        if type(value) is int and abs(value) >= _INT_LIMIT:
            raise Unproven
        return value
    raise Unproven  # a list where a scalar is read, text or None: the probe says


@by_text(maxsize=4096)
def _parsed(expression: str) -> ast.expr | None:
    """The expression's tree (None if it is no expression)."""
    try:
        return parsed_expression(expression.lstrip(" \t")).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _value(node: ast.expr | None, scope: Mapping[str, Any]) -> Any:
    """The value of a tree made of what is proven here, else Unproven."""
    if isinstance(node, ast.Name):
        value = scope.get(node.id)
        if value is None:
            raise Unproven  # not a name of the scope, or a parameter's None
        return value
    if isinstance(node, ast.Constant):
        return _number(node.value)
    if isinstance(node, ast.BinOp):
        if not isinstance(node.op, _OPERATORS):
            raise Unproven
        return _binary(type(node.op), _value(node.left, scope), _value(node.right, scope))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _checked(UNARY[type(node.op)], _value(node.operand, scope))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _ORDER:
        left, right = _value(node.left, scope), _value(node.comparators[0], scope)
        return _checked(COMPARE[type(node.ops[0])], left, right)
    if isinstance(node, ast.BoolOp):
        return _bool_op(node, scope)
    if isinstance(node, ast.Call) and _numpy_name(node.func) is not None and not node.keywords:
        name, args = _numpy_name(node.func), node.args
        if name == "where" and len(args) == 3:
            return _numpy(np.where, *(_value(arg, scope) for arg in args))
        if name in _UNARY_NUMPY and len(args) == 1:
            return _checked(getattr(np, name), _value(args[0], scope))
    raise Unproven  # None (no expression), or something else


def _bool_op(node: ast.BoolOp, scope: Mapping[str, Any]) -> Any:
    """``a and b``, ``a or b``: one of the operands, chosen by their truth (a scalar or a
    one-element array's, as Python asks it); proven where every operand has one type and
    shape, so the choice cannot change the type. Stock evaluates lazily: an operand it
    would not reach is evaluated here too, and one that is not proven leaves it all to
    the probe."""
    values = [_value(value, scope) for value in node.values]
    kinds = {(type(v), getattr(v, "dtype", None), np.shape(v)) for v in values}
    if len(kinds) != 1 or any(np.size(v) != 1 for v in values):
        raise Unproven
    stop_at = False if isinstance(node.op, ast.And) else True
    return next((v for v in values[:-1] if bool(v) is stop_at), values[-1])


def _numpy_name(node: ast.AST) -> str | None:
    """``f`` of ``numpy.f``, else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr if node.value.id == "numpy" else None
    return None


def _binary(op: type, left: Any, right: Any) -> Any:
    if op is ast.Pow and type(right) in (int, bool) and abs(right) > _MAX_EXPONENT:
        raise Unproven  # Python would work out a huge int before any check
    return _checked(BINARY[op], left, right)


def _checked(function: Any, *operands: Any) -> Any:
    """``function(*operands)`` on Python numbers (their exact value) or numpy values
    (representatives of their dtype: numpy never raises for their values); a raise, or a
    result that is no number of a kind proven here, is Unproven."""
    shapes = [o.shape for o in operands if isinstance(o, np.ndarray) and o.ndim]
    if shapes:  # sized before it is made
        try:
            size = math.prod(np.broadcast_shapes(*shapes))
        except ValueError as exc:  # shapes that do not broadcast: stock's error
            raise Unproven from exc
        if size > _MAX_ELEMENTS:
            raise Unproven
    try:
        result = function(*operands)
    except Exception as exc:  # ZeroDivisionError, OverflowError, numpy's refusals
        raise Unproven from exc
    if type(result) in _PYTHON:
        return _number(result)
    return _numpy_value(result)


def _numpy(function: Any, *operands: Any) -> Any:
    """A numpy function the engine calls (``add`` with ``casting='safe'``, ``where``)."""
    if function is np.add:
        return _checked(lambda a, b: np.add(a, b, casting="safe"), *operands)
    return _checked(function, *operands)


def _numpy_value(value: Any) -> np.ndarray | np.generic:
    if not isinstance(value, (np.ndarray, np.generic)) or value.size > _MAX_ELEMENTS:
        raise Unproven
    kind = value.dtype.kind
    if kind not in _NUMPY_KINDS or value.dtype.itemsize != 8 and kind != "b":
        raise Unproven
    return value  # a representative of its dtype: its value is not known here
