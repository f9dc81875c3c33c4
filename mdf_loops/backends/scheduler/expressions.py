"""modelspec's ``evaluate`` (the engine's expression evaluator), without its per-call cost.

modelspec formats every parameter value into a log string on each call,
verbose or not, and compiles the expression anew. :func:`evaluate_expression`
caches the compiled expression and skips the unused log strings:

- outside ONNX semantics it returns what modelspec returns, case by case in
  modelspec's order (a failing expression comes back unchanged, for the engine
  to report in its own words);
- under ONNX semantics (loop bodies, marked models, :func:`mdf_loops.run`) an
  expression that raises is an :class:`~mdf_loops.errors.EvaluationError`
  naming it;
- in a run that does not trust its model, every expression goes to
  :func:`mdf_loops.safety.interpreter.evaluate_untrusted` (numbers and numeric
  arrays, each result sized before it is made), never to Python's ``eval``.

Verbose calls, calls with a random generator and other array formats go to
modelspec itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import Any

import numpy as np
from modelspec.utils import evaluate as _stock_evaluate

from mdf_loops.errors import EvaluationError, MdfLoopsError
from mdf_loops.model.references import referenced_id
from mdf_loops.model.semantics import onnx_semantics_active
from mdf_loops.safety.guarded_numpy import expression_numpy, expressions_untrusted
from mdf_loops.safety.interpreter import evaluate_untrusted

__all__ = ["evaluate_expression"]

_CODE_CACHE: dict[str, Any] = {}
_NOT_COMPILABLE = object()


def _compiled(expression: str) -> Any:
    code = _CODE_CACHE.get(expression)
    if code is None:
        try:
            code = compile(expression, "<string>", "eval", dont_inherit=True)
        except (SyntaxError, ValueError):
            code = _NOT_COMPILABLE
        if len(_CODE_CACHE) > 100_000:
            _CODE_CACHE.clear()
        _CODE_CACHE[expression] = code
    return code


def evaluate_expression(
    expr: Any,
    parameters: Mapping[str, Any] | None = None,
    rng: Any = None,
    array_format: str = "numpy",
    verbose: bool = False,
    cast_to_int: bool = False,
) -> Any:
    """modelspec's ``evaluate`` with the same arguments (see the module docstring)."""
    if expressions_untrusted():  # never Python's eval (mdf_loops.safety.interpreter)
        return _evaluate_untrusted(expr, parameters or {}, cast_to_int)
    if verbose or rng is not None or array_format != "numpy":
        return _stock_evaluate(
            expr,
            parameters,
            rng=rng,
            array_format=array_format,
            verbose=verbose,
            cast_to_int=cast_to_int,
        )
    parameters = parameters if parameters is not None else {}
    done, result = _first_attempt(expr, parameters, cast_to_int)
    if done:
        return result
    expr = result  # as modelspec has it when it turns to Python's eval
    if type(expr) is not str:
        if onnx_semantics_active():  # data, e.g. a numpy.str_ computed at run time: never code
            return expr
        return _stock_evaluate(expr, parameters, array_format=array_format, cast_to_int=cast_to_int)
    code = _compiled(expr)
    if code is _NOT_COMPILABLE or "random()" in expr:
        return _stock_evaluate(expr, parameters, array_format=array_format, cast_to_int=cast_to_int)
    if onnx_semantics_active():
        return _evaluate_onnx_semantics(expr, code, parameters)
    return _evaluate_stock(expr, code, parameters)


def _first_attempt(expr: Any, parameters: Mapping[str, Any], cast_to_int: bool) -> tuple[bool, Any]:
    """modelspec's first attempt: a parameter name, a number, a list or an array.

    ``(True, value)``, or ``(False, expr)`` with ``expr`` as modelspec holds it
    when the attempt fails and it evaluates the expression as Python.
    """
    try:
        reference = referenced_id(expr, parameters)  # exactly an id: that value
        if reference is not None:
            expr = parameters[reference]
        if type(expr) is str:
            number = _number(expr)
            if number is _NOT_A_NUMBER:
                return False, expr  # modelspec's int(expr) == expr raises for it: Python's eval
            expr = number
        kind = type(expr)
        if kind is list or kind is np.ndarray:
            return True, np.array(expr)
        if "Tensor" in kind.__name__:
            return True, expr.numpy()
        if int(expr) == expr and cast_to_int:  # raises for strings: evaluated as Python
            return True, int(expr)
        return True, expr
    except Exception:
        return False, expr


_NOT_A_NUMBER = object()
_NUMBERS: dict[str, Any] = {}


def _number(text: str) -> Any:
    """``int(text)``, else ``float(text)``, else :data:`_NOT_A_NUMBER` (remembered per text)."""
    number = _NUMBERS.get(text)
    if number is None:
        try:
            number = int(text)
        except Exception:
            try:
                number = float(text)
            except Exception:
                number = _NOT_A_NUMBER
        if len(_NUMBERS) > 100_000:
            _NUMBERS.clear()
        _NUMBERS[text] = number
    return number


def _scope(expr: str, parameters: Mapping[str, Any], numpy_module: Any) -> dict:
    scope = dict(parameters)
    if "math." in expr:
        scope["math"] = math
    if "numpy." in expr:
        scope["numpy"] = numpy_module
    return scope


#: modelspec before 0.4 evaluates in the caller's own dict, adding ``math``, ``numpy`` (and
#: eval's ``__builtins__``) to it, which the engine's verbose prints then show; 0.4 copies it
_IN_CALLERS_DICT = tuple(int(p) for p in metadata.version("modelspec").split(".")[:2]) < (0, 4)


def _evaluate_stock(expr: str, code: Any, parameters: Mapping[str, Any]) -> Any:
    if _IN_CALLERS_DICT and isinstance(parameters, dict):
        scope = parameters  # as modelspec 0.3 does
        if "math." in expr:
            scope["math"] = math
        if "numpy." in expr:
            scope["numpy"] = np
    else:
        scope = _scope(expr, parameters, np)
    try:
        value = eval(code, scope)
        if (type(value) is float or type(value) is str) and int(value) == value:
            return int(value)
        return value
    except Exception:  # modelspec returns an expression it cannot evaluate unchanged
        return expr


def _evaluate_untrusted(expr: Any, parameters: Mapping[str, Any], cast_to_int: bool) -> Any:
    done, result = _first_attempt(expr, parameters, cast_to_int)
    if done or type(result) is not str:
        return result  # a value, or data (a numpy.str_ computed at run time): never code
    try:
        value = evaluate_untrusted(result, parameters)
    except MdfLoopsError:  # a refusal or a limit hit inside the expression
        raise
    except NameError:
        return result  # modelspec returns an expression it cannot evaluate unchanged
    except Exception as exc:  # numpy's own error says what went wrong: keep it
        raise EvaluationError(
            f"expression {result!r:.120} failed: {type(exc).__name__}: {exc}"
        ) from exc
    if (type(value) is float or type(value) is str) and _is_integral(value):
        return int(value)
    return value


def _evaluate_onnx_semantics(expr: str, code: Any, parameters: Mapping[str, Any]) -> Any:
    try:
        value = eval(code, _scope(expr, parameters, expression_numpy()))
    except MdfLoopsError:  # a limit hit inside the expression
        raise
    except NameError:
        return expr  # modelspec returns an expression it cannot evaluate unchanged
    except Exception as exc:  # numpy's own error says what went wrong: keep it
        raise EvaluationError(f"expression {expr!r} failed: {type(exc).__name__}: {exc}") from exc
    if (type(value) is float or type(value) is str) and _is_integral(value):
        return int(value)
    return value


def _is_integral(value: Any) -> bool:
    try:
        return int(value) == value
    except (TypeError, ValueError, OverflowError):
        return False


#: what the engine hook replaces (kept for tests comparing the two)
STOCK_EVALUATE: Callable[..., Any] = _stock_evaluate
