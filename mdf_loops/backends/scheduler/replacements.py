"""The functions :mod:`mdf_loops.backends.scheduler.hooks` puts into modeci-mdf and graph-scheduler.

Each keeps the stock behaviour (values, dtypes, errors, prints, formatting, no
step limit) unless ONNX semantics are active
(:mod:`mdf_loops.model.semantics`), or goes faster with identical
results. :data:`STOCK` holds what each replaced name was (filled by ``install``).
"""

from __future__ import annotations

import builtins
import contextvars
import functools
import logging
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import modeci_mdf.execution_engine as _engine
from modeci_mdf.mdf import MdfBase as _MdfBase

from mdf_loops.backends.scheduler.onnx_functions import call_onnx_function, opset
from mdf_loops.backends.scheduler.planned_pass import step_limit_error
from mdf_loops.errors import (
    EvaluationError,
    MdfLoopsError,
    pop_frame,
    push_frame,
)
from mdf_loops.model.convention import BODY_ATTRIBUTES
from mdf_loops.model.semantics import (
    engine_prints_logged,
    onnx_semantics,
    onnx_semantics_active,
    onnx_semantics_of,
)
from mdf_loops.onnx.attributes import attribute_texts_as_lists
from mdf_loops.onnx.domains import other_opsets
from mdf_loops.ops.common import current_limits

__all__ = [
    "STOCK",
    "ABSENT",
    "Route",
    "current_engine_node",
    "route_function",
    "registered_functions",
]

#: hook key -> the name's value before ``install`` (:data:`ABSENT`: none of its own)
STOCK: dict[str, Any] = {}
ABSENT = object()

_engine_log = logging.getLogger("modeci_mdf.execution_engine")

_CURRENT_NODE: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "mdf_loops_engine_node", default=None
)


@dataclass(frozen=True)
class Route:
    """An ``onnx::`` (or ``onnxml::``) function mdf-loops can evaluate."""

    op_type: str
    domain: str  # the ONNX domain ("" by default)
    always: bool  # stock modeci-mdf cannot evaluate it: ours with or without ONNX semantics

    def taken(self) -> bool:
        """True when mdf-loops evaluates the call now."""
        return self.always or onnx_semantics_active()


#: expression string (as the engine sees it) -> its route; filled by the registry
_BY_EXPRESSION: dict[str, Route] = {}
#: function name -> (its registry entry, its route); filled by the registry
_BY_FUNCTION: dict[str, tuple[dict, Route]] = {}


def current_engine_node() -> Any:
    """The ``EvaluableNode`` the engine is evaluating now, or None."""
    return _CURRENT_NODE.get()


def registered_functions() -> list[str]:
    """The function names routed to mdf-loops' evaluator."""
    return sorted(_BY_FUNCTION)


def route_function(
    function: str, entry: dict, expression: str, op_type: str, domain: str, stock_has_it: bool
) -> None:
    """Evaluate ``function`` (registry ``entry``, engine ``expression``) as ONNX ``op_type``
    of ``domain``: always when stock modeci-mdf lacks it (or it is Scan, Loop or If),
    else under ONNX semantics only."""
    always = not stock_has_it or (domain == "" and op_type in BODY_ATTRIBUTES)
    route = Route(op_type, domain, always)
    _BY_EXPRESSION[expression] = route
    _BY_FUNCTION[function] = (entry, route)


def _stock(key: str) -> Callable:
    return STOCK[key]


def _call(route: Route, base: Mapping[str, Any], evaluated: Mapping[str, Any]) -> Any:
    owner = _CURRENT_NODE.get()
    if route.domain == "" and route.op_type in BODY_ATTRIBUTES and not onnx_semantics_active():
        with onnx_semantics():  # a loop's bodies run with ONNX semantics in every model
            return call_onnx_function(route.op_type, base, evaluated, owner, route.domain)
    return call_onnx_function(route.op_type, base, evaluated, owner, route.domain)


def evaluate_onnx_expr(
    expr: str,
    base_parameters: Mapping[str, Any],
    evaluated_parameters: Mapping[str, Any],
    verbose: bool = False,
) -> Any:
    route = _BY_EXPRESSION.get(expr)
    if route is None or not route.taken():
        return _stock("evaluate_onnx_expr")(expr, base_parameters, evaluated_parameters, verbose)
    return _call(route, base_parameters, evaluated_parameters)


def evaluate_parameter(
    self,
    parameters: Mapping[str, Any],
    time_increment: Any = None,
    array_format: str = _engine.FORMAT_DEFAULT,
) -> Any:
    """``EvaluableParameter.evaluate``, calling the ONNX evaluator directly for ``onnx::`` calls.

    The stock method finds a parameter's function by comparing its name with
    every registered function, then rewrites the expression and tests its text,
    on every call. For a parameter that only calls an ``onnx::`` function we
    evaluate, this does what the stock method then does: evaluate the args in
    order, each seeing the ones before, and call :func:`evaluate_onnx_expr`'s
    evaluator. Anything else takes the stock path.
    """
    parameter = self.parameter
    function = parameter.function
    route = _BY_FUNCTION.get(function) if type(function) is str else None
    if (
        route is None
        or not route[1].taken()
        or parameter.value is not None
        or parameter.args is None
        or parameter.conditions
        or self.verbose
        or _engine.mdf_functions.get(function) is not route[0]
    ):
        return _stock("parameter_evaluate")(self, parameters, time_increment, array_format)
    args = parameter.args
    evaluated = dict(parameters)
    for arg, expression in args.items():
        evaluated[arg] = _engine.evaluate_expr(
            expression, evaluated, verbose=False, array_format=array_format
        )
    self.curr_value = _call(route[1], {**parameters, **args}, evaluated)
    return self.curr_value


def evaluate_node(self, *args: Any, **kwargs: Any) -> Any:
    """``EvaluableNode.evaluate``; under ONNX semantics its errors name the node."""
    frame = push_frame(f"node '{self.node.id}'")
    current = _CURRENT_NODE.set(self)  # the owner of a loop's body engines
    try:
        return _stock("node_evaluate")(self, *args, **kwargs)
    except MdfLoopsError:
        raise
    except Exception as exc:  # anything from modelspec's eval or numpy
        if not onnx_semantics_active():
            raise
        raise EvaluationError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        _CURRENT_NODE.reset(current)
        pop_frame(frame)


def init_node(self, node: Any, *args: Any, **kwargs: Any) -> None:
    """``EvaluableNode.__init__``; under ONNX semantics the bare text of a string attribute
    (``"mode": "reflect"`` beside ``onnx::Pad``) is data, as on every other backend."""
    if onnx_semantics_active():
        node = attribute_texts_as_lists(node)
    _stock("node_init")(self, node, *args, **kwargs)


def _marked(graph: Any) -> ExitStack:  # for __init__, once per graph
    """ONNX semantics (and the graph's opset) for a marked graph; nothing otherwise."""
    stack = ExitStack()
    marker = onnx_semantics_of(graph)
    if marker is not None:
        stack.enter_context(onnx_semantics())
        stack.enter_context(opset(marker.opset, other_opsets(graph.metadata)))
    return stack


def init_graph(self, graph: Any, *args: Any, **kwargs: Any) -> None:
    """``EvaluableGraph.__init__``, with ONNX semantics (prints to the log) for a marked graph."""
    with _marked(graph):
        _stock("graph_init")(self, graph, *args, **kwargs)


def evaluate_graph(self, *args: Any, **kwargs: Any) -> Any:
    """``EvaluableGraph.evaluate``; under ONNX semantics, a bound on its scheduler's steps.

    A graph whose termination condition is never met (``Never``, a threshold
    never reached) would otherwise make ``evaluate`` run for ever.
    """
    marker = onnx_semantics_of(self.graph)
    if marker is not None:
        with onnx_semantics(), opset(marker.opset, other_opsets(self.graph.metadata)):
            return _evaluate_bounded(self, args, kwargs)
    if onnx_semantics_active():
        return _evaluate_bounded(self, args, kwargs)
    return _stock("graph_evaluate")(self, *args, **kwargs)


def _evaluate_bounded(engine: Any, args: tuple, kwargs: dict) -> Any:
    scheduler = engine.scheduler
    own = vars(scheduler).get("run", ABSENT)
    scheduler.run = _bounded_steps(scheduler.run, engine.graph.id)
    try:
        return _stock("graph_evaluate")(engine, *args, **kwargs)
    finally:
        if own is ABSENT:
            del scheduler.run
        else:
            scheduler.run = own


def _bounded_steps(run: Callable, graph_id: str) -> Callable:
    def bounded_run(*args: Any, **kwargs: Any) -> Any:
        limit = current_limits().max_iterations
        for step, nodes in enumerate(run(*args, **kwargs)):
            if step >= limit:
                raise step_limit_error(graph_id, limit)
            yield nodes

    return bounded_run


def engine_print(*args: Any, **kwargs: Any) -> None:
    """The engine's ``print``: the terminal, or under ONNX semantics (and while mdf-loops
    runs the stock engine for itself) the DEBUG log.

    A 10,000-step loop must not print 10,000 lines.
    """
    if not engine_prints_logged():
        builtins.print(*args, **kwargs)
    elif _engine_log.isEnabledFor(logging.DEBUG):
        _engine_log.debug(kwargs.get("sep", " ").join(str(a) for a in args))


def value_summary(value: Any) -> str:
    """The engine's ``_val_info``; under ONNX semantics a cheap one (empty when not logged)."""
    if not onnx_semantics_active():
        return _stock("value_summary")(value)
    if not _engine_log.isEnabledFor(logging.DEBUG):
        return ""  # the engine formats it into a message whether or not it is logged
    shape = getattr(value, "shape", None)
    if shape is not None:
        return f"<{getattr(value, 'dtype', '')}{list(shape)}>"
    return f"<{type(value).__name__}>"


def format_condition_arg(value: Any, key: Any = None) -> str:
    """graph-scheduler's argument formatting; under ONNX semantics MDF elements by id.

    ``EvaluableGraph.evaluate`` formats every node's condition on each call;
    the stock formatting writes out the whole node, loop bodies included.
    """
    if onnx_semantics_active() and isinstance(value, _MdfBase) and hasattr(value, "id"):
        text = f"{type(value).__name__}({value.id!r})"
        return f"{key}={text}" if key is not None else text
    return _stock("condition_arg")(value, key)


def format_element(self: Any, spec: str) -> str:
    """An MDF element in a format string; under ONNX semantics written by its id.

    graph-scheduler formats the nodes it schedules into its debug messages
    whether or not they are logged; the stock text of a node is the whole node,
    weight matrices and loop bodies included. ``repr()`` and ``str()`` keep it.
    """
    element_id = getattr(self, "id", None) if spec == "" else None
    if isinstance(element_id, str) and onnx_semantics_active():
        return f"{type(self).__name__}(id={element_id!r})"
    stock = STOCK["element_format"]
    if stock is ABSENT:
        return super(_MdfBase, self).__format__(spec)
    return stock(self, spec)


def remembered(function: Callable) -> Callable:
    """``function`` with its results remembered; unhashable arguments go straight to it."""
    cached = functools.lru_cache(maxsize=4096)(function)

    @functools.wraps(function)
    def remembered(*args: Any) -> Any:
        try:
            return cached(*args)
        except TypeError:  # an unhashable argument (or the function's own TypeError)
            return function(*args)

    return remembered
