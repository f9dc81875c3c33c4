"""PyTensor's tensor constructors: ``vector("x")``, ``imatrix()``, ``tensor(dtype=..., shape=...)``.

Each makes a graph input (:func:`~mdf_loops.authoring.input`) whose dimensions
are unknown (``None``) unless ``shape`` gives them: the sizes are fixed when the
model runs. Float constructors without a type prefix use ``config.floatX``;
the prefixes are PyTensor's: ``b`` int8, ``w`` int16, ``i`` int32, ``l`` int64,
``f`` float32, ``d`` float64, ``c`` complex64, ``z`` complex128. A symbol
made without a name gets a fresh one (``input_0``, ...).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from mdf_loops.authoring.config import config
from mdf_loops.authoring.errors import AuthoringError
from mdf_loops.authoring.symbolic import Symbol, input

__all__ = ["tensor", "scalar", "vector", "matrix", "tensor3", "tensor4"]

_PREFIXES = {
    "b": "int8",
    "w": "int16",
    "i": "int32",
    "l": "int64",
    "f": "float32",
    "d": "float64",
    "c": "complex64",
    "z": "complex128",
}
_RANKS = {"scalar": 0, "vector": 1, "matrix": 2, "tensor3": 3, "tensor4": 4}
_UNNAMED = itertools.count()


def _fresh_name(name: str | None) -> str:
    if name is None:
        return f"input_{next(_UNNAMED)}"
    if not isinstance(name, str) or not name.isidentifier():
        raise AuthoringError(f"input name {name!r} must be a Python identifier")
    return name


_DTYPE_NAMES = {
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "floatX",
}


def _looks_like_dtype(value: Any) -> bool:
    return isinstance(value, np.dtype) or (isinstance(value, str) and value in _DTYPE_NAMES)


def tensor(
    name: str | None = None,
    *,
    dtype: Any = None,
    shape: Sequence[int | None] | None = None,
    broadcastable: Any = None,
) -> Symbol:
    """A graph input of element type ``dtype`` (default ``config.floatX``) and ``shape``.

    ``shape`` entries are sizes or ``None`` (known when the model runs). As in
    Theano, a first argument that names an element type is the ``dtype``.
    """
    if name is not None and _looks_like_dtype(name) and dtype is None:
        name, dtype = None, name  # Theano's tensor(dtype, broadcastable)
    if shape is None and broadcastable is not None:
        shape = [1 if b else None for b in broadcastable]
    if shape is None:
        raise AuthoringError(
            "tensor(): give its shape, e.g. shape=(None, 3) (None: known when the model runs)"
        )
    dims = tuple(shape)
    if not all(d is None or (isinstance(d, (int, np.integer)) and d >= 0) for d in dims):
        raise AuthoringError(f"tensor(): shape entries must be sizes or None, got {tuple(shape)}")
    if dtype is None or dtype == "floatX":
        dtype = config.floatX
    return input(_fresh_name(name), dims, np.dtype(dtype))


def _constructor(kind: str, rank: int, dtype: str | None):
    def make(name: str | None = None, dtype: Any = dtype, shape: Any = None) -> Symbol:
        dims = (None,) * rank if shape is None else tuple(shape)
        if len(dims) != rank:
            raise AuthoringError(f"{kind}(): shape {dims} must have {rank} entries")
        return tensor(name, dtype=dtype or config.floatX, shape=dims)

    make.__name__ = kind
    make.__doc__ = (
        f"A graph input of rank {rank} ({dtype or 'config.floatX'}), its sizes "
        "known when the model runs."
    )
    return make


scalar = _constructor("scalar", 0, None)
vector = _constructor("vector", 1, None)
matrix = _constructor("matrix", 2, None)
tensor3 = _constructor("tensor3", 3, None)
tensor4 = _constructor("tensor4", 4, None)

for _prefix, _dtype in _PREFIXES.items():
    for _kind, _rank in _RANKS.items():
        _name = f"{_prefix}{_kind}"
        globals()[_name] = _constructor(_name, _rank, _dtype)
        __all__.append(_name)
