"""Values as they travel through the MDF engine, and typed tensors in model files.

ONNX has three kinds of value: tensors, sequences and optionals. Inside
modeci-mdf's engine they are represented as

* a tensor: a ``numpy.ndarray`` (any dtype, ``bfloat16`` and friends via ml_dtypes);
* a sequence: an :class:`OnnxSequence` (a ``list`` subclass; modelspec turns plain
  lists into arrays, so sequences must not be plain lists);
* an empty optional: :data:`EMPTY_OPTIONAL` (the engine replaces ``None`` on a
  port by zeros, so "no value" needs a value of its own). An optional that holds
  a value is just that value.

Users see plain Python: arrays, lists and ``None`` (:func:`to_user`).

A tensor written into an MDF file keeps its element type with
:func:`encode_tensor`: ``{"dtype": "float32", "shape": [2, 3], "data": [...]}``.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from mdf_loops.errors import ModelError

__all__ = [
    "OnnxSequence",
    "EMPTY_OPTIONAL",
    "to_engine",
    "to_kernel",
    "to_user",
    "encode_tensor",
    "decode_tensor",
    "is_encoded_tensor",
    "dtype_from_name",
    "is_weak_scalar",
    "promoted_dtype",
]


class OnnxSequence(list):
    """An ONNX sequence value inside the MDF engine."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"OnnxSequence({list.__repr__(self)})"


class _EmptyOptional:
    """The value of an optional that holds nothing."""

    _instance: _EmptyOptional | None = None

    def __new__(cls) -> _EmptyOptional:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "EMPTY_OPTIONAL"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "EMPTY_OPTIONAL"


EMPTY_OPTIONAL = _EmptyOptional()


def to_engine(value: Any) -> Any:
    """Convert a kernel or user value into its in-engine form."""
    if value is None:
        return EMPTY_OPTIONAL
    if type(value) is list:
        return OnnxSequence(to_engine(v) for v in value)
    if isinstance(value, (np.ndarray, OnnxSequence, _EmptyOptional)):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


def to_kernel(value: Any) -> Any:
    """Convert an in-engine value into what ONNX kernels take (arrays, lists, None)."""
    if value is EMPTY_OPTIONAL:
        return None
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, list):
        return [to_kernel(v) for v in value]
    if isinstance(value, (bool, int, float, np.generic)):
        return np.asarray(value)
    return value


def to_user(value: Any) -> Any:
    """Convert an in-engine value into plain Python/numpy for the caller."""
    if value is EMPTY_OPTIONAL or value is None:
        return None
    if isinstance(value, list):
        return [to_user(v) for v in value]
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


_EXTRA_DTYPES = {
    name: np.dtype(getattr(ml_dtypes, name))
    for name in (
        "bfloat16",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e5m2",
        "float8_e5m2fnuz",
        "int4",
        "uint4",
        "float4_e2m1fn",
    )
    if hasattr(ml_dtypes, name)
}


def dtype_from_name(name: str) -> np.dtype:
    """``numpy.dtype`` for a name such as ``"float32"`` or ``"bfloat16"``."""
    if name in _EXTRA_DTYPES:
        return _EXTRA_DTYPES[name]
    try:
        dtype = np.dtype(name)
    except TypeError as exc:
        raise ValueError(f"unknown element type {name!r}") from exc
    if dtype.subdtype is not None or dtype.fields is not None or dtype.kind == "V":
        # a sub-array dtype ('(46000,46000)u1') makes one element of any size
        raise ValueError(f"element type {name!r:.60} is not a plain element type")
    return dtype


def is_encoded_tensor(value: Any) -> bool:
    """True for a dict written by :func:`encode_tensor`."""
    return isinstance(value, dict) and set(value) == {"dtype", "shape", "data"}


def encode_tensor(array: np.ndarray) -> dict:
    """A JSON/YAML-safe description of ``array`` that keeps dtype and shape.

    Numbers of every dtype, bool and text (``str``, ``bytes``, an object array of
    ``str``) round-trip through :func:`decode_tensor`: floats are written as
    Python floats (``"nan"``, ``"inf"`` spelled as text; wider than 64 bits: as
    text that keeps every digit), complex numbers as ``[real, imaginary]``, bytes
    as latin-1 text (one character a byte). Any other dtype (dates, records,
    objects other than text) is refused with a :class:`ModelError`.
    """
    array = np.asarray(array)
    dtype, flat = array.dtype, array.ravel()
    data: list[Any]
    if dtype.kind == "f" or dtype in _EXTRA_DTYPES.values():
        data = _floats(flat)
    elif dtype.kind == "c":
        data = [list(pair) for pair in zip(_floats(flat.real), _floats(flat.imag), strict=True)]
    elif dtype.kind in "biu":
        data = flat.tolist()
    elif dtype.kind == "U" or (dtype.kind == "O" and all(type(v) is str for v in flat)):
        data = [str(v) for v in flat]
    elif dtype.kind == "S":
        data = [v.decode("latin-1") for v in flat.tolist()]
    else:
        raise ModelError(
            f"encode_tensor: cannot write an array of dtype {dtype} into a model file "
            f"({_UNWRITABLE.get(dtype.kind, 'no file form')}); convert it to numbers, "
            "bool or str first"
        )
    name = _TEXT_NAMES.get(dtype.kind, dtype.name)
    return {"dtype": name, "shape": list(array.shape), "data": data}


#: text is written by kind: its width comes back from the data
_TEXT_NAMES = {"U": "str", "S": "bytes"}
_UNWRITABLE = {
    "O": "an object array is written only when every element is a str",
    "M": "dates have no file form",
    "m": "time spans have no file form",
    "V": "records and raw bytes have no file form",
}


def _floats(flat: np.ndarray) -> list[Any]:
    """Real numbers as JSON values: Python floats, or text where a float cannot hold them."""
    if flat.dtype.itemsize > 8 and flat.dtype not in _EXTRA_DTYPES.values():
        return [str(v) for v in flat]  # long double: its str keeps every digit
    return [v if np.isfinite(v) else str(v) for v in flat.astype(np.float64).tolist()]


def _from_floats(data: list[Any], dtype: np.dtype) -> np.ndarray:
    """The inverse of :func:`_floats` ("nan", "inf", "-inf" spelled as text)."""
    if dtype.itemsize > 8 and dtype not in _EXTRA_DTYPES.values():
        return np.array([str(v) for v in data]).astype(dtype)
    return np.array([float(v) for v in data], dtype=np.float64).astype(dtype)


def decode_tensor(encoded: dict) -> np.ndarray:
    """The array described by an :func:`encode_tensor` dict."""
    dtype = dtype_from_name(encoded["dtype"])
    shape = tuple(int(d) for d in encoded["shape"])
    data = encoded["data"]
    if dtype.kind == "O":
        array = np.array(data, dtype=object)
    elif dtype.kind == "U":  # the width comes from the data, never from the file
        array = np.array([str(v) for v in data], dtype=np.str_)
    elif dtype.kind == "S":
        array = np.array([str(v).encode("latin-1") for v in data], dtype=np.bytes_)
    elif dtype.kind == "c":
        part = np.finfo(dtype).dtype
        pairs = [v if isinstance(v, list) else [v, 0.0] for v in data]
        real = _from_floats([p[0] for p in pairs], part)
        imag = _from_floats([p[1] for p in pairs], part)
        array = np.empty(len(pairs), dtype)
        array.real, array.imag = real, imag
    elif dtype.kind == "f" or dtype in _EXTRA_DTYPES.values():
        array = _from_floats(data, dtype)
    else:  # bool and integers: made in their own type (a uint64 past int64 stays exact)
        array = np.array(data, dtype=dtype)
    return array.reshape(shape)


def is_weak_scalar(value: Any) -> bool:
    """A Python number (bool, int, float): numpy treats it as weak (NEP 50)."""
    return isinstance(value, (bool, int, float)) and not isinstance(value, np.generic)


def promoted_dtype(*operands: Any) -> np.dtype:
    """numpy's element type for an operation on ``operands`` (dtypes, arrays, Python numbers).

    Dtypes and arrays are strong and promote among themselves; a Python number is weak:
    it takes their type unless it is of a higher kind (a float meeting integers gives
    float64), as numpy 2 does (NEP 50). A number numpy refuses to place in the strong
    type counts by its own type. Only weak operands: numpy's defaults (int64, float64).
    """
    strong = [o for o in operands if not is_weak_scalar(o)]
    weak = [o for o in operands if is_weak_scalar(o)]
    if not strong:
        return np.result_type(*weak)
    common = np.result_type(*strong)
    for value in weak:
        try:
            common = np.result_type(common, value)
        except (OverflowError, TypeError):
            common = np.result_type(common, np.asarray(value).dtype)
    return common
