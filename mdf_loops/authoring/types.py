"""Static types of traced values, and their inference with ONNX's own shape inference.

Every traced value has a :class:`TensorType`: an element type and a shape whose
dimensions are ints or ``None`` (unknown). The output types of an ONNX operator
are found by running ``onnx.shape_inference`` on a one-node model built from the
input types (constant inputs as initializers, so shapes computed from constants
are known), which also rejects ill-typed calls at the line that makes them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TypeProto, helper, numpy_helper, shape_inference

from mdf_loops.authoring.errors import AuthoringError
from mdf_loops.onnx.domains import DEFAULT_OPSET

__all__ = ["OPSET", "TensorType", "infer_types", "onnx_elem_type"]

#: The default-domain ONNX opset of authored models (onnxruntime runs it).
OPSET = DEFAULT_OPSET


def onnx_elem_type(dtype: np.dtype) -> int:
    """The ONNX element type of a numpy dtype."""
    try:
        return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    except (KeyError, TypeError, ValueError) as exc:
        raise AuthoringError(f"element type {dtype} has no ONNX equivalent") from exc


@dataclass(frozen=True)
class TensorType:
    """Element type and shape of a tensor; a dimension (or the whole shape) may be unknown."""

    dtype: np.dtype
    shape: tuple[int | None, ...] | None

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def is_static(self) -> bool:
        """True when every dimension is known."""
        return self.shape is not None and all(d is not None for d in self.shape)

    def element(self) -> TensorType:
        """The type of one entry along the first axis."""
        if self.shape is None:
            return TensorType(self.dtype, None)
        if not self.shape:
            raise AuthoringError(f"a scalar ({self}) has no first axis to iterate over")
        return TensorType(self.dtype, self.shape[1:])

    def stacked(self, length: int | None) -> TensorType:
        """The type of ``length`` values of this type stacked along a new first axis."""
        return TensorType(self.dtype, None if self.shape is None else (length,) + self.shape)

    def compatible(self, other: TensorType) -> bool:
        """Same element type, and no dimension known on both sides that differs."""
        if self.dtype != other.dtype:
            return False
        if self.shape is None or other.shape is None:
            return True
        if len(self.shape) != len(other.shape):
            return False
        return all(
            a is None or b is None or a == b for a, b in zip(self.shape, other.shape, strict=True)
        )

    def to_onnx(self, dim_names: Sequence[str | None] | None = None) -> TypeProto:
        """The ONNX ``TypeProto``; ``dim_names`` names unknown dimensions (dim_param)."""
        if self.shape is None:
            return helper.make_tensor_type_proto(onnx_elem_type(self.dtype), None)
        dims: list[Any] = list(self.shape)
        if dim_names is not None:
            dims = [d if d is not None else name for d, name in zip(dims, dim_names, strict=True)]
        return helper.make_tensor_type_proto(onnx_elem_type(self.dtype), dims)

    @classmethod
    def from_onnx(cls, type_proto: TypeProto, where: str) -> TensorType:
        if not type_proto.HasField("tensor_type") or not type_proto.tensor_type.elem_type:
            raise AuthoringError(f"{where}: the result is not a tensor of known element type")
        tensor = type_proto.tensor_type
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        if not tensor.HasField("shape"):
            return cls(dtype, None)
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
        return cls(dtype, shape)

    def __str__(self) -> str:
        if self.shape is None:
            return f"{self.dtype}[...]"
        return f"{self.dtype}[{', '.join('?' if d is None else str(d) for d in self.shape)}]"


def infer_types(
    op_type: str,
    inputs: Sequence[tuple[TensorType, np.ndarray | None] | None],
    attributes: Mapping[str, Any],
    n_outputs: int,
    where: str,
) -> list[TensorType]:
    """Output types of ``op_type`` applied to inputs of the given types.

    ``inputs`` holds ``(type, constant value or None)`` per input (``None`` for an
    absent optional input). Raises :class:`AuthoringError` naming ``where`` when
    ONNX rejects the call.
    """
    names, graph_inputs, initializers = [], [], []
    for k, item in enumerate(inputs):
        if item is None:
            names.append("")
            continue
        tensor_type, value = item
        name = f"in{k}"
        names.append(name)
        if value is not None:
            initializers.append(numpy_helper.from_array(np.asarray(value), name))
        else:
            graph_inputs.append(helper.make_value_info(name, tensor_type.to_onnx()))
    outputs = [f"out{j}" for j in range(n_outputs)]
    node = helper.make_node(op_type, names, outputs, **_onnx_attributes(attributes))
    graph = helper.make_graph([node], "infer", graph_inputs, [], initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    try:
        inferred = shape_inference.infer_shapes(
            model, check_type=True, strict_mode=True, data_prop=True
        )
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as exc:
        described = ", ".join("absent" if i is None else str(i[0]) for i in inputs)
        raise AuthoringError(f"{where}: onnx::{op_type}({described}) is invalid: {exc}") from None
    found = {vi.name: vi.type for vi in inferred.graph.value_info}
    types = []
    for name in outputs:
        if name not in found:
            raise AuthoringError(f"{where}: the type of onnx::{op_type}'s result is unknown")
        types.append(TensorType.from_onnx(found[name], where))
    return types


def _onnx_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Attribute values as ``helper.make_node`` takes them (arrays become tensors)."""
    converted = {}
    for name, value in attributes.items():
        if isinstance(value, np.ndarray):
            converted[name] = numpy_helper.from_array(value)
        else:
            converted[name] = value
    return converted
