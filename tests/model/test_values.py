"""mdf_loops/model/values.py: encoded tensors read from a file."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from mdf_loops.errors import ModelError
from mdf_loops.model.values import decode_tensor, dtype_from_name, encode_tensor


@pytest.mark.parametrize("name", ["(46000,46000)u1", "(3,)f8", "V16", "f8,i4"])
def test_an_element_type_of_any_size_is_refused_before_decoding(name):
    # one element of '(46000,46000)u1' is 2 GB: refused before any array is made
    with pytest.raises(ValueError, match="not a plain element type"):
        decode_tensor({"dtype": name, "shape": [1], "data": [0]})
    np.dtype(name)  # numpy itself accepts each of them


def test_plain_element_types_still_round_trip():
    for array in (
        np.arange(6, dtype=np.int16).reshape(2, 3),
        np.array([1.5, np.nan]),
        np.array(["a", "bc"], dtype=object),
    ):
        back = decode_tensor(encode_tensor(array))
        assert back.shape == array.shape
        np.testing.assert_array_equal(back.astype(array.dtype), array)
    assert dtype_from_name("bfloat16").itemsize == 2


_ARRAYS = [
    *(np.array([[0, 1], [7, -3]]).astype(t) for t in ("int8", "int16", "int32", "int64")),
    *(np.array([0, 1, 200]).astype(t) for t in ("uint8", "uint16", "uint32")),
    np.array([np.iinfo(np.uint64).max, 0], dtype=np.uint64),  # past int64 and float64
    np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max]),
    *(np.array([0.1, -np.inf, np.nan, 1e-30]).astype(t) for t in ("float16", "float32", "float64")),
    np.array([np.longdouble(1) / 3, np.longdouble(np.inf)]),  # more digits than a float
    np.array([1 + 2j, np.nan - 0.5j], dtype=np.complex64),
    np.array([[1 / 3 + 1e-300j], [np.inf + 0j]]),
    np.array([np.clongdouble(1) / 3j]),
    np.array([True, False]),
    np.array(["a", "héllo", ""]),
    np.array([b"a\xff\x00b", b""]),
    np.array(["a", "bc"], dtype=object),
    np.array(3.5),
    np.zeros((0, 2), dtype=np.float32),
    np.array(dtype_from_name("bfloat16").type(1.5)).reshape(1),
]


@pytest.mark.parametrize("array", _ARRAYS, ids=lambda a: f"{a.dtype}{list(a.shape)}")
def test_every_array_encode_tensor_accepts_round_trips_through_json(array):
    back = decode_tensor(json.loads(json.dumps(encode_tensor(array))))
    assert back.shape == array.shape and back.dtype.kind == array.dtype.kind
    assert back.dtype == array.dtype or array.dtype.kind in "US"  # text: width from the data
    assert np.array_equal(back, array, equal_nan=array.dtype.kind in "fc")


def test_text_decodes_to_the_width_of_its_data_not_of_its_name():
    back = decode_tensor({"dtype": "<U99999", "shape": [2], "data": ["ab", "c"]})
    assert back.dtype == np.dtype("<U2") and back.tolist() == ["ab", "c"]


@pytest.mark.parametrize(
    "array, why",
    [
        (np.array(["2020-01-01"], dtype="datetime64[D]"), "dates"),
        (np.array([1, None], dtype=object), "every element is a str"),
        (np.zeros(2, dtype="f8,i4"), "records"),
    ],
)
def test_a_dtype_without_a_file_form_is_refused_by_name(array, why):
    with pytest.raises(ModelError, match=rf"dtype {re.escape(str(array.dtype))}.*{why}"):
        encode_tensor(array)
