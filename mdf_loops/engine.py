"""Hooks that let modeci-mdf's stock execution engine run ONNX semantics.

modeci-mdf's ``EvaluableGraph`` sends every function whose expression starts with
``onnx_ops.`` to ``execution_engine.evaluate_onnx_expr``, which builds a new
skl2onnx model and onnxruntime session per call, is capped at opset 15, and
turns float32 results into float64. :func:`install` replaces that one function
with :func:`mdf_loops.onnx_functions.call_onnx_function` for the ``onnx::``
functions mdf-loops registers (others still go to the stock function), wraps
``EvaluableNode.evaluate`` so errors name the node they come from, and sends
the engine's ``print`` output to the ``modeci_mdf.execution_engine`` logger at
DEBUG level (a 10,000-step loop must not print 10,000 lines).
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any, Callable, Mapping

import modeci_mdf.execution_engine as _engine

from .errors import EvaluationError, MdfLoopsError, pop_frame, push_frame
from .onnx_functions import call_onnx_function

__all__ = ["install", "uninstall", "installed", "current_engine_node"]

_engine_log = logging.getLogger("modeci_mdf.execution_engine")

_STOCK_EVALUATE_ONNX_EXPR = _engine.evaluate_onnx_expr
_STOCK_NODE_EVALUATE = _engine.EvaluableNode.evaluate

_CURRENT_NODE: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "mdf_loops_engine_node", default=None
)

#: expression string (as the engine sees it) -> ONNX op type; filled by the registry
_OP_BY_EXPRESSION: dict[str, str] = {}


def current_engine_node() -> Any:
    """The ``EvaluableNode`` the engine is evaluating now, or None."""
    return _CURRENT_NODE.get()


def route_expression(expression: str, op_type: str) -> None:
    """Evaluate functions whose engine expression is ``expression`` as ``onnx::op_type``."""
    _OP_BY_EXPRESSION[expression] = op_type


def _evaluate_onnx_expr(
    expr: str,
    base_parameters: Mapping[str, Any],
    evaluated_parameters: Mapping[str, Any],
    verbose: bool = False,
) -> Any:
    op_type = _OP_BY_EXPRESSION.get(expr)
    if op_type is None:
        return _STOCK_EVALUATE_ONNX_EXPR(expr, base_parameters, evaluated_parameters, verbose)
    return call_onnx_function(op_type, base_parameters, evaluated_parameters, _CURRENT_NODE.get())


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


def _log_engine_output(*args: Any, **kwargs: Any) -> None:
    if _engine_log.isEnabledFor(logging.DEBUG):
        sep = kwargs.get("sep", " ")
        _engine_log.debug(sep.join(str(a) for a in args))


_PATCHES: dict[str, tuple[Any, str, Callable]] = {
    "evaluate_onnx_expr": (_engine, "evaluate_onnx_expr", _evaluate_onnx_expr),
    "node_evaluate": (_engine.EvaluableNode, "evaluate", _evaluate_node),
    "print": (_engine, "print", _log_engine_output),
}


def installed() -> bool:
    return _engine.evaluate_onnx_expr is _evaluate_onnx_expr


def install() -> None:
    """Install the hooks (idempotent)."""
    for target, name, replacement in _PATCHES.values():
        setattr(target, name, replacement)


def uninstall() -> None:
    """Restore modeci-mdf's own engine functions."""
    _engine.evaluate_onnx_expr = _STOCK_EVALUATE_ONNX_EXPR
    _engine.EvaluableNode.evaluate = _STOCK_NODE_EVALUATE
    if "print" in vars(_engine):
        del _engine.print
