"""Put the ONNX operators, Scan, Loop and If included, into modeci-mdf's function registry.

modeci-mdf registers ``onnx::<Op>`` for the operators of opset 15 except Loop,
Scan and If. :func:`register` adds, in the same form, every operator of the
installed onnx package that the registry lacks (the three control-flow
operators and the operators newer than opset 15), and the operators of the
other domains of :data:`mdf_loops.onnx.domains.DOMAINS` as ``<prefix>::<Op>``
(``onnxml::Scaler``); entries already there are left as they are. It installs
the engine hooks of :mod:`mdf_loops.backends.scheduler.hooks`: the added
functions are always evaluated by mdf-loops, the stock ones only under ONNX
semantics (loop bodies, marked models, :func:`mdf_loops.run`).
"""

from __future__ import annotations

import onnx
from modeci_mdf.functions.standard import create_python_expression, mdf_functions

from mdf_loops.backends.scheduler import hooks
from mdf_loops.backends.scheduler.replacements import registered_functions as _routed
from mdf_loops.backends.scheduler.replacements import route_function
from mdf_loops.onnx.domains import DOMAINS, OperatorDomain

__all__ = ["register", "unregister", "registered_functions"]

_ADDED: set[str] = set()
_REGISTERED = False


def _latest_schemas(domain: str = "") -> dict[str, onnx.defs.OpSchema]:
    schemas: dict[str, onnx.defs.OpSchema] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain != domain:
            continue
        known = schemas.get(schema.name)
        if known is None or known.since_version < schema.since_version:
            schemas[schema.name] = schema
    return schemas


def _entry(schema: onnx.defs.OpSchema, domain: OperatorDomain) -> dict:
    arguments = [formal.name for formal in schema.inputs]
    signature = ", ".join(arguments + list(schema.attributes))
    # the default domain keeps modeci-mdf's form; another domain's prefix avoids clashes
    name = schema.name.lower() if domain.name == "" else f"{domain.prefix}_{schema.name.lower()}"
    return {
        "description": schema.doc,
        "arguments": arguments,
        "expression_string": f"onnx_ops.{name}({signature})",
        "function": None,
    }


def register() -> None:
    """Register ``onnx::Scan``, ``onnx::Loop``, ``onnx::If`` and every other ONNX operator.

    Idempotent. After it, modeci-mdf's stock ``EvaluableGraph`` runs loop nodes
    (see :mod:`mdf_loops.backends.scheduler.hooks`).
    """
    global _REGISTERED
    if _REGISTERED and hooks.installed():
        return
    hooks.install()  # first: it checks the installed versions and the hook targets
    for domain in DOMAINS:
        for name, schema in _latest_schemas(domain.name).items():
            key = domain.function(name)
            stock_has_it = key in mdf_functions and key not in _ADDED
            if key not in mdf_functions:
                mdf_functions[key] = _entry(schema, domain)
                _ADDED.add(key)
            entry = mdf_functions[key]
            expression = create_python_expression(entry["expression_string"])
            route_function(key, entry, expression, name, domain.name, stock_has_it)
    _REGISTERED = True


def unregister() -> None:
    """Remove what :func:`register` added and restore the stock engine."""
    global _REGISTERED
    for key in _ADDED:
        mdf_functions.pop(key, None)
    _ADDED.clear()
    hooks.uninstall()
    _REGISTERED = False


def registered_functions() -> list[str]:
    """The ``onnx::`` (and ``onnxml::``) function names mdf-loops evaluates (under ONNX
    semantics only, for those stock modeci-mdf has)."""
    return _routed()
