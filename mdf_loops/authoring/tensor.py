"""The ``pt`` namespace: what a PyTensor (or Theano) program imports as its tensor module.

A program written for PyTensor runs with its import lines changed::

    import mdf_loops.authoring as pytensor          # was: import pytensor
    import mdf_loops.authoring.tensor as pt         # was: import pytensor.tensor as pt

    x = pt.vector("x")
    total = pytensor.scan(lambda v, acc: acc + v, sequences=x,
                          outputs_info=pt.zeros(()), return_updates=False)
    f = pytensor.function([x], total[-1])
    f([1.0, 2.0, 3.0])                              # array(6.)

It holds the tensor constructors (``vector``, ``imatrix``, ``tensor(dtype=...,
shape=...)``, ...), the tensor functions, ``as_tensor_variable``, ``shared``,
``function``, ``scan`` and its views, ``config`` and Theano's ``nnet`` names
(``nnet.sigmoid``, ``nnet.softmax``, ``nnet.relu``) and ``shared_randomstreams.RandomStreams``
(:mod:`mdf_loops.authoring.random`). docs/authoring.md lists
what is supported.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from mdf_loops.authoring.config import config
from mdf_loops.authoring.constructors import *  # noqa: F401,F403  (vector, imatrix, tensor, ...)
from mdf_loops.authoring.constructors import __all__ as _constructor_names
from mdf_loops.authoring.function import function
from mdf_loops.authoring.functions import *  # noqa: F401,F403  (tanh, dot, arange, ...)
from mdf_loops.authoring.functions import __all__ as _function_names
from mdf_loops.authoring.functions import relu, sigmoid, softmax
from mdf_loops.authoring.pytensor_functions import *  # noqa: F401,F403  (sqr, cumsum, ...)
from mdf_loops.authoring.pytensor_functions import __all__ as _pytensor_names
from mdf_loops.authoring.random import RandomStreams
from mdf_loops.authoring.scan import scan, until
from mdf_loops.authoring.shared import shared
from mdf_loops.authoring.symbolic import Symbol, constant
from mdf_loops.authoring.views import foldl, foldr, map, reduce

__all__ = [
    *_constructor_names,
    *_function_names,
    *_pytensor_names,
    "as_tensor_variable",
    "as_tensor",
    "constant",
    "shared",
    "function",
    "scan",
    "map",
    "reduce",
    "foldl",
    "foldr",
    "until",
    "config",
    "nnet",
    "shared_randomstreams",
    "RandomStreams",
]

#: Theano's ``tensor.nnet`` names
nnet = SimpleNamespace(sigmoid=sigmoid, softmax=softmax, relu=relu)
#: Theano's ``tensor.shared_randomstreams``
shared_randomstreams = SimpleNamespace(RandomStreams=RandomStreams)


def as_tensor_variable(x: Any, name: str | None = None, ndim: int | None = None) -> Symbol:
    """``x`` as a symbol: a symbol itself, or a constant of an array or a number."""
    if isinstance(x, Symbol):
        symbol = x
    else:
        symbol = constant(np.asarray(x), name=name)
    if ndim is not None and symbol.ndim is not None and symbol.ndim != ndim:
        from mdf_loops.authoring.errors import AuthoringError

        raise AuthoringError(
            f"as_tensor_variable: {symbol.describe()} does not have {ndim} dimensions"
        )
    return symbol


as_tensor = as_tensor_variable
