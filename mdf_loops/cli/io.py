"""Values on the ``mdf-loops`` command line.

Reading ``--input`` options, showing and saving outputs.

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
import sys
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from modeci_mdf.mdf import Graph

from mdf_loops.errors import MdfLoopsError
from mdf_loops.model.inputs import DeclaredInput, InputError, fit_input, graph_input_types
from mdf_loops.model.interface import graph_interface

__all__ = [
    "InputError",
    "read_inputs",
    "read_example_values",
    "format_outputs",
    "encode_outputs",
    "outputs_to_npz",
    "OUTPUT_FORMATS",
]


def read_inputs(options: Iterable[str], graph: Graph) -> dict[str, Any]:
    """The values of ``--input`` options for ``graph``, by input name, checked and typed."""
    interface = graph_interface(graph)
    values = _read_options(options)
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


def _read_options(options: Iterable[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for option in options:
        for name, value in _read_option(option):
            if name in values:
                raise InputError(f"input '{name}' is given twice")
            values[name] = value
    return values


def read_example_values(options: Iterable[str], names: list[str]) -> list[Any]:
    """The values of ``--input`` options for each of the parameters ``names``, in their
    order: arrays as stored, JSON values as Python data (no declared types to fit them to)."""
    values = _read_options(options)
    unknown = sorted(set(values) - set(names))
    if unknown:
        near = "".join(_near_miss(name, names) for name in unknown)
        raise InputError(
            f"unknown input{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"forward takes {', '.join(map(repr, names)) or 'no arguments'}{near}"
        )
    missing = [n for n in names if n not in values]
    if missing:
        raise InputError(
            f"give an example of each argument of forward with -i NAME=VALUE; missing "
            f"{', '.join(map(repr, missing))}"
        )
    return [v.value if isinstance(v, _JsonValue) else v for v in (values[n] for n in names)]


def _near_miss(name: str, known) -> str:
    from mdf_loops.errors import closest_names

    close = closest_names(name, known)
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
                f"input '{name}': {text} holds no array '{name}' "
                f"(it holds {', '.join(sorted(archive))})"
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


def format_outputs(outputs: Mapping[str, Any], full: bool = False) -> str:
    """Each output's name, element type, shape and values: abridged (long arrays shortened,
    six decimals) unless ``full``, which prints every value to full precision."""
    blocks = [_format_value(name, value, full) for name, value in outputs.items()]
    return "\n".join(blocks) + ("\n" if blocks else "")


def _format_value(name: str, value: Any, full: bool, indent: str = "") -> str:
    if value is None:
        return f"{indent}{name}: empty optional"
    if isinstance(value, list):
        lines = [f"{indent}{name}: sequence of {len(value)}"]
        lines += [
            _format_value(f"[{k}]", item, full, indent + "  ") for k, item in enumerate(value)
        ]
        return "\n".join(lines)
    array = np.asarray(value)
    if full:
        text = np.array2string(array, threshold=sys.maxsize, floatmode="unique", max_line_width=88)
    else:
        text = np.array2string(array, threshold=24, edgeitems=3, precision=6, max_line_width=88)
    body = "\n".join(f"{indent}  {line}" for line in text.splitlines())
    return f"{indent}{name}: {array.dtype}, shape {tuple(array.shape)}\n{body}"


#: the files ``run -o`` writes, by extension
OUTPUT_FORMATS = (".npz", ".npy", ".json", ".csv")


def encode_outputs(outputs: Mapping[str, Any], path: str) -> tuple[bytes, list[str]]:
    """The bytes of the file ``path`` (its format by extension), and the outputs left out."""
    arrays, left_out = _flat_arrays(outputs)
    if path.lower().endswith(".npy"):
        return _npy(arrays, left_out), left_out
    if path.lower().endswith(".json"):
        return _json(outputs), []
    if path.lower().endswith(".csv"):
        return _csv(arrays), left_out
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]  # numpy stub: **arrays could fill allow_pickle
    return buffer.getvalue(), left_out


def outputs_to_npz(outputs: Mapping[str, Any]) -> tuple[bytes, list[str]]:
    """The bytes of an ``.npz`` archive of ``outputs``, and the names left out.

    A sequence is stored element by element as ``name[0]``, ``name[1]``, ...;
    an empty optional cannot be stored and is left out.
    """
    return encode_outputs(outputs, "outputs.npz")


def _flat_arrays(outputs: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], list[str]]:
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
    return arrays, left_out


def _npy(arrays: dict[str, np.ndarray], left_out: list[str]) -> bytes:
    if len(arrays) != 1 or left_out:
        names = ", ".join(map(repr, [*arrays, *left_out]))
        raise MdfLoopsError(
            f"an .npy file holds one array; the model has {len(arrays) + len(left_out)} "
            f"outputs ({names}): write -o OUT.npz, OUT.json or OUT.csv"
        )
    buffer = io.BytesIO()
    np.save(buffer, next(iter(arrays.values())), allow_pickle=False)
    return buffer.getvalue()


def _json_value(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, list):
        return [_json_value(item) for item in value]
    array = np.asarray(value)
    data = array.tolist()
    if array.dtype.kind == "f" or array.dtype.kind == "c":
        data = _finite(data)
    return {"dtype": str(array.dtype), "shape": list(array.shape), "values": data}


def _finite(data: Any) -> Any:
    """JSON has no NaN or infinity: those become the strings "nan", "inf", "-inf"."""
    if isinstance(data, list):
        return [_finite(item) for item in data]
    if isinstance(data, float) and not np.isfinite(data):
        return str(data)
    if isinstance(data, complex):
        return [_finite(data.real), _finite(data.imag)]
    return data


def _json(outputs: Mapping[str, Any]) -> bytes:
    """``{name: {"dtype", "shape", "values"}}``.

    A sequence is a list of those, an empty optional is null.
    """
    lines = [
        f" {json.dumps(name)}: {json.dumps(_json_value(value))}" for name, value in outputs.items()
    ]
    return ("{\n" + ",\n".join(lines) + "\n}\n").encode()


def _csv(arrays: dict[str, np.ndarray]) -> bytes:
    """One row per element: ``output,i0,i1,...,value`` (index columns up to the highest rank)."""
    import csv

    rank = max((a.ndim for a in arrays.values()), default=0)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["output", *(f"i{k}" for k in range(rank)), "value"])
    for name, array in arrays.items():
        for index, value in np.ndenumerate(array):
            writer.writerow([name, *index, *([""] * (rank - len(index))), _csv_number(value)])
    return text.getvalue().encode()


def _csv_number(value: Any) -> str:
    if isinstance(value, (np.floating, float)):
        return repr(float(value)) if np.dtype(type(value)).itemsize >= 8 else str(value)
    return str(value.item() if hasattr(value, "item") else value)
