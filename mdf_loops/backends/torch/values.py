"""The values the torch lowering passes between ONNX nodes, and their way in and out.

A tensor is a ``torch.Tensor``; a sequence a Python list of tensors; an optional an
:class:`~mdf_loops.backends.jax.values.Opt` (the JAX lowering's optional: one
description of an ONNX optional for both). User values come in typed as the exported
model declares them (:func:`to_torch`) and go out as numpy arrays, lists and ``None``
(:func:`to_numpy`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import torch

from mdf_loops.backends.jax.values import Opt, label, np_dtype

__all__ = [
    "Opt",
    "label",
    "torch_dtype",
    "tensor_of",
    "to_torch",
    "to_numpy",
    "ints",
]

_DTYPES: dict[int, torch.dtype] = {
    onnx.TensorProto.FLOAT: torch.float32,
    onnx.TensorProto.DOUBLE: torch.float64,
    onnx.TensorProto.FLOAT16: torch.float16,
    onnx.TensorProto.BFLOAT16: torch.bfloat16,
    onnx.TensorProto.INT8: torch.int8,
    onnx.TensorProto.INT16: torch.int16,
    onnx.TensorProto.INT32: torch.int32,
    onnx.TensorProto.INT64: torch.int64,
    onnx.TensorProto.UINT8: torch.uint8,
    onnx.TensorProto.UINT16: torch.uint16,
    onnx.TensorProto.UINT32: torch.uint32,
    onnx.TensorProto.UINT64: torch.uint64,
    onnx.TensorProto.BOOL: torch.bool,
}


def torch_dtype(elem_type: int, where: str) -> torch.dtype:
    """The torch dtype of an ONNX element type; a clear error for those torch lacks."""
    dtype = _DTYPES.get(elem_type)
    if dtype is None:
        name = onnx.TensorProto.DataType.Name(elem_type)
        raise TypeError(f"{where}: torch has no tensors of ONNX type {name}")
    return dtype


def tensor_of(array: Any, where: str = "value") -> torch.Tensor:
    """A numpy array (or number) as a torch tensor of the same dtype, copied."""
    array = np.asarray(array)
    if array.dtype.kind in "OUS":
        raise TypeError(f"{where}: torch has no tensors of {array.dtype} values (strings)")
    if array.dtype.name == "bfloat16":
        return torch.tensor(array.astype(np.float32)).to(torch.bfloat16)
    return torch.tensor(array.copy(order="C"))


def to_torch(value: Any, type_proto: onnx.TypeProto | None, device: Any = None) -> Any:
    """A user value as the lowering takes an input of ``type_proto`` (tensors pass as they are)."""
    if type_proto is None:
        tensor = value if isinstance(value, (torch.Tensor, Opt)) else tensor_of(value)
        return tensor if device is None or isinstance(tensor, Opt) else tensor.to(device)
    kind = type_proto.WhichOneof("value")
    if kind == "sequence_type":
        return [to_torch(v, type_proto.sequence_type.elem_type, device) for v in value]
    if kind == "optional_type":
        inner = type_proto.optional_type.elem_type
        return Opt(None if value is None else to_torch(value, inner, device))
    if isinstance(value, Opt):
        return value
    elem_type = type_proto.tensor_type.elem_type if kind == "tensor_type" else 0
    if isinstance(value, torch.Tensor):
        tensor = value
    else:
        array = np.asarray(value)
        if elem_type:
            array = array.astype(np_dtype(elem_type), copy=False)
        tensor = tensor_of(array)
    dtype = _DTYPES.get(elem_type)
    if dtype is not None and tensor.dtype != dtype:
        tensor = tensor.to(dtype)
    return tensor if device is None else tensor.to(device)


def to_numpy(value: Any) -> Any:
    """A lowering's value as users get it: numpy arrays, lists, ``None`` for an empty optional."""
    if isinstance(value, Opt):
        return None if value.value is None else to_numpy(value.value)
    if isinstance(value, list):
        return [to_numpy(v) for v in value]
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu()
        if tensor.dtype == torch.bfloat16:
            import ml_dtypes

            return tensor.float().numpy().astype(ml_dtypes.bfloat16)
        return tensor.numpy()
    return value


def ints(value: Any) -> list[int]:
    """A tensor of integers (a shape, axes, indices) as Python ints."""
    if isinstance(value, torch.Tensor):
        return [int(v) for v in value.reshape(-1).tolist()]
    return [int(v) for v in np.asarray(value).reshape(-1)]
