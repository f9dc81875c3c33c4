"""mdf-loops: ONNX Scan, Loop and If for the ModECI Model Description Format.

Importing the package registers ``onnx::Scan``, ``onnx::Loop``, ``onnx::If`` (and
the ONNX operators it lacks) in modeci-mdf's function registry, so modeci-mdf's
own ``EvaluableGraph`` runs models that contain loops. Models without loops keep
stock modeci-mdf's behaviour unless mdf-loops imported or built them
(:func:`mark_onnx_semantics`) or they run through :func:`run`. The registration happens
at once when modeci-mdf's execution engine is already imported, else the moment
it is imported (``from modeci_mdf.execution_engine import EvaluableGraph``);
:func:`register` does it explicitly. The public names below are imported when
first used, so ``import mdf_loops`` (and the ``mdf-loops`` command) starts fast.
"""

from __future__ import annotations

import sys as _sys
import types as _types
from importlib import import_module as _import_module

from mdf_loops.errors import (
    DepthLimitError,
    EvaluationError,
    IterationLimitError,
    LimitError,
    LoopError,
    MdfLoopsError,
    ModelError,
    SizeLimitError,
)

__version__ = "0.1.0"

#: public name -> the module that defines it (imported on first use)
_LAZY = {
    "authoring": "mdf_loops.authoring",
    "pt": "mdf_loops.authoring.tensor",  # the PyTensor-style namespace
    "foldl": "mdf_loops.authoring",
    "foldr": "mdf_loops.authoring",
    "map": "mdf_loops.authoring",
    "reduce": "mdf_loops.authoring",
    "scan": "mdf_loops.authoring",
    "until": "mdf_loops.authoring",
    "CompiledModel": "mdf_loops.backends.onnxruntime.compiled",
    "CompileError": "mdf_loops.backends.onnxruntime.compiled",
    "clear_compiled": "mdf_loops.backends.cache",
    "compile_model": "mdf_loops.backends.onnxruntime.compiled",
    "Limits": "mdf_loops.ops",
    "limits": "mdf_loops.ops",
    "mdf_to_onnx": "mdf_loops.onnx.export",
    "save_onnx": "mdf_loops.onnx.export",
    "onnx_to_mdf": "mdf_loops.onnx.import_",
    "register": "mdf_loops.backends.scheduler.registry",
    "unregister": "mdf_loops.backends.scheduler.registry",
    "BodySignature": "mdf_loops.model.convention",
    "body_graph": "mdf_loops.model.convention",
    "body_signature": "mdf_loops.model.convention",
    "port_type": "mdf_loops.model.convention",
    "set_body_signature": "mdf_loops.model.convention",
    "wrap_body": "mdf_loops.model.convention",
    "render": "mdf_loops.render",
    "to_graphviz": "mdf_loops.render",
    "set_input_defaults": "mdf_loops.model.interface",
    "stock_evaluate": "mdf_loops.model.interface",
    "graph_interface": "mdf_loops.run",
    "load_model": "mdf_loops.run",
    "run": "mdf_loops.run",
    "UnsafeExpressionError": "mdf_loops.safety.checks",
    "Problem": "mdf_loops.validation.report",
    "validate": "mdf_loops.validation.report",
    "mark_onnx_semantics": "mdf_loops.model.semantics",
    "onnx_file_access": "mdf_loops.safety.onnx_files",
    "run_limited": "mdf_loops.safety.sandbox",
    "ResourceLimitError": "mdf_loops.safety.sandbox",
    "sweep": "mdf_loops.sweep",
    "SweepError": "mdf_loops.sweep",
    "grad": "mdf_loops.backends.jax.grad",
    "value_and_grad": "mdf_loops.backends.jax.grad",
    "run_batch": "mdf_loops.backends.jax.batch",
    "to_time_loop": "mdf_loops.timeloop",
    "simulate": "mdf_loops.timeloop",
    "Trajectories": "mdf_loops.timeloop",
}


_MODULES = ("authoring", "pt")  # public names that are modules themselves


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:  # a subpackage not imported yet (mdf_loops.model, mdf_loops.ops, ...)
        try:
            return _import_module(f"{__name__}.{name}")
        except ModuleNotFoundError:
            raise AttributeError(f"module 'mdf_loops' has no attribute '{name}'") from None
    value = _import_module(module) if name in _MODULES else getattr(_import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


#: public functions that share their name with a submodule
_FUNCTIONS_NAMED_LIKE_MODULES = ("run", "render", "sweep")


class _Package(_types.ModuleType):
    """The package module: ``mdf_loops.run``, ``mdf_loops.render`` and ``mdf_loops.sweep``
    stay the functions when their submodules of the same name are imported (the import
    system sets a submodule as an attribute of its package)."""

    def __setattr__(self, name: str, value) -> None:
        if name in _FUNCTIONS_NAMED_LIKE_MODULES and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


class _RegisterWithTheEngine:
    """A meta-path finder that registers mdf-loops once modeci-mdf's engine is imported.

    When the engine is imported by a module of mdf-loops itself, the registration
    waits until no module of mdf-loops is half-imported (registering imports them).
    """

    engine = "modeci_mdf.execution_engine"

    def find_spec(self, fullname, path, target=None):
        if fullname != self.engine and not fullname.startswith(f"{__name__}."):
            return None
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            _register_when_ready(fullname)

        # this spec's loader only: registration follows the module's own execution
        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _register_when_ready(just_imported: str) -> None:
    if _RegisterWithTheEngine.engine not in _sys.modules or not _finder_installed():
        return
    for name, module in list(_sys.modules.items()):
        if (
            name.startswith(f"{__name__}.")
            and name != just_imported
            and getattr(getattr(module, "__spec__", None), "_initializing", False)
        ):
            return  # a module of ours is half-imported: register when it is done
    _remove_finder()
    _import_module("mdf_loops.backends.scheduler.registry").register()


def _finder_installed() -> bool:
    return any(isinstance(f, _RegisterWithTheEngine) for f in _sys.meta_path)


def _remove_finder() -> None:
    _sys.meta_path[:] = [f for f in _sys.meta_path if not isinstance(f, _RegisterWithTheEngine)]


def _register_now_or_with_the_engine() -> None:
    if _RegisterWithTheEngine.engine in _sys.modules:
        _import_module("mdf_loops.backends.scheduler.registry").register()
    elif not _finder_installed():
        _sys.meta_path.insert(0, _RegisterWithTheEngine())


__all__ = [
    "register",
    "unregister",
    "onnx_to_mdf",
    "mdf_to_onnx",
    "save_onnx",
    "run",
    "compile_model",
    "CompiledModel",
    "CompileError",
    "clear_compiled",
    "authoring",
    "scan",
    "map",
    "reduce",
    "foldl",
    "foldr",
    "until",
    "pt",
    "load_model",
    "graph_interface",
    "stock_evaluate",
    "set_input_defaults",
    "mark_onnx_semantics",
    "validate",
    "Problem",
    "render",
    "to_graphviz",
    "limits",
    "Limits",
    "BodySignature",
    "body_graph",
    "body_signature",
    "set_body_signature",
    "wrap_body",
    "port_type",
    "MdfLoopsError",
    "ModelError",
    "EvaluationError",
    "LoopError",
    "IterationLimitError",
    "LimitError",
    "DepthLimitError",
    "SizeLimitError",
    "UnsafeExpressionError",
    "onnx_file_access",
    "run_limited",
    "ResourceLimitError",
    "sweep",
    "SweepError",
    "grad",
    "value_and_grad",
    "run_batch",
    "to_time_loop",
    "simulate",
    "Trajectories",
]

_register_now_or_with_the_engine()
