"""The guards' fast paths against the oracles they stand for: the broadcast shape a result
is sized by against numpy's own (``numpy.where``, comparisons, refused exactly past
``max_elements``), and two Python numbers against Python's arithmetic (a Python integer or
bool beside another still has its bits sized first)."""

import ast
import itertools

import numpy as np
import pytest

from mdf_loops.errors import SizeLimitError
from mdf_loops.model.documents import MAX_INTEGER_BITS
from mdf_loops.ops.common import limits
from mdf_loops.safety.guarded_code import GUARDED_HELPERS
from mdf_loops.safety.untrusted_values import BINARY, binary, broadcast_shape, check_comparison

VALUES = [
    1.5,
    2,
    True,
    np.float64(0.5),
    np.int64(3),
    np.bool_(False),
    np.array(2.0),
    np.ones(4),
    np.ones((2, 4)),
    np.ones((2, 1)),
    np.ones((3, 4)),
    np.ones((1, 4), dtype=np.int64),
    np.ones(0),
    [1.0, 2.0, 3.0, 4.0],
]


def _numpy_shape(*values):
    try:
        return np.broadcast_shapes(*(np.shape(v) for v in values))
    except ValueError:
        return None


def _ours(*values):
    try:
        return broadcast_shape(*values)
    except ValueError:
        return None


@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_shape_is_numpys_for_every_pair_and_triple(n):
    for values in itertools.product(VALUES, repeat=n):
        assert _ours(*values) == _numpy_shape(*values), [np.shape(v) for v in values]


def test_a_shape_that_does_not_broadcast_is_numpys_value_error():
    with pytest.raises(ValueError):
        np.broadcast_shapes((3,), (4,))  # the oracle: numpy refuses it
    with pytest.raises(ValueError):
        broadcast_shape(np.ones(3), np.ones(4))


@pytest.mark.parametrize(
    ("condition", "a", "b"),
    [
        (np.ones((3, 1), bool), np.ones((1, 4)), 0.0),
        (np.ones(5, bool), np.ones(5), np.zeros(5)),
        (True, np.ones((2, 3)), 1),
    ],
)
def test_where_is_refused_exactly_past_the_limit(condition, a, b):
    where = GUARDED_HELPERS["_where"]
    size = np.where(condition, a, b).size  # the oracle: the result numpy makes
    with limits(max_elements=size):
        np.testing.assert_array_equal(where(condition, a, b), np.where(condition, a, b))
    with limits(max_elements=size - 1), pytest.raises(SizeLimitError, match="numpy.where"):
        where(condition, a, b)


def test_a_comparison_is_refused_exactly_past_the_limit():
    left, right = np.ones((6, 1)), np.ones(7)
    size = (left < right).size  # the oracle
    with limits(max_elements=size):
        check_comparison(ast.Lt, left, right)
    with limits(max_elements=size - 1), pytest.raises(SizeLimitError, match="comparison"):
        check_comparison(ast.Lt, left, right)


NUMBERS = [True, False, 3, -7, 2.5, np.float64(-1.5), np.int64(4), np.bool_(True)]
OPS = [ast.Add, ast.Sub, ast.Mult, ast.LShift, ast.Pow, ast.BitAnd]


def test_two_numbers_give_pythons_result():
    for op, a, b in itertools.product(OPS, NUMBERS, NUMBERS):
        try:
            expected = BINARY[op](a, b)  # the oracle: the operator itself
        except (TypeError, ValueError, ZeroDivisionError) as exc:
            with pytest.raises(type(exc)):
                binary(op, a, b)
            continue
        got = binary(op, a, b)
        assert type(got) is type(expected) and (got == expected or got != got), (op, a, b)


@pytest.mark.parametrize(
    ("op", "a", "b"),
    [
        (ast.LShift, True, 10**6),
        (ast.LShift, 1, 10**6),
        (ast.Pow, 3, 10**5),
        (ast.Mult, 10**4000, 10**4000),
    ],
)
def test_python_integers_and_bools_have_their_bits_sized_first(op, a, b):
    assert abs(a).bit_length() <= MAX_INTEGER_BITS  # the operands themselves are allowed
    with pytest.raises(SizeLimitError, match="bits"):
        binary(op, a, b)


def test_a_float_beside_an_integer_is_computed_at_once():
    assert binary(ast.Pow, 2.0, 10) == 1024.0
    assert binary(ast.Mult, np.float64(0.5), 10**300) == 0.5 * 10**300
