"""Values on the ``mdf-loops`` command line: reading ``--input`` options, showing and saving outputs.

An ``--input`` option is one of

* ``NAME=FILE.npy``: the array in a NumPy file;
* ``NAME=FILE.npz``: the array stored under ``NAME`` in a NumPy archive;
* ``FILE.npz``: every array of the archive, each under its own name;
* ``NAME=JSON``: a JSON value such as ``3``, ``[1, 2, 3]`` or ``null`` (an empty
  optional). JSON has no element types: numbers take the input's declared type
  (an imported ONNX model declares one), else float64; ``true``/``false`` are bool.

Where the model declares an input's type (imported ONNX models do), a value is
checked against it: rank and fixed dimensions must match, and numbers are cast
to the declared element type when that loses no kind (int -> float yes, float
-> int no).
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import onnx
from modeci_mdf.mdf import Graph

from mdf_loops.errors import MdfLoopsError
from mdf_loops.run import graph_interface

__all__ = ["InputError", "read_inputs", "format_outputs", "outputs_to_npz"]

class InputError(MdfLoopsError):
    """An ``--input`` option cannot be read or does not fit the model's input."""


@dataclass(frozen=True)
class _Declared:
    """What a model declares about one input: kind, element type, dimensions."""

    kind: str  # "tensor", "sequence" or "unknown"
    dtype: np.dtype | None = None
    dims: tuple | None = None  # int for a fixed size, None for a free one
    optional: bool = False


def read_inputs(options: Iterable[str], graph: Graph) -> dict[str, Any]:
    """The values of ``--input`` options for ``graph``, by input name, checked and typed."""
    interface = graph_interface(graph)
    values: dict[str, Any] = {}
    for option in options:
        for name, value in _read_option(option):
            if name in values:
                raise InputError(f"input '{name}' is given twice")
            values[name] = value
    unknown = sorted(set(values) - set(interface.inputs))
    if unknown:
        raise InputError(
            f"unknown input{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"the model takes {', '.join(map(repr, sorted(interface.inputs))) or 'no inputs'}"
        )
    ports = {}
    for node in graph.nodes:
        for port in node.input_ports:
            ports.setdefault(port.id, port)
    return {
        name: _fit(name, value, _declared(ports.get(interface.inputs[name])))
        for name, value in values.items()
    }


def _read_option(option: str) -> list[tuple[str, Any]]:
    name, sep, text = option.partition("=")
    if not sep:
        if option.endswith(".npz"):
            return list(_load_archive(option).items())
        raise InputError(
            f"--input {option!r}: write NAME=FILE.npy, NAME=FILE.npz, NAME=JSON or FILE.npz"
        )
    name = name.strip()
    if not name:
        raise InputError(f"--input {option!r}: the input name before '=' is missing")
    if text.endswith(".npy"):
        return [(name, _load_npy(text))]
    if text.endswith(".npz"):
        archive = _load_archive(text)
        if name not in archive:
            raise InputError(
                f"input '{name}': {text} holds no array '{name}' (it holds {', '.join(sorted(archive))})"
            )
        return [(name, archive[name])]
    try:
        return [(name, _JsonValue(json.loads(text)))]
    except json.JSONDecodeError:
        raise InputError(
            f"input '{name}': {text!r} is neither a .npy/.npz file nor a JSON value"
        ) from None


@dataclass(frozen=True)
class _JsonValue:
    """A value written as JSON on the command line: typed once the declared type is known."""

    value: Any


def _load_npy(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (ValueError, OSError) as exc:
        raise InputError(f"{path}: not a readable .npy file ({exc})") from None


def _load_archive(path: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {key: archive[key] for key in archive.files}
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise InputError(f"{path}: not a readable .npz file ({exc})") from None


# ---------------------------------------------------------------- declared types


def _declared(port: Any) -> _Declared:
    if port is None:
        return _Declared("unknown")
    onnx_type = (port.metadata or {}).get("onnx_type")
    if isinstance(onnx_type, Mapping):
        return _from_onnx_type(onnx_type)
    dtype = np.dtype(port.type) if _is_dtype_name(port.type) else None
    dims = tuple(d if isinstance(d, int) else None for d in port.shape) if port.shape else None
    return _Declared("tensor" if dtype is not None or dims else "unknown", dtype, dims)


def _from_onnx_type(onnx_type: Mapping) -> _Declared:
    if "optionalType" in onnx_type:
        inner = _from_onnx_type(onnx_type["optionalType"].get("elemType") or {})
        return _Declared(inner.kind, inner.dtype, inner.dims, optional=True)
    if "sequenceType" in onnx_type:
        element = _from_onnx_type(onnx_type["sequenceType"].get("elemType") or {})
        return _Declared("sequence", element.dtype)
    tensor = onnx_type.get("tensorType")
    if not isinstance(tensor, Mapping):
        return _Declared("unknown")
    dtype = None
    if tensor.get("elemType"):
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(int(tensor["elemType"])))
    dims = None
    if "shape" in tensor:
        dims = tuple(int(d["dimValue"]) if "dimValue" in d else None
                     for d in tensor["shape"].get("dim") or [])
    return _Declared("tensor", dtype, dims)


def _is_dtype_name(name: Any) -> bool:
    if not isinstance(name, str) or not name:
        return False
    try:
        np.dtype(name)
    except TypeError:
        return False
    return True


# ---------------------------------------------------------------- fitting values


def _fit(name: str, value: Any, declared: _Declared) -> Any:
    if isinstance(value, _JsonValue):
        return _from_json(name, value.value, declared)
    return _checked(name, value, declared.dtype, declared.dims)


def _from_json(name: str, value: Any, declared: _Declared) -> Any:
    if value is None:
        if declared.kind != "unknown" and not declared.optional:
            raise InputError(f"input '{name}': null (an empty optional) for an input that is not optional")
        return None
    if declared.kind == "sequence":
        if not isinstance(value, list):
            raise InputError(f"input '{name}': the model declares a sequence; write a JSON list")
        return [_checked(name, _json_array(name, item, declared.dtype), declared.dtype, None)
                for item in value]
    array = _json_array(name, value, declared.dtype)
    return _checked(name, array, declared.dtype, declared.dims)


def _json_array(name: str, value: Any, dtype: np.dtype | None) -> np.ndarray:
    try:
        array = np.array(value)
    except ValueError as exc:  # ragged nesting
        raise InputError(f"input '{name}': {exc}") from None
    if array.dtype == object or array.dtype.kind == "U":
        raise InputError(f"input '{name}': expected numbers or booleans in a rectangular array")
    if dtype is not None:
        return _cast(name, array, dtype)
    return array if array.dtype.kind == "b" else array.astype(np.float64)


def _checked(name: str, array: np.ndarray, dtype: np.dtype | None, dims: tuple | None) -> np.ndarray:
    array = np.asarray(array)
    if dims is not None:
        fits = array.ndim == len(dims) and all(d is None or d == s for d, s in zip(dims, array.shape))
        if not fits:
            shown = "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
            raise InputError(
                f"input '{name}': expected shape {shown} (as the model declares), "
                f"got {list(array.shape)}"
            )
    if dtype is not None and array.dtype != dtype:
        array = _cast(name, array, dtype)
    return array


def _cast(name: str, array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if not np.can_cast(array.dtype, dtype, casting="same_kind"):
        raise InputError(
            f"input '{name}': {array.dtype} values for an input the model declares {dtype}"
        )
    return array.astype(dtype)


# ---------------------------------------------------------------- outputs


def format_outputs(outputs: Mapping[str, Any]) -> str:
    """Each output's name, element type, shape and values (long arrays abbreviated)."""
    blocks = [_format_value(name, value) for name, value in outputs.items()]
    return "\n".join(blocks) + ("\n" if blocks else "")


def _format_value(name: str, value: Any, indent: str = "") -> str:
    if value is None:
        return f"{indent}{name}: empty optional"
    if isinstance(value, list):
        lines = [f"{indent}{name}: sequence of {len(value)}"]
        lines += [_format_value(f"[{k}]", item, indent + "  ") for k, item in enumerate(value)]
        return "\n".join(lines)
    array = np.asarray(value)
    text = np.array2string(array, threshold=24, edgeitems=3, precision=6, max_line_width=88)
    body = "\n".join(f"{indent}  {line}" for line in text.splitlines())
    return f"{indent}{name}: {array.dtype}, shape {tuple(array.shape)}\n{body}"


def outputs_to_npz(outputs: Mapping[str, Any]) -> tuple[bytes, list[str]]:
    """The bytes of an ``.npz`` archive of ``outputs``, and the names left out.

    A sequence is stored element by element as ``name[0]``, ``name[1]``, ...;
    an empty optional cannot be stored and is left out.
    """
    arrays: dict[str, np.ndarray] = {}
    left_out = []
    for name, value in outputs.items():
        if value is None:
            left_out.append(name)
        elif isinstance(value, list):
            for k, item in enumerate(value):
                if item is None:
                    left_out.append(f"{name}[{k}]")
                else:
                    arrays[f"{name}[{k}]"] = np.asarray(item)
        else:
            arrays[name] = np.asarray(value)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue(), left_out
