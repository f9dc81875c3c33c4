"""Hooks that let modeci-mdf's stock execution engine run ONNX semantics, and run them fast.

modeci-mdf's ``EvaluableGraph`` sends every function whose expression starts with
``onnx_ops.`` to ``execution_engine.evaluate_onnx_expr``, which builds a new
skl2onnx model and onnxruntime session per call, is capped at opset 15, and
turns float32 results into float64. :func:`install` replaces that one function
with :func:`mdf_loops.backends.scheduler.onnx_functions.call_onnx_function` for the ``onnx::``
functions mdf-loops registers (others still go to the stock function), wraps
``EvaluableNode.evaluate`` so errors name the node they come from, and sends
the engine's ``print`` output to the ``modeci_mdf.execution_engine`` logger at
DEBUG level (a 10,000-step loop must not print 10,000 lines). The other entries
of ``_PATCHES`` cut per-call costs without changing results; each is listed,
with its reason, in docs/representation.md ("How the stock engine runs it").
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any, Callable, Mapping

import math as _math

import functools

import graph_scheduler.condition as _conditions
import graph_scheduler.scheduler as _scheduler
import modeci_mdf.execution_engine as _engine
import numpy as _np
from modeci_mdf.mdf import MdfBase as _MdfBase

from mdf_loops.errors import EvaluationError, IterationLimitError, MdfLoopsError, pop_frame, push_frame
from mdf_loops.safety.allowlist import expression_numpy
from mdf_loops.ops.common import current_limits, how_to_raise
from mdf_loops.backends.scheduler.onnx_functions import call_onnx_function

__all__ = ["install", "uninstall", "installed", "current_engine_node"]

_engine_log = logging.getLogger("modeci_mdf.execution_engine")

_STOCK_EVALUATE_ONNX_EXPR = _engine.evaluate_onnx_expr
_STOCK_NODE_EVALUATE = _engine.EvaluableNode.evaluate
_STOCK_PARAMETER_EVALUATE = _engine.EvaluableParameter.evaluate
_STOCK_EVALUATE_EXPRESSION = _engine.evaluate_params_modelspec
_STOCK_CREATE_PYTHON_EXPRESSION = _engine.create_python_expression
_STOCK_FORMAT_CONDITION_ARG = _conditions._format_arg
_STOCK_GRAPH_INIT = _engine.EvaluableGraph.__init__
_STOCK_PARSE_ABSOLUTE_UNIT = _scheduler._parse_absolute_unit

_CURRENT_NODE: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "mdf_loops_engine_node", default=None
)

#: expression string (as the engine sees it) -> ONNX op type; filled by the registry
_OP_BY_EXPRESSION: dict[str, str] = {}
#: function name -> (its registry entry, ONNX op type); filled by the registry
_OP_BY_FUNCTION: dict[str, tuple[dict, str]] = {}
#: expression string and function name -> ONNX domain of the operator ("" by default)
_DOMAIN_OF: dict[str, str] = {}


def current_engine_node() -> Any:
    """The ``EvaluableNode`` the engine is evaluating now, or None."""
    return _CURRENT_NODE.get()


def route_function(function: str, entry: dict, expression: str, op_type: str,
                   domain: str = "") -> None:
    """Evaluate ``function`` (registry ``entry``, engine ``expression``) as ONNX ``op_type``
    of ``domain``."""
    _OP_BY_EXPRESSION[expression] = op_type
    _OP_BY_FUNCTION[function] = (entry, op_type)
    _DOMAIN_OF[expression] = _DOMAIN_OF[function] = domain


def _evaluate_onnx_expr(
    expr: str,
    base_parameters: Mapping[str, Any],
    evaluated_parameters: Mapping[str, Any],
    verbose: bool = False,
) -> Any:
    op_type = _OP_BY_EXPRESSION.get(expr)
    if op_type is None:
        return _STOCK_EVALUATE_ONNX_EXPR(expr, base_parameters, evaluated_parameters, verbose)
    return call_onnx_function(op_type, base_parameters, evaluated_parameters, _CURRENT_NODE.get(),
                              _DOMAIN_OF.get(expr, ""))


def _evaluate_parameter(self, parameters: Mapping[str, Any], time_increment: Any = None,
                        array_format: str = _engine.FORMAT_DEFAULT) -> Any:
    """``EvaluableParameter.evaluate``, going straight to the ONNX evaluator for ``onnx::`` calls.

    The stock method finds a parameter's function by comparing its name with
    every registered function (over 200 once the ONNX operators are in), then
    rewrites the expression and tests its text, on every call. For a parameter
    that only calls an ``onnx::`` function registered here, this does what the
    stock method then does: evaluate the args in order, each seeing the ones
    before, and call the evaluator of :func:`_evaluate_onnx_expr`. Anything
    else (values, conditions, verbose runs, a re-registered function) takes the
    stock path.
    """
    parameter = self.parameter
    function = parameter.function
    route = _OP_BY_FUNCTION.get(function) if type(function) is str else None
    if (route is None or parameter.value is not None or parameter.args is None
            or parameter.conditions or self.verbose
            or _engine.mdf_functions.get(function) is not route[0]):
        return _STOCK_PARAMETER_EVALUATE(self, parameters, time_increment, array_format)
    args = parameter.args
    evaluated = dict(parameters)
    for arg, expression in args.items():
        evaluated[arg] = _engine.evaluate_expr(expression, evaluated, verbose=False,
                                               array_format=array_format)
    self.curr_value = call_onnx_function(route[1], {**parameters, **args}, evaluated,
                                         _CURRENT_NODE.get(), _DOMAIN_OF.get(function, ""))
    return self.curr_value


def _evaluate_node(self, *args: Any, **kwargs: Any) -> Any:
    frame = push_frame(f"node '{self.node.id}'")
    current = _CURRENT_NODE.set(self)
    try:
        return _STOCK_NODE_EVALUATE(self, *args, **kwargs)
    except MdfLoopsError:
        raise
    except Exception as exc:  # anything from modelspec's eval or numpy
        raise EvaluationError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        _CURRENT_NODE.reset(current)
        pop_frame(frame)


_CODE_CACHE: dict[str, Any] = {}
_NOT_COMPILABLE = object()


def _compiled(expression: str) -> Any:
    code = _CODE_CACHE.get(expression)
    if code is None:
        try:
            code = compile(expression, "<mdf expression>", "eval")
        except SyntaxError:
            code = _NOT_COMPILABLE
        if len(_CODE_CACHE) > 100_000:
            _CODE_CACHE.clear()
        _CODE_CACHE[expression] = code
    return code


def _evaluate_expression(expr, parameters=None, rng=None, array_format="numpy",
                         verbose=False, cast_to_int=False):
    """modelspec's ``evaluate`` for numpy arrays, without its per-call cost.

    modelspec formats every parameter value into a log string on each call,
    verbose or not, and compiles the expression anew; this keeps its results
    (same order of cases) and caches the compiled expression.
    """
    if verbose or rng is not None or array_format != "numpy":
        return _STOCK_EVALUATE_EXPRESSION(expr, parameters, rng=rng, array_format=array_format,
                                          verbose=verbose, cast_to_int=cast_to_int)
    parameters = parameters or {}
    kind = type(expr)
    if kind is str:
        if expr in parameters:
            expr = parameters[expr]
            kind = type(expr)
        else:
            try:
                return _number(int(expr), cast_to_int)
            except (TypeError, ValueError):
                pass
            try:
                return _number(float(expr), cast_to_int)
            except (TypeError, ValueError):
                pass
            code = _compiled(expr)
            if code is _NOT_COMPILABLE or "random()" in expr:
                return _STOCK_EVALUATE_EXPRESSION(expr, parameters, array_format=array_format,
                                                  cast_to_int=cast_to_int)
            scope = dict(parameters)
            if "math." in expr:
                scope["math"] = _math
            if "numpy." in expr:
                scope["numpy"] = expression_numpy()  # size-checked for untrusted models
            try:
                value = eval(code, scope)
            except MdfLoopsError:  # a limit hit inside the expression
                raise
            except NameError:
                return expr  # modelspec returns an expression it cannot evaluate unchanged
            except Exception as exc:  # numpy's own error says what went wrong: keep it
                raise EvaluationError(f"expression {expr!r} failed: {type(exc).__name__}: {exc}") from exc
            if (type(value) is float or type(value) is str) and _is_integral(value):
                return int(value)
            return value
    if kind is list or kind is _np.ndarray:
        return _np.array(expr)
    if kind is str:  # a parameter holding a string: modelspec's number parsing applies
        return _STOCK_EVALUATE_EXPRESSION(expr, parameters, array_format=array_format,
                                          cast_to_int=cast_to_int)
    try:
        if cast_to_int and int(expr) == expr:
            return int(expr)
    except Exception:
        pass
    return expr


def _number(value, cast_to_int):
    if cast_to_int and int(value) == value:
        return int(value)
    return value


def _is_integral(value) -> bool:
    try:
        return int(value) == value
    except (TypeError, ValueError, OverflowError):
        return False


def _value_summary(value: Any) -> str:
    """A cheap description of a value for the engine's log lines (empty when not logged)."""
    if not _engine_log.isEnabledFor(logging.DEBUG):
        return ""  # the engine formats it into a message whether or not it is logged
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"<{getattr(value, 'dtype', '')}{list(shape)}>"
    return f"<{type(value).__name__}>"


def _format_condition_arg(value: Any, key: Any = None) -> str:
    """graph-scheduler's argument formatting, naming MDF elements by id.

    ``EvaluableGraph.evaluate`` formats every node's condition on each call;
    the stock formatting writes out the whole node, loop bodies included.
    """
    if isinstance(value, _MdfBase) and hasattr(value, "id"):
        text = f"{type(value).__name__}({value.id!r})"
        return f"{key}={text}" if key is not None else text
    return _STOCK_FORMAT_CONDITION_ARG(value, key)


def _format_element(self: Any, spec: str) -> str:
    """An MDF element in a format string (f-string, ``str.format``), written by its id.

    graph-scheduler formats the nodes it schedules into its debug messages
    whether or not they are logged: when a condition gets its owner, and on
    every check of ``EveryNCalls`` and its kin. The stock text of an MDF node is
    the whole node, weight matrices and loop bodies included. ``repr()`` and
    ``str()`` keep the whole text.
    """
    element_id = getattr(self, "id", None) if spec == "" else None
    if isinstance(element_id, str):
        return f"{type(self).__name__}(id={element_id!r})"
    return object.__format__(self, spec)


@functools.lru_cache(maxsize=256)
def _parsed_absolute_unit(value: Any, unit: Any) -> Any:
    return _STOCK_PARSE_ABSOLUTE_UNIT(value, unit)


def _parse_absolute_unit(value: Any, unit: Any = None) -> Any:
    """graph-scheduler's parsing of a time unit (``"1 ms"``), remembered.

    Each ``Scheduler`` parses its default time unit with pint, trying every
    time unit in turn: about 5 ms per graph, paid again for each body on each
    run. The result is an immutable pint quantity of its arguments alone.
    """
    try:
        return _parsed_absolute_unit(value, unit)
    except TypeError:  # an unhashable argument
        return _STOCK_PARSE_ABSOLUTE_UNIT(value, unit)


def _init_graph(self, *args: Any, **kwargs: Any) -> None:
    """``EvaluableGraph.__init__``, then a bound on its scheduler's steps per evaluation.

    A graph whose termination condition is never met (``Never``, a threshold
    never reached) would otherwise make ``evaluate`` run for ever.
    """
    _STOCK_GRAPH_INIT(self, *args, **kwargs)
    self.scheduler.run = _bounded_steps(self.scheduler.run, self.graph.id)


def _bounded_steps(run: Callable, graph_id: str) -> Callable:
    def bounded_run(*args: Any, **kwargs: Any) -> Any:
        limit = current_limits().max_iterations
        for step, nodes in enumerate(run(*args, **kwargs)):
            if step >= limit:
                raise IterationLimitError(
                    f"graph '{graph_id}': its scheduler ran {limit} steps in one evaluation "
                    "without meeting the graph's termination condition (max_iterations); "
                    f"check the graph's conditions, or {how_to_raise('max_iterations')}")
            yield nodes

    return bounded_run


def _log_engine_output(*args: Any, **kwargs: Any) -> None:
    if _engine_log.isEnabledFor(logging.DEBUG):
        sep = kwargs.get("sep", " ")
        _engine_log.debug(sep.join(str(a) for a in args))


_PATCHES: dict[str, tuple[Any, str, Callable]] = {
    "evaluate_onnx_expr": (_engine, "evaluate_onnx_expr", _evaluate_onnx_expr),
    "node_evaluate": (_engine.EvaluableNode, "evaluate", _evaluate_node),
    "parameter_evaluate": (_engine.EvaluableParameter, "evaluate", _evaluate_parameter),
    "print": (_engine, "print", _log_engine_output),
    "evaluate_expression": (_engine, "evaluate_params_modelspec", _evaluate_expression),
    "value_summary": (_engine, "_val_info", _value_summary),
    "python_expression": (_engine, "create_python_expression",
                          functools.lru_cache(maxsize=4096)(_STOCK_CREATE_PYTHON_EXPRESSION)),
    "condition_arg": (_conditions, "_format_arg", _format_condition_arg),
    "element_format": (_MdfBase, "__format__", _format_element),
    "absolute_unit": (_scheduler, "_parse_absolute_unit", _parse_absolute_unit),
    "graph_init": (_engine.EvaluableGraph, "__init__", _init_graph),
}


_ABSENT = object()
#: what each patched name was before :func:`install` (``print`` is no module global there)
_ORIGINALS = {key: vars(target).get(name, _ABSENT) for key, (target, name, _) in _PATCHES.items()}


def installed() -> bool:
    return _engine.evaluate_onnx_expr is _evaluate_onnx_expr


def install() -> None:
    """Install the hooks (idempotent)."""
    for target, name, replacement in _PATCHES.values():
        setattr(target, name, replacement)


def uninstall() -> None:
    """Restore modeci-mdf's own engine functions."""
    for key, (target, name, _) in _PATCHES.items():
        original = _ORIGINALS[key]
        if original is not _ABSENT:
            setattr(target, name, original)
        elif name in vars(target):
            delattr(target, name)
