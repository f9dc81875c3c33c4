"""How modeci-mdf turns a model's text into code, and the evaluation mdf-loops owns instead.

modeci-mdf evaluates a model in two ways that the expression allow-list of
:mod:`mdf_loops.safety.allowlist` does not see by itself:

* it dispatches a parameter's or function's ``function`` by looking for
  substrings in the expression it stands for: text containing ``onnx_ops.``,
  ``actr.`` or ``ddm.`` calls a Python function of modeci-mdf named by the text
  after the last dot, whatever comes before it (``"chunk # actr.chunk_to_string"``);
* modelspec's evaluator ``eval``-s the *value* of a bare name when that value is
  text, so text produced at run time (an ACT-R function's result, a parameter
  whose value is the string ``'exec'``) becomes code.

:func:`function_refusal` says which ``function`` fields a model that is not
trusted may use, and :func:`guarded_evaluate_expr` replaces modeci-mdf's
``evaluate_expr`` (one entry of :mod:`mdf_loops.backends.scheduler.hooks`):
inside :func:`~mdf_loops.safety.guarded_numpy.untrusted_expressions` text read
through a name is data, never evaluated.
"""

from __future__ import annotations

from typing import Any

from mdf_loops.model.standard_functions import is_standard_function, standard_expression
from mdf_loops.safety.guarded_numpy import expressions_untrusted

__all__ = ["engine_expression", "function_refusal", "guarded_evaluate_expr", "DISPATCH_MARKERS"]

#: substrings by which modeci-mdf sends an expression to one of its Python modules
DISPATCH_MARKERS = ("onnx_ops.", "actr.", "ddm.")
#: the markers whose functions take model data (dicts of text) and return text
_TEXT_MARKERS = ("actr.", "ddm.")


def engine_expression(function: str) -> str:
    """The text modeci-mdf evaluates for a ``function`` field (a standard function's
    expression, else the field itself)."""
    return standard_expression(function) or function


def _is_operator(function: str) -> bool:
    """Whether ``function`` names an operator of a supported ONNX domain (``onnx::Add``)."""
    import onnx.defs

    from mdf_loops.onnx.domains import domain_of_function

    found = domain_of_function(function)
    return found is not None and onnx.defs.has(found[1], found[0].name)


def function_refusal(function: Any) -> str | None:
    """Why a ``function`` field may not run in a model that is not trusted, or None.

    A standard function runs its own fixed expression (its arguments are checked
    where they are given), except the ACT-R and DDM functions: modeci-mdf calls
    them outside the expression evaluator, and they turn model data into text
    that the engine later evaluates. Text that is not a standard function is an
    expression; one that contains a dispatch marker would call whatever
    module function its last dotted word names.
    """
    if not isinstance(function, str):
        return None  # reported by the structure checks
    if _is_operator(function):  # onnx::Add and kin: evaluated by mdf-loops' own kernels
        return None
    expression = engine_expression(function)
    if is_standard_function(function):
        marker = next((m for m in _TEXT_MARKERS if m in expression), None)
        if marker is None:
            return None
        return (
            f"the standard function '{function}' ({expression}) runs outside the "
            "checked evaluator and turns model data into text that modeci-mdf "
            "evaluates; it is refused in a model that is not trusted"
        )
    marker = next((m for m in DISPATCH_MARKERS if m in function), None)
    if marker is not None:
        return (
            f"'{function:.80}' is not a standard function but contains '{marker}', by "
            "which modeci-mdf would call one of its Python functions; use the standard "
            "function's name"
        )
    return None


def guarded_evaluate_expr(
    expr: Any = None,
    func_params: Any = None,
    array_format: str = "numpy",
    allow_strings_returned: bool | None = False,
    verbose: bool | None = False,
) -> Any:
    """modeci-mdf's ``evaluate_expr``; for an untrusted model, a name whose value is text
    gives that text (or the number it spells), never the text evaluated as Python."""
    if expressions_untrusted() and type(expr) is str and isinstance(func_params, dict):
        value = func_params.get(expr, _MISSING)
        if isinstance(value, str):
            return _text_as_data(value)
    return stock_evaluate_expr()(
        expr,
        func_params,
        array_format=array_format,
        allow_strings_returned=allow_strings_returned,
        verbose=verbose,
    )


def stock_evaluate_expr() -> Any:
    """modeci-mdf's own ``evaluate_expr`` (imported with the engine, when first needed; the
    hooks keep the stock function, so this is never the replacement itself)."""
    if _STOCK_EVALUATE_EXPR:  # found once: called for every expression of every iteration
        return _STOCK_EVALUATE_EXPR[0]
    from mdf_loops.backends.scheduler.replacements import STOCK

    stock = STOCK.get("evaluate_expr")
    if stock is None:  # hooks not installed: the engine's name is still stock's
        import modeci_mdf.execution_engine as engine

        stock = engine.evaluate_expr
    _STOCK_EVALUATE_EXPR.append(stock)
    return stock


_STOCK_EVALUATE_EXPR: list = []


_MISSING = object()


def _text_as_data(text: str) -> Any:
    """Text as modelspec reads data before it tries ``eval``: a number, else the text."""
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            pass
    return str(text)
