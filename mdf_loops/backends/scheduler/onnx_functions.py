"""Evaluate an ``onnx::<Op>`` function call of an MDF node with ONNX semantics.

The node's function parameter binds the operator's formal inputs in its ``args``
(a variadic input as a list expression ``"[a, b]"``); the operator's attributes are
node parameters of the same name. Ordinary operators run on the kernels of
``onnx.reference`` (numpy, every opset, exact element types), cached per
operator, opset and attribute values; Scan, Loop and If run in
:mod:`mdf_loops.backends.scheduler.loop_nodes`. Operators of the ``ai.onnx.ml``
domain (MDF functions ``onnxml::<Op>``, :mod:`mdf_loops.onnx.domains`) run on
the kernels of ``onnx.reference.ops.aionnxml`` the same way.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import onnx
from onnx.defs import OpSchema
from onnx.reference import ReferenceEvaluator
from onnx.reference.ops import load_op
from onnx.reference.ops.aionnxml import load_op as load_ml_op

from mdf_loops.backends.scheduler.loop_nodes import run_control_flow
from mdf_loops.backends.scheduler.ml_kernels import MISSING_ML_KERNELS
from mdf_loops.errors import EvaluationError, ModelError
from mdf_loops.model.convention import BODY_ATTRIBUTES
from mdf_loops.model.values import decode_tensor, is_encoded_tensor, to_engine, to_kernel
from mdf_loops.onnx.attributes import attribute_value, string_attribute
from mdf_loops.onnx.domains import DEFAULT, DOMAINS
from mdf_loops.ops.common import check_elements, current_limits, element_count
from mdf_loops.safety.operator_sizes import check_planned_size

__all__ = ["call_onnx_function", "current_opset", "opset", "LATEST_OPSET"]

LATEST_OPSET = onnx.defs.onnx_opset_version()

_OPSET: contextvars.ContextVar[int] = contextvars.ContextVar(
    "mdf_loops_opset", default=LATEST_OPSET
)
#: opsets of the other domains (``{"ai.onnx.ml": 3}``); a domain not listed: its newest
_OTHER_OPSETS: contextvars.ContextVar[Mapping[str, int]] = contextvars.ContextVar(
    "mdf_loops_other_opsets", default=MappingProxyType({})
)
_DOMAIN_BY_NAME = {d.name: d for d in DOMAINS}


def current_opset() -> int:
    """The default-domain ONNX opset used to interpret ``onnx::`` functions now."""
    return _OPSET.get()


@contextmanager
def opset(version: int | None, others: Mapping[str, int] | None = None) -> Iterator[None]:
    """Interpret ``onnx::`` functions under opset ``version`` inside the block, and the
    functions of other domains under ``others`` (by domain, e.g. ``{"ai.onnx.ml": 3}``)."""
    token = _OPSET.set(LATEST_OPSET if version is None else int(version))
    others_token = _OTHER_OPSETS.set(dict(others or {}))
    try:
        yield
    finally:
        _OTHER_OPSETS.reset(others_token)
        _OPSET.reset(token)


def _version(domain: str) -> int:
    if domain == "":
        return _OPSET.get()
    version = _OTHER_OPSETS.get().get(domain)
    return version if version is not None else _DOMAIN_BY_NAME[domain].latest_version()


@functools.cache
def schema_for(op_type: str, version: int, domain: str = "") -> OpSchema:
    try:
        return onnx.defs.get_schema(op_type, version, domain)
    except onnx.defs.SchemaError as exc:
        if domain == "":
            raise ModelError(f"onnx::{op_type} does not exist in ONNX opset {version}") from exc
        raise ModelError(
            f"{_DOMAIN_BY_NAME[domain].function(op_type)} does not exist in opset "
            f"{version} of domain '{domain}'"
        ) from exc


@dataclass(frozen=True)
class _Operator:
    """What a call needs from an operator's schema, read once (schema fields are slow to read)."""

    inputs: tuple[tuple[str, bool], ...]  # (name, variadic) of each formal input
    attribute_types: Mapping[str, OpSchema.AttrType]
    single_output: bool
    output_count: int | None  # None when the last output is variadic


@functools.cache
def _operator(op_type: str, version: int, domain: str = "") -> _Operator:
    schema = schema_for(op_type, version, domain)
    variadic = OpSchema.FormalParameterOption.Variadic
    outputs = schema.outputs
    return _Operator(
        inputs=tuple((formal.name, formal.option == variadic) for formal in schema.inputs),
        attribute_types={name: attr.type for name, attr in schema.attributes.items()},
        single_output=schema.max_output == 1,
        output_count=None if outputs and outputs[-1].option == variadic else len(outputs),
    )


def call_onnx_function(
    op_type: str,
    base_parameters: Mapping[str, Any],
    evaluated: Mapping[str, Any],
    owner: Any = None,
    domain: str = "",
) -> Any:
    """Evaluate ``onnx::op_type`` (or ``op_type`` of another ``domain``) for one node.

    ``base_parameters`` has the node's ports, parameters and the function's raw
    args; ``evaluated`` the same names evaluated. Returns one value, or a tuple
    when the operator can have several outputs (ports read ``f[i]``).
    """
    version = _version(domain)
    operator = _operator(op_type, version, domain)
    inputs = _bind_inputs(operator, base_parameters, evaluated)
    attributes = {
        name: evaluated[name] for name in operator.attribute_types if name in base_parameters
    }
    if domain != "":
        results = _run_kernel(op_type, version, operator, inputs, attributes, evaluated, domain)
    elif op_type in BODY_ATTRIBUTES:
        results = run_control_flow(op_type, version, inputs, attributes, evaluated, owner)
    elif op_type in _OWN_IMPLEMENTATIONS:
        results = _OWN_IMPLEMENTATIONS[op_type](inputs, attributes)
    else:
        results = _run_kernel(op_type, version, operator, inputs, attributes, evaluated)
    results = [to_engine(r) for r in results]
    if operator.single_output:
        if len(results) != 1:
            raise EvaluationError(f"onnx::{op_type} returned {len(results)} values, expected 1")
        return results[0]
    return tuple(results)


def _bind_inputs(
    operator: _Operator, base: Mapping[str, Any], evaluated: Mapping[str, Any]
) -> list:
    values: list = []
    bound = 0  # values up to here were given by the node; trailing absent inputs are dropped
    for name, variadic in operator.inputs:
        if name not in base:
            values.append(None)
            continue
        value = evaluated[name]
        if variadic and type(value) is list:
            # an empty optional stays, as None; a quoted name the node knows is its value
            # (modeci-mdf's pytorch_to_mdf writes "['_59', '_61']", and its engine reads so)
            values.extend(to_kernel(_named(v, evaluated)) for v in value)
        else:
            values.append(to_kernel(value))
        bound = len(values)
    return values[:bound]


def _named(item: Any, evaluated: Mapping[str, Any]) -> Any:
    return evaluated[item] if type(item) is str and item in evaluated else item


def _optional(inputs: list, attributes: Mapping[str, Any]) -> list:
    # onnx.reference wraps the element in a list, which its OptionalGetElement does not undo
    return [inputs[0] if inputs else None]


def _constant(inputs: list, attributes: Mapping[str, Any]) -> list:
    return [_constant_value(attributes)]


def _constant_value(attributes: Mapping[str, Any]) -> Any:
    given = {k: v for k, v in attributes.items() if v is not None}
    if len(given) != 1:
        raise ModelError(f"onnx::Constant needs exactly one value attribute, got {sorted(given)}")
    ((name, value),) = given.items()
    if name in ("value", "sparse_value"):
        return decode_tensor(value) if is_encoded_tensor(value) else np.asarray(value)
    if name == "value_float":
        return np.array(value, dtype=np.float32)
    if name == "value_floats":
        return np.asarray(value, dtype=np.float32).reshape(-1)
    if name == "value_int":
        return np.array(value, dtype=np.int64)
    if name == "value_ints":
        return np.asarray(value, dtype=np.int64).reshape(-1)
    if name == "value_string":
        return np.array(string_attribute(value), dtype=object)
    return np.array([str(v) for v in np.asarray(value).reshape(-1)], dtype=object)


#: operators evaluated here rather than by an onnx.reference kernel
_OWN_IMPLEMENTATIONS = {"Constant": _constant, "Optional": _optional}


# ---------------------------------------------------------------- kernels


def _run_kernel(op_type, version, operator, inputs, attributes, scope, domain="") -> list:
    attrs = {}
    for name, value in attributes.items():
        if value is None:
            continue
        attrs[name] = attribute_value(operator.attribute_types[name], value, op_type, name)
    n_outputs = operator.output_count
    if n_outputs is None:
        n_outputs = _variadic_output_count(op_type, inputs, attrs, scope)
    present = tuple(v is not None for v in inputs)
    kernel = _kernel(op_type, version, _freeze(attrs), present, n_outputs, domain)
    check_planned_size(op_type, inputs, attrs, domain)  # mdf_loops.safety.operator_sizes
    try:
        results = kernel.run(*inputs)
    except EvaluationError:
        raise
    except Exception as exc:  # kernels raise numpy/onnx errors of every kind
        shapes = ", ".join(_describe(v) for v in inputs)
        raise EvaluationError(
            f"{_DOMAIN_BY_NAME[domain].function(op_type)} failed on inputs ({shapes}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    results = list(results)[:n_outputs]
    limit = current_limits().max_elements
    for k, result in enumerate(results):
        count = element_count(result)
        if count > limit:
            check_elements(count, f"output {k} of onnx::{op_type}")
    return results


def _describe(value: Any) -> str:
    if value is None:
        return "absent"
    if isinstance(value, np.ndarray):
        return f"{value.dtype}{list(value.shape)}"
    if isinstance(value, list):
        return f"sequence[{len(value)}]"
    return type(value).__name__


def _variadic_output_count(op_type, inputs, attrs, scope) -> int:
    if "num_outputs" in attrs:
        return int(attrs["num_outputs"])
    if op_type == "Split":
        split = inputs[1] if len(inputs) > 1 and inputs[1] is not None else attrs.get("split")
        if split is not None:
            return len(np.asarray(split).reshape(-1))
        if "num_outputs" in scope:  # recorded by the importer for opsets without the attribute
            return int(np.asarray(scope["num_outputs"]).reshape(()))
    raise ModelError(
        f"onnx::{op_type} has a variadic output; give its count as parameter 'num_outputs'"
    )


def _load_default(op_type: str, version: int, node: onnx.NodeProto) -> type:
    return load_op("", op_type, version, node=node, evaluator_cls=ReferenceEvaluator)


def _load_ml(op_type: str, version: int, node: onnx.NodeProto) -> type:
    if op_type in MISSING_ML_KERNELS:  # ZipMap: none in onnx.reference (ml_kernels.py)
        return MISSING_ML_KERNELS[op_type]
    return load_ml_op("ai.onnx.ml", op_type, version)


#: domain -> the loader of its onnx.reference kernels
_KERNEL_LOADERS = {DEFAULT.name: _load_default, "ai.onnx.ml": _load_ml}


@functools.lru_cache(maxsize=4096)
def _kernel(
    op_type: str,
    version: int,
    frozen_attrs: tuple,
    present: tuple,
    n_outputs: int,
    domain: str = "",
):
    attrs = {name: _thaw(value) for name, value in frozen_attrs}
    node = onnx.helper.make_node(
        op_type,
        [f"in{i}" if p else "" for i, p in enumerate(present)],
        [f"out{i}" for i in range(n_outputs)],
        domain=domain or None,
        **attrs,
    )
    try:
        cls = _KERNEL_LOADERS[domain](op_type, version, node)
    except Exception as exc:
        function = _DOMAIN_BY_NAME[domain].function(op_type)
        raise ModelError(f"{function} (opset {version}) has no implementation: {exc}") from exc
    run_params = {
        "opsets": {domain: version},
        "new_ops": None,
        "log": lambda *args: None,
        "verbose": 0,
        "evaluator_cls": ReferenceEvaluator,
    }
    return cls(node, run_params)


def _freeze(attrs: Mapping[str, Any]) -> tuple:
    frozen = []
    for name in sorted(attrs):
        value = attrs[name]
        if isinstance(value, onnx.TensorProto):
            frozen.append((name, ("tensor", value.SerializeToString())))
        elif isinstance(value, onnx.TypeProto):
            frozen.append((name, ("type", value.SerializeToString())))
        elif isinstance(value, list):
            frozen.append((name, ("list", tuple(value))))
        else:
            frozen.append((name, value))
    return tuple(frozen)


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple) and len(value) == 2 and value[0] in ("tensor", "type", "list"):
        kind, payload = value
        if kind == "tensor":
            t = onnx.TensorProto()
            t.ParseFromString(payload)
            return t
        if kind == "type":
            t = onnx.TypeProto()
            t.ParseFromString(payload)
            return t
        return list(payload)
    return value
