"""ONNX types of exported values: declared input types, and types through loops.

ONNX's shape inference cannot see a body's outer-scope values and drops the
shapes of loop-carried values, so the exporter derives the types of loop
outputs from the exported bodies (:func:`control_flow_output_types`) and widens
a loop-carried type to what holds in every iteration (:func:`loosened`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from google.protobuf import json_format
from modeci_mdf.mdf import Graph
from numpy.typing import DTypeLike
from onnx import TensorProto, TypeProto, helper

from mdf_loops.errors import ModelError
from mdf_loops.model.convention import body_signature
from mdf_loops.model.signatures import IfSignature, LoopSignature, Signature
from mdf_loops.model.values import dtype_from_name
from mdf_loops.onnx.builder import GraphBuilder, Weak, elem_dtype, onnx_dtype

__all__ = [
    "declared_type",
    "parsed_type",
    "tensor_type",
    "control_flow_output_types",
    "has_shape",
    "merged",
    "add_axis",
    "known_type",
    "check_state_types",
    "loosened",
    "complete_output_shapes",
    "without_shape",
    "drop_axis",
    "required_elem_type",
    "conformed",
]


def parsed_type(declared: Any, where: str) -> TypeProto:
    """The ONNX type a port's ``metadata["onnx_type"]`` declares (``where``: the port), or a
    :class:`ModelError` saying it is not one."""
    try:
        return json_format.ParseDict(declared, TypeProto())
    except (json_format.ParseError, TypeError, ValueError, AttributeError) as exc:
        raise ModelError(
            f"{where}: metadata 'onnx_type' is not an ONNX type ({' '.join(str(exc).split())}); "
            "write it with mdf_loops.model.port_type(...)"
        ) from None


def declared_type(port, example: Any) -> TypeProto:
    if port is not None and port.metadata and port.metadata.get("onnx_type"):
        return parsed_type(port.metadata["onnx_type"], f"port '{port.id}'")
    if example is not None:
        if isinstance(example, list):
            element = declared_type(None, example[0]) if example else tensor_type(np.float64, None)
            return helper.make_sequence_type_proto(element)
        array = np.asarray(example)
        name = port.id if port is not None else "dim"
        return tensor_type(array.dtype, [f"{name}_{i}" for i in range(array.ndim)])
    dtype: DTypeLike = np.float64
    if port is not None and port.type:
        try:
            dtype = dtype_from_name(port.type)
        except ValueError:
            raise ModelError(f"input port '{port.id}': unknown type {port.type!r}") from None
    # modeci-mdf reads a missing shape as (); only a non-empty shape says something
    shape = tuple(port.shape) if port is not None and port.shape else None
    return tensor_type(dtype, shape)


def tensor_type(dtype, shape) -> TypeProto:
    return helper.make_tensor_type_proto(onnx_dtype(dtype), None if shape is None else list(shape))


def control_flow_output_types(
    signature: Signature,
    body: onnx.GraphProto,
    attributes: dict,
    input_types: list[TypeProto | None],
) -> list[TypeProto | None]:
    """Types of a control-flow node's outputs, from its exported body and its inputs."""
    outputs = [o.type for o in body.output]
    if isinstance(signature, IfSignature):
        return outputs
    if isinstance(signature, LoopSignature):
        initial = input_types[signature.node_carried]
        carried = outputs[signature.body_carried_outputs]
        scanned = outputs[signature.body_scan_outputs]
        # a carried value is its initial value after zero iterations, the body's after more
        return [merged(a, b) for a, b in zip(initial, carried, strict=True)] + [
            add_axis(t, 0) for t in scanned
        ]
    scanned = outputs[signature.body_scan_outputs]
    axes = list(attributes.get("scan_output_axes") or [0] * len(scanned))
    return outputs[signature.body_state_outputs] + [
        add_axis(t, a) for t, a in zip(scanned, axes, strict=True)
    ]


def has_shape(t: TypeProto | None) -> bool:
    return t is not None and t.HasField("tensor_type") and t.tensor_type.HasField("shape")


def merged(a: TypeProto | None, b: TypeProto) -> TypeProto | None:
    """The type a value of type ``a`` or ``b`` has: shared rank, and dims where they agree."""
    if a is None or not (a.HasField("tensor_type") and b.HasField("tensor_type")):
        return None
    if a.tensor_type.elem_type != b.tensor_type.elem_type:
        return None
    if not (has_shape(a) and has_shape(b)) or len(a.tensor_type.shape.dim) != len(
        b.tensor_type.shape.dim
    ):
        return helper.make_tensor_type_proto(a.tensor_type.elem_type, None)
    dims = []
    for da, db in zip(a.tensor_type.shape.dim, b.tensor_type.shape.dim, strict=True):
        dims.append(
            da.dim_value or da.dim_param if da == db and (da.dim_value or da.dim_param) else None
        )
    return helper.make_tensor_type_proto(a.tensor_type.elem_type, dims)


def add_axis(t: TypeProto, axis: int) -> TypeProto | None:
    if not t.HasField("tensor_type"):
        return None
    tensor = t.tensor_type
    if not tensor.HasField("shape"):
        return helper.make_tensor_type_proto(tensor.elem_type, None)
    dims = [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim
    ]
    axis = axis + len(dims) + 1 if axis < 0 else axis
    return helper.make_tensor_type_proto(tensor.elem_type, dims[:axis] + [None] + dims[axis:])


def known_type(t: TypeProto | None, where: str) -> TypeProto:
    if t is None:
        raise ModelError(
            f"{where}: the type of a loop-carried input is unknown; declare the input "
            "port's type or pass example_inputs"
        )
    return t


def check_state_types(
    exported: onnx.GraphProto, body: Graph, inputs: slice, outputs: slice, where: str
) -> None:
    """A ModelError when a body returns a state (Scan) or carried value (Loop) of another
    element type than it receives: ONNX needs the same type from one iteration to the next.
    ``inputs`` and ``outputs`` are the positions of the states among the body's formal
    inputs and outputs (a signature's ``body_states`` and ``body_state_outputs``)."""
    signature = body_signature(body)
    positions = zip(
        range(len(exported.input))[inputs], range(len(exported.output))[outputs], strict=True
    )
    for i, j in positions:
        a = elem_dtype(exported.input[i].type)
        b = elem_dtype(exported.output[j].type)
        if a is not None and b is not None and a != b:
            node_id, port_id = signature.formal_outputs[j]
            raise ModelError(
                f"{where}: body '{body.id}' returns '{node_id}.{port_id}' as {b} for "
                f"'{signature.formal_inputs[i]}', which comes in as {a}; "
                "a state keeps its element type from one iteration to the next"
            )


def loosened(given: TypeProto, returned: TypeProto) -> TypeProto:
    """A loop-carried body input type that admits both ``given`` and what the body ``returned``."""
    if given.HasField("tensor_type") and returned.HasField("tensor_type"):
        return merged(given, returned) or given
    return given


def complete_output_shapes(
    graph: onnx.GraphProto, opset: int, other_opsets: dict[str, int] | None = None
) -> onnx.GraphProto:
    """Fill in top-level output shapes left unknown, from whole-model shape inference."""
    missing = [
        o
        for o in graph.output
        if o.type.HasField("tensor_type") and not o.type.tensor_type.HasField("shape")
    ]
    if not missing:
        return graph
    probe = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)]
        + [helper.make_opsetid(d, v) for d, v in (other_opsets or {}).items()],
    )
    try:
        inferred = onnx.shape_inference.infer_shapes(probe).graph
    except Exception:
        return graph
    known = {v.name: v.type for v in list(inferred.value_info) + list(inferred.output)}
    for output in missing:
        t = known.get(output.name)
        if t is not None and t.tensor_type.HasField("shape"):
            output.type.CopyFrom(t)
    return graph


def without_shape(t: TypeProto | None, where: str) -> TypeProto:
    if t is None:
        raise ModelError(
            f"{where}: the type of a loop-carried input is unknown; declare the input "
            "port's type or pass example_inputs"
        )
    if t.HasField("tensor_type"):
        return helper.make_tensor_type_proto(t.tensor_type.elem_type, None)
    return t


def drop_axis(t: TypeProto, axis: int) -> TypeProto:
    if not t.HasField("tensor_type"):
        return t
    tensor = t.tensor_type
    if not tensor.HasField("shape"):
        return helper.make_tensor_type_proto(tensor.elem_type, None)
    dims = list(tensor.shape.dim)
    axis = axis + len(dims) if axis < 0 else axis
    kept = [
        d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
        for i, d in enumerate(dims)
        if i != axis
    ]
    return helper.make_tensor_type_proto(tensor.elem_type, kept)


#: ONNX type strings ("tensor(int64)") -> element types
_TENSOR_TYPES = {f"tensor({name.lower()})": value for name, value in TensorProto.DataType.items()}


def required_elem_type(schema, type_str: str) -> int | None:
    """The element type an input must have, when its constraint allows exactly one tensor type."""
    allowed = next(
        (
            list(c.allowed_type_strs)
            for c in schema.type_constraints
            if c.type_param_str == type_str
        ),
        [type_str],
    )
    return _TENSOR_TYPES.get(allowed[0]) if len(allowed) == 1 else None


#: formal inputs that every ONNX operator taking them reads as a 1-D tensor (a list of
#: integers: Reduce*, Squeeze, Unsqueeze, Slice, Pad); an MDF model may give a number
#: (PsyNeuLink writes ``onnx::ReduceSum`` with ``"axes": 0``), which modeci-mdf's
#: engine reads as that one axis
VECTOR_INPUTS = frozenset({"axes"})


def as_vector(builder: GraphBuilder, value: Any) -> Any:
    """``value`` (an ONNX value, or a :class:`Weak` constant) as a 1-D tensor when it is a
    scalar or of a rank not known here."""
    if isinstance(value, Weak):
        return Weak(value.array().reshape(-1)) if value.array().ndim == 0 else value
    shape = builder.shape(value) if value else (0,)
    if shape is not None and len(shape) == 1:
        return value
    flat = builder.constant(np.array([-1], dtype=np.int64), hint=f"{value}_flat")
    return builder.op("Reshape", [value, flat], hint=f"{value}_vector")[0]


def conformed(builder: GraphBuilder, value: str, required: int | None) -> str:
    """``value``, cast to ``required`` when its known element type is another (a trip count
    that came as a float64 number is cast to int64)."""
    if not value or required is None:
        return value
    known = builder.types.get(value)
    if known is None or not known.HasField("tensor_type") or not known.tensor_type.elem_type:
        return value
    if known.tensor_type.elem_type == required:
        return value
    name = TensorProto.DataType.Name(required).lower()
    return builder.op("Cast", [value], hint=f"{value}_as_{name}", to=required)[0]
