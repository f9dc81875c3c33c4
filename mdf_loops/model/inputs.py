"""The values a graph's inputs take: declared types, default values, and the rules for the rest.

One set of rules for :func:`mdf_loops.run` and the ``mdf-loops`` command line:

* A **declared** input (``metadata={"onnx_type": ...}`` as written by
  :func:`mdf_loops.model.port_type` and by the ONNX importer, or the port's ``type``
  and ``shape``) takes the declared element type: numbers are cast to it when
  that keeps their kind or widens it (bool -> int -> float), and refused
  otherwise (a float for an int input). The rank and every fixed dimension must
  match.
* An **undeclared** input bound to an ``onnx::Loop``'s trip count ``M`` is int64
  (a whole float such as ``4.0`` is cast; ``2.5`` is refused), one bound to its
  condition ``cond`` is bool (what ONNX requires of them).
* Any other undeclared input keeps the value's own type: a numpy array as it is,
  Python numbers as numpy reads them (``3`` int64, ``3.0`` float64). Numbers
  written as JSON on the command line are float64 (see ``mdf_loops/cli/io.py``).
* An input not given takes its ports' ``default_value`` (a constant), typed by the
  same rules; a port without one reads zeros of its ``shape``, as modeci-mdf's engine
  reads it (:func:`engine_zeros`: float zeros where the port's ``reduce`` adds or
  multiplies, since nothing arrived to add to or multiply), with a WARNING naming the
  inputs, once per model object (again after an edit). An input must be given when
  those zeros do not fit what the model declares (a port typed with a free dimension).
* Strings, ragged lists and other objects are refused with the input's name.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from modeci_mdf.mdf import Graph, InputPort

from mdf_loops.errors import InputError, ModelError, closest_names
from mdf_loops.model.compat import input_default
from mdf_loops.model.content import content_version

_log = logging.getLogger(__name__)

__all__ = [
    "InputError",
    "DeclaredInput",
    "declared_input",
    "graph_input_types",
    "fit_input",
    "default_input",
    "engine_zeros",
    "input_ports",
    "check_inputs",
]


@dataclass(frozen=True)
class DeclaredInput:
    """What a model says about one input: kind, element type, dimensions."""

    kind: str = "unknown"  # "tensor", "sequence" or "unknown"
    dtype: np.dtype | None = None
    dims: tuple | None = None  # int for a fixed size, None for a free one
    optional: bool = False
    rule: str = "declared"  # where the type comes from, for messages


def input_ports(graph: Graph) -> dict[str, list[InputPort]]:
    """Every input port of ``graph``'s nodes, by port id."""
    ports: dict[str, list[InputPort]] = {}
    for node in graph.nodes:
        for port in node.input_ports:
            ports.setdefault(port.id, []).append(port)
    return ports


def declared_input(ports: Iterable[InputPort]) -> DeclaredInput:
    """The declaration of the first of ``ports`` that declares anything."""
    for port in ports:
        found = _declared(port)
        if found.kind != "unknown":
            return found
    return DeclaredInput()


def graph_input_types(
    graph: Graph, interface_inputs: Mapping[str, str]
) -> dict[str, DeclaredInput]:
    """Each input's declaration, by input name; undeclared loop controls get their ONNX type."""
    ports = input_ports(graph)
    controls = _loop_controls(graph)
    types = {}
    for name, port_id in interface_inputs.items():
        declared = declared_input(ports.get(port_id, []))
        if declared.kind == "unknown" and port_id in controls:
            declared = DeclaredInput(
                "tensor", np.dtype(controls[port_id][0]), (), rule=controls[port_id][1]
            )
        types[name] = declared
    return types


def _loop_controls(graph: Graph) -> dict[str, tuple[str, str]]:
    """Port ids passed straight as an ``onnx::Loop``'s ``M`` or ``cond``."""
    found = {}
    for node in graph.nodes:
        for parameter in node.parameters:
            if parameter.function == "onnx::Loop" and isinstance(parameter.args, Mapping):
                for arg, dtype in (("M", "int64"), ("cond", "bool")):
                    port = parameter.args.get(arg)
                    if isinstance(port, str):
                        found[port.strip()] = (
                            dtype,
                            f"the trip count of loop node '{node.id}'"
                            if arg == "M"
                            else f"the condition of loop node '{node.id}'",
                        )
    return found


def _declared(port: InputPort) -> DeclaredInput:
    metadata = port.metadata if isinstance(port.metadata, Mapping) else {}
    onnx_type = metadata.get("onnx_type")
    if isinstance(onnx_type, Mapping):
        try:
            return _from_onnx_type(onnx_type)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ModelError(
                f"input port '{port.id}': metadata 'onnx_type' is not an ONNX type "
                f"({type(exc).__name__}: {exc}); write it with mdf_loops.model.port_type(...)"
            ) from None
    dtype = _dtype_or_none(port.type)
    dims = tuple(d if isinstance(d, int) else None for d in port.shape) if port.shape else None
    return DeclaredInput("tensor" if dtype is not None or dims else "unknown", dtype, dims)


def _from_onnx_type(onnx_type: Mapping) -> DeclaredInput:
    if "optionalType" in onnx_type:
        inner = _from_onnx_type(onnx_type["optionalType"].get("elemType") or {})
        return DeclaredInput(inner.kind, inner.dtype, inner.dims, optional=True)
    if "sequenceType" in onnx_type:
        element = _from_onnx_type(onnx_type["sequenceType"].get("elemType") or {})
        return DeclaredInput("sequence", element.dtype)
    tensor = onnx_type.get("tensorType")
    if not isinstance(tensor, Mapping):
        return DeclaredInput()
    dtype = None
    if tensor.get("elemType"):
        from onnx import helper

        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(int(tensor["elemType"])))
    dims = None
    if "shape" in tensor:
        dims = tuple(
            int(d["dimValue"]) if "dimValue" in d else None
            for d in tensor["shape"].get("dim") or []
        )
    return DeclaredInput("tensor", dtype, dims)


def _dtype_or_none(name: Any) -> np.dtype | None:
    if not isinstance(name, str) or not name:
        return None
    try:
        return np.dtype(name)
    except TypeError:
        return None


# ---------------------------------------------------------------- fitting values


def fit_input(name: str, value: Any, declared: DeclaredInput) -> Any:
    """``value`` as the input ``name`` takes it (see the module's rules), or :class:`InputError`."""
    from mdf_loops.model.values import OnnxSequence

    if value is None:
        if declared.kind != "unknown" and not declared.optional:
            raise InputError(
                f"input '{name}': None (an empty optional) for an input the model "
                "does not declare optional"
            )
        return None
    if isinstance(value, OnnxSequence):
        return value
    if declared.kind == "sequence":
        if not isinstance(value, (list, tuple)):
            raise InputError(
                f"input '{name}': the model declares a sequence; give a list of "
                f"arrays, not {type(value).__name__}"
            )
        return [_checked(name, _array(name, item), declared.dtype, None) for item in value]
    return _checked(name, _array(name, value), declared.dtype, declared.dims, declared.rule)


def _array(name: str, value: Any) -> np.ndarray:
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:  # ragged nesting
        raise InputError(f"input '{name}': not a rectangular array of numbers ({exc})") from None
    if array.dtype.kind in "OUSMm":  # objects, text, dates (other kinds include bfloat16)
        shown = f"{value!r:.40}"
        raise InputError(
            f"input '{name}': expected numbers or booleans (an array), got "
            f"{type(value).__name__} {shown}"
        )
    return array


def _checked(
    name: str, array: np.ndarray, dtype: np.dtype | None, dims: tuple | None, rule: str = "declared"
) -> np.ndarray:
    if dims is not None:
        fits = array.ndim == len(dims) and all(
            d is None or d == s for d, s in zip(dims, array.shape, strict=True)
        )
        if not fits:
            shown = "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
            raise InputError(
                f"input '{name}': expected shape {shown} (as the model declares), "
                f"got {list(array.shape)}"
            )
    if dtype is not None and array.dtype != dtype:
        if (
            rule != "declared"
            and array.dtype.kind == "f"
            and dtype.kind in "iu"
            and np.all(np.isfinite(array))
            and np.all(array == np.round(array))
        ):
            return array.astype(dtype)  # a whole number for a trip count (JSON reads 3 as 3.0)
        if not np.can_cast(array.dtype, dtype, casting="same_kind"):
            why = "the model declares" if rule == "declared" else f"it is {rule}, which is"
            raise InputError(
                f"input '{name}': {array.dtype} values for an input {why} {dtype}; "
                f"give {dtype} values"
            )
        array = array.astype(dtype)
    return array


def default_input(ports: Iterable[InputPort]) -> tuple[bool, Any]:
    """``(True, value)`` when one of ``ports`` has a constant ``default_value``."""
    for port in ports:
        value = input_default(port)
        if value is None or isinstance(value, str):
            continue  # a string default is an expression: the engine evaluates it
        return True, value
    return False, None


def _engine_default(ports: list[InputPort]) -> np.ndarray | None:
    """The zeros modeci-mdf's engine reads at ``ports`` when none has a ``default_value``
    (:func:`engine_zeros` of the first), else None."""
    if not ports or any(input_default(port) is not None for port in ports):
        return None
    return engine_zeros(ports[0])


def engine_zeros(port: InputPort, read_before: bool = False) -> np.ndarray:
    """What modeci-mdf's ``EvaluableInput`` gives at an input port with no
    ``default_value`` when nothing is sent to it (a port without a shape: a scalar).

    A port that overwrites (the default ``reduce``) holds ``numpy.full(shape, 0)`` from
    the start, ``0.0`` for a ``type`` naming a float. A port that adds or multiplies
    holds nothing until a value arrives, and reads ``numpy.full(shape, 0.0)`` when none
    did: float zeros whatever its ``type``, for ``multiply`` too (not ones). Once read
    (``read_before``: on a later evaluation) every port forgets its value and reads
    those float zeros.
    """
    shape = tuple(port.shape or ())
    if read_before or (getattr(port, "reduce", None) or "overwrite") != "overwrite":
        return np.full(shape, 0.0)
    zero = 0.0 if port.type and "float" in port.type else 0
    return np.full(shape, zero)


# ---------------------------------------------------------------- the one check


def check_inputs(
    graph: Graph,
    interface_inputs: Mapping[str, str],
    inputs: Any,
    types: Mapping[str, DeclaredInput] | None = None,
    ports: Mapping[str, list[InputPort]] | None = None,
    model: Any = None,
) -> dict[str, Any]:
    """The inputs of ``graph`` as a run takes them: each given value fitted to its declared
    type (:func:`fit_input`), each input not given its ports' default, the same way for
    every public entry point (``run``, ``grad``, ``run_batch``, ``sweep``).

    ``interface_inputs`` maps input names to port ids; ``types`` and ``ports`` (from
    :func:`graph_input_types` and :func:`input_ports`) may be passed when already known.
    The WARNING of inputs read as zeros comes once per ``model`` (the graph's model;
    without it, per graph object), and again after it was edited.
    Raises :class:`InputError` naming the input: not a mapping, unknown names, a
    missing input, a value of the wrong shape or type.
    """
    if inputs is not None and not isinstance(inputs, Mapping):
        raise InputError(
            f"graph '{graph.id}': inputs must map input names to values "
            f"(a dict), not {type(inputs).__name__}; it takes {sorted(interface_inputs)}"
        )
    given = inputs or {}
    types = graph_input_types(graph, interface_inputs) if types is None else types
    ports = input_ports(graph) if ports is None else ports
    unknown = sorted(set(given) - set(interface_inputs))
    if unknown:
        hints = "".join(_nearest(name, interface_inputs) for name in unknown)
        raise InputError(
            f"graph '{graph.id}': unknown inputs {unknown}; it takes "
            f"{sorted(interface_inputs)}{hints}"
        )
    typed, missing, zeros = {}, [], []
    for name, port_id in interface_inputs.items():
        if name in given:
            typed[name] = fit_input(name, given[name], types[name])
            continue
        kind, value = _not_given(name, ports.get(port_id, []), types[name])
        if kind == "missing":
            missing.append(name)
        elif kind != "engine":  # a string default: the engine evaluates it
            typed[name] = value
            if kind == "zeros":
                zeros.append(name)
    if missing:
        raise InputError(
            f"graph '{graph.id}': missing inputs {sorted(missing)}; give a value "
            "for each, or a default_value on its input port"
        )
    if zeros:
        _warn_zeros(graph if model is None else model, graph.id, sorted(zeros))
    return typed


#: the models (or graphs) warned of inputs that read zeros: the content version then,
#: and the graph and inputs named (weakly keyed: an entry goes with its model)
_WARNED: weakref.WeakKeyDictionary[Any, tuple[int, str, tuple[str, ...]]] = (
    weakref.WeakKeyDictionary()
)
_WARNED_LOCK = threading.Lock()


def _warn_zeros(owner: Any, graph_id: str, names: list[str]) -> None:
    """The WARNING that ``names`` read zeros, once per model object (a sweep or a training
    loop runs one model thousands of times), and again after the model was edited.

    ``mdf_loops.run`` compares the model with its snapshot once per call already, so the
    version costs a lookup there; a graph (``owner`` without a model) gets a snapshot of
    its own."""
    seen = (content_version(owner), graph_id, tuple(names))
    with _WARNED_LOCK:
        try:
            if _WARNED.get(owner) == seen:
                return
            _WARNED[owner] = seen
        except TypeError:  # not weakly referable: warned each time
            pass
    _log.warning(
        "graph '%s': inputs %s not given and without a default_value read zeros of "
        "their ports' shape, as modeci-mdf's engine does; give them to set them",
        graph_id,
        names,
    )


def _not_given(name: str, ports: list[InputPort], declared: DeclaredInput) -> tuple[str, Any]:
    """What an input not given holds: ``("default", value)``, ``("zeros", value)`` (the
    engine's zeros, when they fit the declaration), ``("engine", None)`` for a default
    the engine evaluates, or ``("missing", None)``."""
    has_default, value = default_input(ports)
    if has_default:
        return "default", fit_input(name, value, declared)
    zero = _engine_default(ports)
    if zero is not None:
        try:
            return "zeros", fit_input(name, zero, declared)
        except InputError:  # the zeros are not what the model declares
            pass
    if ports and not any(input_default(p) is not None for p in ports):
        return "missing", None
    return "engine", None


def _nearest(name: str, known: Iterable[str]) -> str:
    close = closest_names(name, known)
    return f" ('{name}': did you mean '{close[0]}'?)" if close else ""
