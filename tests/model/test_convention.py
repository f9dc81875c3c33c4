"""mdf_loops/model/convention.py: the port metadata that declares an ONNX tensor type."""

import numpy as np
import pytest
from google.protobuf import json_format
from onnx import helper

from mdf_loops.errors import ModelError
from mdf_loops.model.convention import port_type


@pytest.mark.parametrize(
    ("dims", "dtype"),
    [
        ((), "float64"),
        (("steps",), "float64"),
        (("steps", 3), "int64"),
        ((0, 1, "n", 7), "float32"),
        ((2,), "bool"),
        (("steps", 2, 2), "int32"),
        (("n",), "float16"),
        ((), "uint8"),
    ],
)
def test_port_type_is_what_onnx_writes_of_the_type(dims, dtype):
    """The declaration equals protobuf's JSON form of the TypeProto onnx.helper makes."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    expected = json_format.MessageToDict(helper.make_tensor_type_proto(elem, list(dims)))
    assert port_type(*dims, dtype=dtype) == {"onnx_type": expected}
    assert port_type(*dims, dtype=np.dtype(dtype)) == {"onnx_type": expected}


def test_a_dimension_that_is_neither_a_size_nor_a_name_is_refused():
    with pytest.raises(ModelError, match="a dimension is a size or a name, found 2.5"):
        port_type("steps", 2.5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text",
    [
        "[a, b]",
        "  [ h0 ,x ] ",
        "[]",
        "[a,]",
        "[a[0], b]",
        "(a, b)",
        "a, b",
        "x",
        "[a, b",
        "[if, b]",
        "[a] + [b]",
        "[é, b]",
        "[a, 1]",
    ],
)
def test_variadic_items_read_as_the_parser_reads_them(text):
    import ast

    from mdf_loops.model.convention import variadic_items

    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        with pytest.raises(SyntaxError):
            variadic_items(text)
        return
    expected = (
        [ast.unparse(e) for e in tree.elts] if isinstance(tree, (ast.List, ast.Tuple)) else None
    )
    assert variadic_items(text) == expected


@pytest.mark.parametrize(
    "item, expected",
    [("'_59'", "_59"), ('"x"', "x"), ("x", None), ("'a b'", None), ("'x\"", None), ("''", None)],
)
def test_quoted_name_reads_modeci_mdf_s_quoted_variadic_items(item, expected):
    from mdf_loops.model.convention import quoted_name

    assert quoted_name(item) == expected
