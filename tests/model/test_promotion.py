"""numpy's weak-scalar promotion, stated once (mdf_loops/model/values.py promoted_dtype),
against what numpy's own arithmetic gives."""

from __future__ import annotations

import numpy as np
import pytest

from mdf_loops.model.values import is_weak_scalar, promoted_dtype

DTYPES = [np.bool_, np.int8, np.int32, np.int64, np.uint8, np.float16, np.float32, np.float64]
SCALARS = [True, 3, -2, 2.5, 0.0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
def test_tensor_and_python_number(dtype, scalar):
    tensor = np.ones(3, dtype)
    if dtype is np.uint8 and scalar == -2:
        pytest.skip("numpy refuses a negative Python int with a uint8 array")
    assert promoted_dtype(np.dtype(dtype), scalar) == (tensor + scalar).dtype


@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("b", DTYPES)
def test_two_tensors(a, b):
    assert promoted_dtype(np.dtype(a), np.dtype(b)) == (np.ones(1, a) + np.ones(1, b)).dtype


def test_only_python_numbers_take_numpys_defaults():
    assert promoted_dtype(2, 3) == (np.asarray(2) + 3).dtype
    assert promoted_dtype(2, 3.5) == np.float64


def test_weak_means_a_python_number():
    assert is_weak_scalar(1) and is_weak_scalar(1.5) and is_weak_scalar(True)
    assert not is_weak_scalar(np.float32(1)) and not is_weak_scalar(np.ones(1))
