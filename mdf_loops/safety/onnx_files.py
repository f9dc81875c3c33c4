"""What an ONNX file may make mdf-loops read and allocate before anything runs.

An ONNX tensor may keep its data in another file ("external data", a path
relative to the model's folder). onnx itself refuses absolute paths, ``..`` and
links, but not a plain file below the folder: an initializer naming
``.ssh/id_rsa`` beside a model in a home folder would copy the key into the
imported model and the run's outputs. :func:`checked_onnx` therefore reads
external data only when the caller allows it: with ``trusted`` (the model's own
folder), or from an explicit ``external_data_dir`` (then only from files inside
it), for every tensor that holds data: dense tensors and the values and indices
of sparse ones, as initializers or attributes (a ``Constant``'s
``sparse_value``), in bodies at every depth; every byte goes through
:func:`mdf_loops.files.read_file` (regular files only). It also refuses,
before any array is made, every tensor (initializers, sparse initializers,
attribute tensors, in bodies at every depth) whose declared size exceeds
``max_elements``: a 78-byte file can declare a sparse tensor of 20000 x 20000
elements that turning dense would allocate.

:func:`onnx_file_access` sets the policy for a block; :func:`mdf_loops.run`, the
validator and the command line set it from their arguments.
"""

from __future__ import annotations

import contextvars
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import onnx
from onnx import AttributeProto, SparseTensorProto, TensorProto

from mdf_loops.errors import ModelError, SizeLimitError
from mdf_loops.files import read_file
from mdf_loops.ops.common import current_limits, how_to_raise

__all__ = ["onnx_file_access", "checked_onnx", "OnnxFileAccess"]


@dataclass(frozen=True)
class OnnxFileAccess:
    """Where external tensor data may be read from (nowhere by default)."""

    trusted: bool = False
    external_data_dir: str | None = None


_ACCESS: contextvars.ContextVar[OnnxFileAccess] = contextvars.ContextVar(
    "mdf_loops_onnx_file_access", default=OnnxFileAccess()
)


@contextmanager
def onnx_file_access(
    *, trusted: bool = False, external_data_dir: str | os.PathLike | None = None
) -> Iterator[None]:
    """Allow ONNX files read in the block to load external tensor data: from the model's
    own folder when ``trusted``, else only from files inside ``external_data_dir``."""
    folder = os.fspath(external_data_dir) if external_data_dir is not None else None
    if folder is not None and not os.path.isdir(folder):
        raise ModelError(f"external data folder '{folder}' does not exist")
    token = _ACCESS.set(OnnxFileAccess(trusted, folder))
    try:
        yield
    finally:
        _ACCESS.reset(token)


def checked_onnx(model: onnx.ModelProto, path: str | None) -> onnx.ModelProto:
    """``model`` (read from ``path`` without its external data) after the size checks,
    with its external data loaded where :func:`onnx_file_access` allows it."""
    where = path or "the ONNX model"
    external = []
    for tensor, location in _tensors(model):
        _check_size(tensor, f"{where}: {location}")
        for stored, part in _data_holders(tensor, location):
            if stored.data_location == TensorProto.EXTERNAL:
                external.append((stored, part))
    if external:
        folder = _external_folder(path, where, external[0][1])
        for tensor, location in external:
            _load_external(tensor, folder, f"{where}: {location}")
    return model


# ---------------------------------------------------------------- walking tensors


#: a dense or a sparse tensor of a model
_Tensor = TensorProto | SparseTensorProto


def _tensors(model: onnx.ModelProto) -> Iterator[tuple[_Tensor, str]]:
    """Every tensor and sparse tensor of the model, with where it is."""
    graphs = [(model.graph, f"graph '{model.graph.name}'")]
    for function in model.functions:
        graphs.append((function, f"function '{function.name}'"))
    for k, training in enumerate(model.training_info):
        graphs.append((training.initialization, f"training_info[{k}] initialization"))
        graphs.append((training.algorithm, f"training_info[{k}] algorithm"))
    while graphs:
        graph, where = graphs.pop()
        for tensor in getattr(graph, "initializer", ()):
            yield tensor, f"{where} initializer '{tensor.name}'"
        for sparse in getattr(graph, "sparse_initializer", ()):
            yield sparse, f"{where} sparse initializer '{sparse.values.name}'"
        for node in graph.node:
            for attr in node.attribute:
                here = f"{where} node '{node.name or node.op_type}' attribute '{attr.name}'"
                yield from _attribute_tensors(attr, here)
                if attr.type == AttributeProto.GRAPH:
                    graphs.append((attr.g, f"{here} (graph '{attr.g.name}')"))
                for body in attr.graphs:
                    graphs.append((body, f"{here} (graph '{body.name}')"))


def _attribute_tensors(attr: AttributeProto, where: str) -> Iterator[tuple[_Tensor, str]]:
    if attr.HasField("t"):
        yield attr.t, where
    if attr.HasField("sparse_tensor"):
        yield attr.sparse_tensor, where
    for tensor in list(attr.tensors) + list(attr.sparse_tensors):
        yield tensor, where


def _data_holders(tensor: _Tensor, location: str) -> Iterator[tuple[TensorProto, str]]:
    """The dense tensors holding ``tensor``'s data: itself, or a sparse tensor's values and
    indices (each may keep its data in another file, and passes the same rules)."""
    if isinstance(tensor, TensorProto):
        yield tensor, location
    else:
        yield tensor.values, f"{location} values"
        yield tensor.indices, f"{location} indices"


# ---------------------------------------------------------------- sizes


def _check_size(tensor: _Tensor, where: str) -> None:
    """Refuse a tensor (or sparse tensor, counted dense) larger than ``max_elements``."""
    limit = current_limits().max_elements
    dims = list(tensor.dims)
    if any(d < 0 for d in dims):
        raise ModelError(f"{where}: negative dimension in {dims}")
    elements = math.prod(dims)
    if elements > limit:
        kind = "sparse tensor (dense)" if not isinstance(tensor, TensorProto) else "tensor"
        raise SizeLimitError(
            f"{where}: the {kind} declares {dims} = {elements} elements, over the limit of "
            f"{limit} (max_elements); nothing was allocated. If the model is meant to be "
            f"this large, {how_to_raise('max_elements')}"
        )
    if not isinstance(tensor, TensorProto):  # sparse: its values and indices too
        _check_size(tensor.values, f"{where} values")
        _check_size(tensor.indices, f"{where} indices")


# ---------------------------------------------------------------- external data


def _external_folder(path: str | None, where: str, location: str) -> str:
    access = _ACCESS.get()
    if access.external_data_dir is not None:
        return access.external_data_dir
    if access.trusted and path is not None:
        return os.path.dirname(os.path.abspath(path))
    raise ModelError(
        f"{where}: {location} keeps its data in another file; external data is read only "
        "from a folder you name (external_data_dir=..., --external-data-dir DIR) or, "
        "for a model you trust, from its own folder (trusted=True, --trusted)"
    )


def _load_external(tensor: TensorProto, folder: str, where: str) -> None:
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = info.get("location", "")
    base = os.path.realpath(folder)
    target = os.path.realpath(os.path.join(base, location))
    if not location or os.path.isabs(location) or os.path.commonpath([base, target]) != base:
        raise ModelError(f"{where}: external data '{location}' is not a file inside '{folder}'")
    offset, length = (
        _integer(info.get("offset"), 0, where) or 0,
        _integer(info.get("length"), None, where),
    )
    expected = _byte_size(tensor, where)
    if length is None:
        length = expected
    if length != expected:
        raise ModelError(
            f"{where}: external data length {length} does not match the "
            f"{expected} bytes its type and dims declare"
        )
    try:
        data = read_file(target, start=offset, length=length)  # regular files only
    except ModelError as exc:
        raise ModelError(f"{where}: external data: {exc}") from None
    if len(data) != length:
        raise ModelError(f"{where}: external data '{location}' ends before {offset + length} bytes")
    tensor.raw_data = data
    del tensor.external_data[:]
    tensor.data_location = TensorProto.DEFAULT


def _byte_size(tensor: TensorProto, where: str) -> int:
    if tensor.data_type == TensorProto.STRING:
        raise ModelError(f"{where}: string tensors cannot keep their data in another file")
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, TypeError, ValueError):
        raise ModelError(f"{where}: unknown element type {tensor.data_type}") from None
    return math.prod(tensor.dims) * itemsize


def _integer(text: str | None, default: int | None, where: str) -> int | None:
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ModelError(f"{where}: external data offset/length {text!r} is not a number") from None
    if value < 0:
        raise ModelError(f"{where}: external data offset/length {value} is negative")
    return value
