"""What an expression's literals would allocate (mdf_loops.safety.literal_sizes), against numpy."""

from __future__ import annotations

import ast

import numpy as np
import pytest

import mdf_loops
from mdf_loops.safety.literal_sizes import (
    allocation_refusal,
    dtype_refusal,
    literal_operation_refusal,
)

CONSTRUCTOR_CALLS = [
    "numpy.zeros(7)",
    "numpy.ones((3, 4))",
    "numpy.empty([2, 3, 5])",
    "numpy.full((2, -0 + 3), 1.5)",
    "numpy.zeros(shape=(4, 2))",
    "numpy.eye(3)",
    "numpy.eye(3, 5)",
    "numpy.identity(4)",
    "numpy.arange(9)",
    "numpy.arange(2, 17)",
    "numpy.arange(2, 17, 3)",
    "numpy.arange(0.5, 3.2, 0.5)",
    "numpy.arange(5, 1)",
    "numpy.arange(10, 0, -3)",
    "numpy.linspace(0, 1)",
    "numpy.linspace(0, 1, 7)",
    "numpy.linspace(0, 1, num=11)",
    "numpy.zeros_like(numpy.zeros(2), shape=(3, 3))",
    "numpy.ones((2 * 3, 2**2))",
]


def _call(expression: str) -> tuple[str, ast.Call]:
    node = ast.parse(expression, mode="eval").body
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    return node.func.attr, node


@pytest.mark.parametrize("expression", CONSTRUCTOR_CALLS)
def test_the_elements_counted_are_those_numpy_allocates(expression):
    size = eval(expression, {"numpy": np}).size  # the oracle: numpy itself, at a small size
    function, node = _call(expression)
    with mdf_loops.safety.limits(max_elements=1):
        refusal = allocation_refusal(function, node)
    if size <= 1:
        assert refusal is None
    else:
        assert refusal is not None and f"it asks for {size} elements" in refusal, refusal
    with mdf_loops.safety.limits(max_elements=max(size, 1)):
        assert allocation_refusal(function, node) is None


def test_sizes_that_are_not_literal_and_other_functions_are_left_to_run_time():
    with mdf_loops.safety.limits(max_elements=1):
        for expression in ["numpy.zeros(n)", "numpy.ones((2, n))", "numpy.zeros_like(x)",
                           "numpy.arange(n)", "numpy.tanh(x)", "numpy.linspace(0, 1, n)"]:
            assert allocation_refusal(*_call(expression)) is None, expression


def test_the_refusal_says_how_to_raise_the_limit():
    with mdf_loops.safety.limits(max_elements=100):
        refusal = allocation_refusal(*_call("numpy.zeros((10, 11))"))
    assert refusal is not None
    assert "110 elements, over the limit of 100" in refusal
    assert "mdf_loops.safety.limits(max_elements=N)" in refusal


@pytest.mark.parametrize(
    ("expression", "refused"),
    [
        ("2 ** 10000", False),
        ("2 ** 10001", True),
        ("2 ** (10 ** 5)", True),
        ("1 << 20000", True),
        ("x ** 10 ** 6", True),
        ("[0] * 10000", True),  # lists, tuples and text are data: no arithmetic on them
        ("[0] + [1]", True),
        ("'%02500000000d' % 1", True),
        ("3 * (1, 2)", True),
        ("{1} | {2}", True),
        ("f'{x}' * 2", True),
        ("[0] * n", True),
        ("x * 10 ** 9", False),
    ],
)
def test_literal_exponents_and_repeats(expression, refused):
    node = ast.parse(expression, mode="eval").body
    assert isinstance(node, ast.BinOp)
    assert (literal_operation_refusal(node) is not None) is refused


@pytest.mark.parametrize("dtype", ["float64", "int32", "complex128", "bool", None, np.float32])
def test_plain_element_types_are_allowed(dtype):
    assert dtype_refusal(dtype) is None


@pytest.mark.parametrize(
    "dtype", [("u1", (46000, 46000)), "(1000,1000)f8", "O", "V16", [("a", "f8")], np.dtype("f8")]
)
def test_dtypes_whose_element_may_be_any_size_are_refused(dtype):
    refusal = dtype_refusal(dtype)
    assert refusal is not None and "only plain element types" in refusal


def test_a_sub_array_dtype_is_refused_because_numpy_makes_its_element_that_large():
    assert np.dtype("(1000,1000)f8").itemsize == 8 * 10**6  # the oracle: one element, 8 MB
    assert dtype_refusal("(1000,1000)f8") is not None
