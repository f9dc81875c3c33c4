"""modeci-mdf's standard functions that compute on numbers, known without its registry.

modeci-mdf evaluates a parameter whose ``function`` names a standard function (``linear``,
``MatMul``, ``logistic``...) as the Python expression ``create_python_expression`` makes
of the function's ``expression_string``, its ``args`` bound. Its registry,
``modeci_mdf.functions.standard.mdf_functions``, imports modeci-mdf's ONNX functions and,
through them, torch where it is installed (about 0.7 s). :data:`EXPRESSIONS` holds those
expressions for the numeric standard functions, so that checking, typing and compiling a
model that calls them need not import it; ``tests/model/test_standard_functions.py``
compares them with the registry of the modeci-mdf that CI installs (the oldest and the
newest supported). Every other name is looked up in the registry.
"""

from __future__ import annotations

__all__ = ["EXPRESSIONS", "standard_expression", "is_standard_function"]

#: name -> the Python expression modeci-mdf evaluates for it (modeci-mdf 0.4.13 to 0.4.15)
EXPRESSIONS: dict[str, str] = {
    "linear": "(variable0 * slope + intercept)",
    "arctan": "scale * numpy.arctan(variable0)",
    "arcsin": "scale * numpy.arcsin(variable0)",
    "arccos": "scale * numpy.arccos(variable0)",
    "logistic": "1/(1 + numpy.exp(-1*gain*(variable0 + bias) + offset))",
    "exponential": "scale * numpy.exp((rate * variable0) + bias) + offset",
    "sin": "scale * numpy.sin(variable0)",
    "cos": "scale * numpy.cos(variable0)",
    "tan": "scale * numpy.tan(variable0)",
    "sinh": "scale * numpy.sinh(variable0)",
    "cosh": "scale * numpy.cosh(variable0)",
    "tanh": "scale * numpy.tanh(variable0)",
    "MatMul": "A @ B",
    "Relu": "A * (A > 0)",
}


def standard_expression(function: str) -> str | None:
    """The Python expression modeci-mdf evaluates for the standard function ``function``
    (its ``expression_string`` through ``create_python_expression``), or None where
    ``function`` names none with an expression."""
    found = EXPRESSIONS.get(function)
    if found is not None:
        return found
    from modeci_mdf.functions.standard import create_python_expression, mdf_functions

    entry = mdf_functions.get(function)
    if entry is None or not isinstance(entry.get("expression_string"), str):
        return None
    return create_python_expression(entry["expression_string"])  # type: ignore[no-any-return]


def is_standard_function(function: str) -> bool:
    """Whether ``function`` is in modeci-mdf's registry of functions."""
    if function in EXPRESSIONS:
        return True
    from modeci_mdf.functions.standard import mdf_functions

    return function in mdf_functions
