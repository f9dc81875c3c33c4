"""Author MDF loops in Python the way Theano's ``scan`` does.

Symbolic inputs (:func:`input`), operators and the functions of
:mod:`mdf_loops.authoring.functions` record ONNX operations; :func:`scan` (and
:func:`map`, :func:`reduce`, :func:`foldl`, :func:`foldr`) traces its ``fn`` once
into a loop body; :func:`build_model` turns the outputs into an MDF ``Model``
whose loops are ``onnx::Scan`` / ``onnx::Loop`` nodes::

    from mdf_loops import authoring as A

    k = A.input("k", (), "int32")
    x = A.input("x", (10,), "float32")
    powers, _ = A.scan(lambda prior, x: prior * x, outputs_info=A.ones_like(x),
                       non_sequences=x, n_steps=k)
    model = A.build_model({"x_to_the_k": powers[-1]}, name="power")

:data:`pt` (:mod:`mdf_loops.authoring.tensor`) is the PyTensor-style namespace. Like
``numpy``, this namespace has functions named like Python's builtins (``map``, ``sum``,
``max``, ``min``, ``abs``, ``round``, ``input``): import it as a module
(``from mdf_loops import authoring as A``), not with ``import *``. ``scan``, ``until``
and ``pt`` are also at the top level (``mdf_loops.scan``); docs/authoring.md describes
them all.
"""

from types import SimpleNamespace as _SimpleNamespace

from mdf_loops.authoring import functions, tensor
from mdf_loops.authoring.config import config
from mdf_loops.authoring.errors import AuthoringError, ScanError
from mdf_loops.authoring.function import Function, function
from mdf_loops.authoring.functions import *  # noqa: F401,F403  (tanh, dot, arange, set_subtensor, ...)
from mdf_loops.authoring.functions import __all__ as _function_names
from mdf_loops.authoring.model import build_model, build_onnx
from mdf_loops.authoring.pytensor_functions import *  # noqa: F401,F403  (sqr, cumsum, ...)
from mdf_loops.authoring.pytensor_functions import __all__ as _pytensor_names
from mdf_loops.authoring.scan import Until, scan, until
from mdf_loops.authoring.shared import SharedVariable, shared
from mdf_loops.authoring.symbolic import Symbol, constant, input
from mdf_loops.authoring.tensor import as_tensor_variable
from mdf_loops.authoring.types import OPSET
from mdf_loops.authoring.views import foldl, foldr, map, reduce

#: the PyTensor-style namespace (``import pytensor.tensor as pt``), also ``mdf_loops.pt``
pt = tensor

#: Theano's ``theano.scan_module.until``
scan_module = _SimpleNamespace(until=until)

__all__ = [
    "input",
    "constant",
    "shared",
    "Symbol",
    "scan",
    "until",
    "Until",
    "map",
    "reduce",
    "foldl",
    "foldr",
    "build_model",
    "build_onnx",
    "functions",
    "AuthoringError",
    "ScanError",
    "OPSET",
    *_function_names,
    *_pytensor_names,
    "SharedVariable",
    "config",
    "function",
    "Function",
    "tensor",
    "pt",
    "as_tensor_variable",
    "scan_module",
]
