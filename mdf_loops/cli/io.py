"""Values on the ``mdf-loops`` command line: reading ``--input`` options, showing and saving outputs.

An ``--input`` option is one of

* ``NAME=FILE.npy``: the array in a NumPy file;
* ``NAME=FILE.npz``: the array stored under ``NAME`` in a NumPy archive;
* ``FILE.npz``: every array of the archive, each under its own name;
* ``NAME=JSON``: a JSON value such as ``3``, ``[1, 2, 3]`` or ``null`` (an empty
  optional). JSON has no element types: numbers take the input's declared type
  (an imported ONNX model declares one; an undeclared Loop trip count is int64),
  else float64; ``true``/``false`` are bool.

Every value is then checked and typed by the rules of :mod:`mdf_loops.model.inputs`,
the same as :func:`mdf_loops.run` applies: rank and fixed dimensions must match, and
numbers are cast to the declared element type when that loses no kind (int -> float
yes, float -> int no).
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
from modeci_mdf.mdf import Graph

from mdf_loops.model.inputs import DeclaredInput, InputError, fit_input, graph_input_types
from mdf_loops.model.interface import graph_interface

__all__ = ["InputError", "read_inputs", "format_outputs", "outputs_to_npz"]



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
        near = "".join(_near_miss(name, interface.inputs) for name in unknown)
        raise InputError(
            f"unknown input{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"the model takes {', '.join(map(repr, sorted(interface.inputs))) or 'no inputs'}"
            f"{near}"
        )
    types = graph_input_types(graph, interface.inputs)
    return {name: _fit(name, value, types[name]) for name, value in values.items()}


def _near_miss(name: str, known) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean '{close[0]}' for '{name}'?)" if close else ""


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


# ---------------------------------------------------------------- fitting values


def _fit(name: str, value: Any, declared: DeclaredInput) -> Any:
    if not isinstance(value, _JsonValue):
        return fit_input(name, value, declared)
    if value.value is None or declared.kind == "sequence":
        return fit_input(name, value.value, declared)
    array = fit_input(name, value.value, declared)
    if declared.dtype is None and array.dtype.kind in "iu":
        return array.astype(np.float64)  # JSON has no element types: numbers are float64
    return array


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
