"""mdf-loops: ONNX Scan, Loop and If for the ModECI Model Description Format.

Importing the package registers ``onnx::Scan``, ``onnx::Loop``, ``onnx::If`` (and
the ONNX operators it lacks) in modeci-mdf's function registry, so modeci-mdf's
own ``EvaluableGraph`` runs models that contain loops. Models without loops keep
stock modeci-mdf's behaviour unless mdf-loops imported or built them
(:func:`mark_onnx_semantics`) or they run through :func:`run`.
"""

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
from mdf_loops import authoring
from mdf_loops.authoring import foldl, foldr, map, reduce, scan, until
from mdf_loops.authoring import tensor as pt  # the PyTensor-style namespace
from mdf_loops.backends.onnxruntime.compiled import CompiledModel, CompileError, clear_compiled, compile_model
from mdf_loops.ops import Limits, limits
from mdf_loops.onnx.export import mdf_to_onnx, save_onnx
from mdf_loops.onnx.import_ import onnx_to_mdf
from mdf_loops.backends.scheduler.registry import register, unregister
from mdf_loops.model.convention import (
    BodySignature,
    body_graph,
    body_signature,
    port_type,
    set_body_signature,
    wrap_body,
)
from mdf_loops.render import render, to_graphviz
from mdf_loops.model.interface import stock_evaluate
from mdf_loops.model.semantics import mark_onnx_semantics
from mdf_loops.run import graph_interface, load_model, run
from mdf_loops.safety.checks import UnsafeExpressionError
from mdf_loops.safety.onnx_files import onnx_file_access
from mdf_loops.safety.sandbox import ResourceLimitError, run_limited
from mdf_loops.sweep import SweepError, sweep
from mdf_loops.validation.report import Problem, validate
from mdf_loops.backends.jax.grad import grad, value_and_grad
from mdf_loops.backends.jax.batch import run_batch

__version__ = "0.1.0"

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
]

register()
