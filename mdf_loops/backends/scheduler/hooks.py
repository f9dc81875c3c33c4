"""The hooks that let modeci-mdf's stock engine run ``onnx::Scan/Loop/If``, listed in :data:`HOOKS`.

modeci-mdf sends every function whose expression starts with ``onnx_ops.`` to
``execution_engine.evaluate_onnx_expr``, which knows no control flow; it offers
no registration of an evaluator, so :func:`install` replaces a few names with
the functions of :mod:`mdf_loops.backends.scheduler.replacements`. Each keeps
the stock behaviour (values, dtypes, errors, prints, formatting, no step
limit) unless ONNX semantics are active: inside a control-flow call and its
bodies, in graphs marked by :mod:`mdf_loops.model.semantics`, and in
:func:`mdf_loops.run`. Speed-ups whose results are identical stay on for every
model. ``docs/architecture.md`` ("Hooks into modeci-mdf and graph-scheduler")
mirrors :data:`HOOKS`; a test compares the modules before and after
``import mdf_loops`` with it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import modeci_mdf.execution_engine as _engine

from mdf_loops.backends.scheduler import replacements as _r
from mdf_loops.backends.scheduler.expressions import evaluate_expression
from mdf_loops.errors import MdfLoopsError
from mdf_loops.safety.evaluation import guarded_evaluate_expr

__all__ = [
    "HOOKS",
    "Hook",
    "SUPPORTED_VERSIONS",
    "install",
    "uninstall",
    "installed",
    "check_versions",
]


@dataclass(frozen=True)
class Hook:
    """One name mdf-loops replaces: ``target.name`` (``target`` a dotted module or class path)."""

    key: str
    target: str
    name: str
    why: str
    loop_free: str  # what changes for a model with no loop node ("nothing": results identical)
    required: bool = True  # a missing optional target skips the hook (a speed-up)


_EE = "modeci_mdf.execution_engine"

#: every name :func:`install` replaces; ``docs/architecture.md`` mirrors this list
HOOKS: tuple[Hook, ...] = (
    Hook(
        "evaluate_onnx_expr",
        _EE,
        "evaluate_onnx_expr",
        "the engine's only dispatch of onnx:: functions; sends Scan/Loop/If (and operators "
        "stock lacks) to mdf-loops",
        "nothing",
    ),
    Hook(
        "parameter_evaluate",
        f"{_EE}.EvaluableParameter",
        "evaluate",
        "a direct path for the onnx:: calls mdf-loops evaluates (skips the scan of every "
        "registered name)",
        "nothing (faster)",
        required=False,
    ),
    Hook(
        "node_evaluate",
        f"{_EE}.EvaluableNode",
        "evaluate",
        "tells a loop which node owns it (its body engines are cached there); errors name "
        "the node under ONNX semantics",
        "nothing",
    ),
    Hook(
        "node_init",
        f"{_EE}.EvaluableNode",
        "__init__",
        "under ONNX semantics the bare text of an ONNX operator's string attribute "
        '(pytorch_to_mdf\'s "mode": "reflect") is data: the node is built from a copy '
        "holding it as a one-element list, which the engine does not read as a name",
        "nothing",
    ),
    Hook(
        "graph_init",
        f"{_EE}.EvaluableGraph",
        "__init__",
        "ONNX semantics while a marked graph is built",
        "nothing",
    ),
    Hook(
        "graph_evaluate",
        f"{_EE}.EvaluableGraph",
        "evaluate",
        "ONNX semantics and the marked opset for a marked graph; the max_iterations bound "
        "under ONNX semantics",
        "nothing",
    ),
    Hook(
        "print",
        _EE,
        "print",
        "the engine's prints go to the DEBUG log under ONNX semantics",
        "nothing",
    ),
    Hook(
        "evaluate_expression",
        _EE,
        "evaluate_params_modelspec",
        "expressions compiled once; modelspec formats a log line per call",
        "nothing (faster)",
        required=False,
    ),
    Hook(
        "value_summary",
        _EE,
        "_val_info",
        "a cheap value summary for log lines under ONNX semantics",
        "nothing",
        required=False,
    ),
    Hook(
        "python_expression",
        _EE,
        "create_python_expression",
        "the rewrite of a function's expression string, remembered",
        "nothing (faster)",
        required=False,
    ),
    Hook(
        "condition_arg",
        "graph_scheduler.condition",
        "_format_arg",
        "conditions name MDF nodes by id under ONNX semantics (formatted on every evaluate)",
        "nothing",
        required=False,
    ),
    Hook(
        "element_format",
        "modeci_mdf.mdf.MdfBase",
        "__format__",
        "MDF elements in format strings by id under ONNX semantics",
        "nothing",
        required=False,
    ),
    Hook(
        "absolute_unit",
        "graph_scheduler.scheduler",
        "_parse_absolute_unit",
        "graph-scheduler parses its default time unit with pint per Scheduler (about 5 ms); "
        "the parsed value is remembered",
        "nothing (faster)",
        required=False,
    ),
    Hook(
        "evaluate_expr",
        _EE,
        "evaluate_expr",
        "in a run that does not trust its model, a name whose value is text gives that text, "
        "never the text evaluated as Python (docs/safety.md)",
        "nothing (applies inside untrusted mdf_loops.run only)",
    ),
)

_REPLACEMENTS: dict[str, Callable[[], Callable]] = {
    "evaluate_onnx_expr": lambda: _r.evaluate_onnx_expr,
    "parameter_evaluate": lambda: _r.evaluate_parameter,
    "node_evaluate": lambda: _r.evaluate_node,
    "node_init": lambda: _r.init_node,
    "graph_init": lambda: _r.init_graph,
    "graph_evaluate": lambda: _r.evaluate_graph,
    "print": lambda: _r.engine_print,
    "evaluate_expression": lambda: evaluate_expression,
    "value_summary": lambda: _r.value_summary,
    "python_expression": lambda: _r.remembered(_r.STOCK["python_expression"]),
    "condition_arg": lambda: _r.format_condition_arg,
    "element_format": lambda: _r.format_element,
    "absolute_unit": lambda: _r.remembered(_r.STOCK["absolute_unit"]),
    "evaluate_expr": lambda: guarded_evaluate_expr,
}

#: the versions :data:`HOOKS` were written for: (lowest, first unsupported)
#: the versions the hooks were written for and tested with (CI runs both ends:
#: constraints/oldest.txt and constraints/tested.txt); pyproject.toml states the same ranges.
#: modeci-mdf 0.4.13 is the newest psyneulink 0.21 accepts.
SUPPORTED_VERSIONS: dict[str, tuple[str, str]] = {
    "modeci-mdf": ("0.4.13", "0.4.16"),
    "graph-scheduler": ("1.2.1", "1.3"),
}


def _resolve(path: str) -> Any:
    """The module, or the class inside a module, that ``path`` names."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def _supported() -> str:
    return ", ".join(f"{name} >={low},<{high}" for name, (low, high) in SUPPORTED_VERSIONS.items())


def _installed_versions() -> str:
    found = []
    for name in SUPPORTED_VERSIONS:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} (no distribution metadata)")
    return ", ".join(found)


def _version_tuple(text: str) -> tuple:
    parts = []
    for piece in text.split("."):
        digits = "".join(c for c in piece if c.isdigit())
        if not digits:
            break
        parts.append(int(digits))
        if digits != piece:
            break
    return tuple(parts)


def check_versions() -> None:
    """Raise :class:`MdfLoopsError` when an installed version is not supported.

    The supported ranges are :data:`SUPPORTED_VERSIONS`.
    """
    for name, (low, high) in SUPPORTED_VERSIONS.items():
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # a source checkout: the target check below still applies
        if not _version_tuple(low) <= _version_tuple(version) < _version_tuple(high):
            raise MdfLoopsError(
                f"mdf-loops supports {_supported()}; {name} {version} is installed. Install a "
                f"supported version (pip install '{name}>={low},<{high}')"
            )


def _targets() -> dict[str, tuple[Any, str]]:
    """Each hook's (target object, name); a missing required target raises."""
    found = {}
    for hook in HOOKS:
        try:
            target = _resolve(hook.target)
        except (ImportError, AttributeError):
            target = None
        present = target is not None and (hook.name == "print" or hasattr(target, hook.name))
        if not present:
            if hook.required:
                raise MdfLoopsError(
                    f"cannot install mdf-loops' hook '{hook.key}': {hook.target}.{hook.name} does "
                    f"not exist in the installed packages ({_installed_versions()}); mdf-loops "
                    f"supports {_supported()}"
                )
            continue
        found[hook.key] = (target, hook.name)
    return found


#: each installed hook's (target object, name), and what the name was before
_TARGETS: dict[str, tuple[Any, str]] = {}
_INSTALLED: dict[str, Callable] = {}


def installed() -> bool:
    return bool(_INSTALLED) and _engine.evaluate_onnx_expr is _INSTALLED["evaluate_onnx_expr"]


def install() -> None:
    """Install the hooks of :data:`HOOKS` (idempotent).

    Raises :class:`MdfLoopsError` when an installed modeci-mdf or graph-scheduler
    is outside :data:`SUPPORTED_VERSIONS` or lacks a required target.
    """
    if installed():
        return
    if not _TARGETS:
        check_versions()
        _TARGETS.update(_targets())
        _r.STOCK.update(
            {key: vars(target).get(name, _r.ABSENT) for key, (target, name) in _TARGETS.items()}
        )
    for key, (target, name) in _TARGETS.items():
        if key not in _INSTALLED:
            _INSTALLED[key] = _REPLACEMENTS[key]()
        setattr(target, name, _INSTALLED[key])


def uninstall() -> None:
    """Restore modeci-mdf's and graph-scheduler's own names."""
    for key, (target, name) in _TARGETS.items():
        original = _r.STOCK[key]
        if original is not _r.ABSENT:
            setattr(target, name, original)
        elif name in vars(target):
            delattr(target, name)
