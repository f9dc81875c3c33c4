"""mdf-loops: ONNX Scan, Loop and If for the ModECI Model Description Format.

Importing the package registers ``onnx::Scan``, ``onnx::Loop``, ``onnx::If`` (and
the ONNX operators it lacks) in modeci-mdf's function registry, so modeci-mdf's
own ``EvaluableGraph`` runs models that contain loops. Models without loops keep
stock modeci-mdf's behaviour unless mdf-loops imported or built them
(:func:`mdf_loops.model.mark_onnx_semantics`) or they run through :func:`run`. The
registration happens at once when modeci-mdf's execution engine is already imported,
else the moment it is imported (``from modeci_mdf.execution_engine import
EvaluableGraph``); :func:`register` does it explicitly.

The top level holds what users reach for first (``__all__``, docs/api.md); the rest
lives in namespaces: :mod:`mdf_loops.errors` (every error class),
:mod:`mdf_loops.authoring` (``scan``, ``map``, ``reduce``, ...), :mod:`mdf_loops.model`
(the loop-node convention), :mod:`mdf_loops.safety` (limits, sandboxed runs) and
:mod:`mdf_loops.backends` (backend names). The public names are imported when first
used, so ``import mdf_loops`` (and the ``mdf-loops`` command) starts fast.
"""

from __future__ import annotations

import sys as _sys
import types as _types
import typing as _typing
import warnings as _warnings
from importlib import import_module as _import_module

from mdf_loops.errors import MdfLoopsError

if _typing.TYPE_CHECKING:  # what type checkers see; at run time the names load on first use
    from mdf_loops.authoring import tensor as pt
    from mdf_loops.authoring.scan import scan, until
    from mdf_loops.backends.jax.batch import run_batch
    from mdf_loops.backends.jax.grad import grad, value_and_grad
    from mdf_loops.backends.onnxruntime.compiled import CompiledModel, compile_model
    from mdf_loops.backends.scheduler.registry import register, unregister
    from mdf_loops.backends.torch import to_pytorch
    from mdf_loops.caches import clear_compiled
    from mdf_loops.model.interface import load_model
    from mdf_loops.onnx.export import mdf_to_onnx, save_onnx
    from mdf_loops.onnx.from_pytorch import from_pytorch
    from mdf_loops.onnx.import_ import onnx_to_mdf
    from mdf_loops.render import render, to_graphviz
    from mdf_loops.run import run
    from mdf_loops.simulation import simulate
    from mdf_loops.sweep import sweep
    from mdf_loops.timeloop import Trajectories, to_time_loop
    from mdf_loops.validation.report import Problem, validate

__version__ = "0.1.0"

#: public name -> the module that defines it (imported on first use)
_LAZY = {
    "run": "mdf_loops.run",
    "run_batch": "mdf_loops.backends.jax.batch",
    "load_model": "mdf_loops.model.interface",
    "validate": "mdf_loops.validation.report",
    "Problem": "mdf_loops.validation.report",
    "compile_model": "mdf_loops.backends.onnxruntime.compiled",
    "CompiledModel": "mdf_loops.backends.onnxruntime.compiled",
    "clear_compiled": "mdf_loops.caches",
    "onnx_to_mdf": "mdf_loops.onnx.import_",
    "mdf_to_onnx": "mdf_loops.onnx.export",
    "save_onnx": "mdf_loops.onnx.export",
    "from_pytorch": "mdf_loops.onnx.from_pytorch",
    "scan": "mdf_loops.authoring",
    "until": "mdf_loops.authoring",
    "pt": "mdf_loops.authoring.tensor",  # the PyTensor-style namespace
    "simulate": "mdf_loops.simulation",
    "to_time_loop": "mdf_loops.timeloop",
    "Trajectories": "mdf_loops.timeloop",
    "sweep": "mdf_loops.sweep",
    "grad": "mdf_loops.backends.jax.grad",
    "value_and_grad": "mdf_loops.backends.jax.grad",
    "to_pytorch": "mdf_loops.backends.torch",
    "render": "mdf_loops.render",
    "to_graphviz": "mdf_loops.render",
    "register": "mdf_loops.backends.scheduler.registry",
    "unregister": "mdf_loops.backends.scheduler.registry",
}

#: old top-level name -> the namespace it moved to; reachable here, with a
#: DeprecationWarning, until the next release
_MOVED = {
    **dict.fromkeys(("map", "reduce", "foldl", "foldr"), "mdf_loops.authoring"),
    **dict.fromkeys(
        (
            "ModelError",
            "EvaluationError",
            "LoopError",
            "LimitError",
            "IterationLimitError",
            "DepthLimitError",
            "SizeLimitError",
            "CompileError",
            "UnsafeExpressionError",
            "ResourceLimitError",
            "SweepError",
        ),
        "mdf_loops.errors",
    ),
    **dict.fromkeys(
        (
            "BodySignature",
            "body_graph",
            "body_signature",
            "set_body_signature",
            "wrap_body",
            "port_type",
            "graph_interface",
            "set_input_defaults",
            "stock_evaluate",
            "mark_onnx_semantics",
        ),
        "mdf_loops.model",
    ),
    **dict.fromkeys(("Limits", "limits", "onnx_file_access", "run_limited"), "mdf_loops.safety"),
}


_MODULES = ("pt",)  # public names that are modules themselves


def __getattr__(name: str) -> _typing.Any:
    if name in _MOVED:
        new_home = _MOVED[name]
        _warnings.warn(
            f"mdf_loops.{name} moved to {new_home}.{name}; the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(_import_module(new_home), name)
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
    """The public names and the subpackages imported so far (not the moved names)."""
    modules = {n for n, v in globals().items() if isinstance(v, _types.ModuleType)}
    return sorted({*__all__, *(n for n in modules if not n.startswith("_"))})


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


#: the top-level API (docs/api.md says why these and not more)
__all__ = [
    "run",
    "run_batch",
    "load_model",
    "validate",
    "Problem",
    "compile_model",
    "CompiledModel",
    "clear_compiled",
    "onnx_to_mdf",
    "mdf_to_onnx",
    "save_onnx",
    "from_pytorch",
    "scan",
    "until",
    "pt",
    "simulate",
    "to_time_loop",
    "Trajectories",
    "sweep",
    "grad",
    "value_and_grad",
    "to_pytorch",
    "render",
    "to_graphviz",
    "register",
    "unregister",
    "MdfLoopsError",
    "__version__",
]

_register_now_or_with_the_engine()
