"""mdf-loops: ONNX Scan, Loop and If for the ModECI Model Description Format.

Importing the package registers ``onnx::Scan``, ``onnx::Loop``, ``onnx::If`` (and
every other ONNX operator) in modeci-mdf's function registry, so modeci-mdf's
own ``EvaluableGraph`` runs models that contain loops.
"""

from .errors import (
    DepthLimitError,
    EvaluationError,
    IterationLimitError,
    LimitError,
    LoopError,
    MdfLoopsError,
    ModelError,
    SizeLimitError,
)
from . import authoring
from .authoring import foldl, foldr, map, reduce, scan, until
from .compiled import CompiledModel, CompileError, clear_compiled, compile_model
from .ops import Limits, limits
from .onnx_export import mdf_to_onnx, save_onnx
from .onnx_import import onnx_to_mdf
from .registry import register, unregister
from .representation import (
    BodySignature,
    body_graph,
    body_signature,
    port_type,
    set_body_signature,
    wrap_body,
)
from .render import render, to_graphviz
from .interface import stock_evaluate
from .run import graph_interface, load_model, run
from .safety import UnsafeExpressionError
from .validate import Problem, validate

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
    "load_model",
    "graph_interface",
    "stock_evaluate",
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
]

register()
