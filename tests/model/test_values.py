"""mdf_loops/model/values.py: encoded tensors read from a file."""

from __future__ import annotations

import numpy as np
import pytest

from mdf_loops.model.values import decode_tensor, dtype_from_name, encode_tensor


@pytest.mark.parametrize("name", ["(46000,46000)u1", "(3,)f8", "V16", "f8,i4"])
def test_an_element_type_of_any_size_is_refused_before_decoding(name):
    # one element of '(46000,46000)u1' is 2 GB: refused before any array is made
    with pytest.raises(ValueError, match="not a plain element type"):
        decode_tensor({"dtype": name, "shape": [1], "data": [0]})
    np.dtype(name)  # numpy itself accepts each of them


def test_plain_element_types_still_round_trip():
    for array in (np.arange(6, dtype=np.int16).reshape(2, 3), np.array([1.5, np.nan]),
                  np.array(["a", "bc"], dtype=object)):
        back = decode_tensor(encode_tensor(array))
        assert back.shape == array.shape
        np.testing.assert_array_equal(back.astype(array.dtype), array)
    assert dtype_from_name("bfloat16").itemsize == 2
