"""PyTorch -> MDF with loops kept: :func:`from_pytorch`.

A module comes in through ONNX: torch's exporter chosen by what the module is
(:mod:`mdf_loops.onnx.torch_export`), a check that the export follows the module
at lengths other than the example's (:mod:`mdf_loops.onnx.torch_check`), then
:func:`mdf_loops.onnx_to_mdf`. It lives beside the ONNX importer because it is
one: its model is the one ONNX import writes. torch is imported only when
:func:`from_pytorch` is called.
"""

from __future__ import annotations

import inspect
import keyword
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from modeci_mdf.mdf import Model

from mdf_loops.errors import ModelError
from mdf_loops.onnx.import_ import onnx_to_mdf
from mdf_loops.onnx.torch_check import check_other_lengths, copies, flat_outputs
from mdf_loops.onnx.torch_export import export_module, first_line, quiet_torch

__all__ = ["from_pytorch"]

log = logging.getLogger(__name__)


def from_pytorch(
    module: Any,
    example_args: Any,
    *,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
) -> Model:
    """Convert a ``torch.nn.Module`` with loops into an MDF ``Model`` with loop nodes.

    ``for`` loops over a tensor's length or ``range(n)``, ``while`` loops and
    ``if`` on tensors become ``onnx::Loop`` and ``onnx::If`` nodes (torch's
    higher-order ``scan``/``while_loop``/``cond``: ``onnx::Scan``, ``Loop``,
    ``If``), not unrolled, so the model answers as the module does at lengths
    other than the example's. A plain module is compiled with
    ``torch.jit.script`` first; one TorchScript cannot compile goes through
    ``torch.export``. The export is checked against the module at the example
    and with each input dimension one longer; a loop that was unrolled anyway is
    refused with a :class:`~mdf_loops.errors.ModelError` that names the input and
    says what to change (docs/pytorch.md).

    ``example_args`` is a tensor or a tuple of tensors, the positional arguments
    of ``forward``. ``input_names`` default to ``forward``'s parameter names,
    ``output_names`` to ``output_0``, ``output_1``, ... The module is run in
    evaluation mode and left as it was given.
    """
    torch = import_torch()
    if not isinstance(module, torch.nn.Module):
        raise ModelError(
            f"from_pytorch expects a torch.nn.Module, got {type(module).__name__}; wrap a "
            "function in a Module whose forward calls it"
        )
    name = repr(getattr(module, "original_name", None) or type(module).__name__)
    _refuse_traced(module, name, torch)
    args = copies(_example_tensors(example_args, name, torch))  # the user's stay as given
    _refuse_fewer_arguments(module, args, name)
    inputs = _names(input_names, forward_parameters(module, len(args)), "input_names", name)
    with _evaluation_mode(module), quiet_torch():
        outputs = _deterministic_outputs(module, args, name, torch)
        names_out = [f"output_{i}" for i in range(len(outputs))]
        names_out = _names(output_names, names_out, "output_names", name)
        exported = export_module(module, args, inputs, names_out, [t.dim() for t in outputs])
        check_other_lengths(module, args, exported.proto, inputs, name)
    log.info("module %s exported by torch's %s exporter", name, exported.exporter)
    return onnx_to_mdf(exported.proto, model_id=name.strip("'"))


def import_torch() -> Any:
    """The torch module, or a ModelError that says how to install it."""
    try:
        import torch
    except ImportError:
        raise ModelError(
            "from_pytorch needs PyTorch: pip install torch (the CPU build is enough)"
        ) from None
    return torch


def _refuse_traced(module, name: str, torch) -> None:
    for part, sub in module.named_modules():
        if isinstance(sub, torch.jit.TracedModule):
            where = f" (its part '{part}')" if part else ""
            raise ModelError(
                f"module {name}{where} was made by torch.jit.trace, which ran its Python "
                "loops and tensor ifs once at the trace's inputs and kept only the steps "
                "taken; they cannot be recovered. Pass the module before tracing "
                "(from_pytorch scripts it) or torch.jit.script it"
            )


def _example_tensors(example_args, name: str, torch) -> tuple:
    args = example_args if isinstance(example_args, (tuple, list)) else (example_args,)
    for position, arg in enumerate(args):
        if not isinstance(arg, torch.Tensor):
            raise ModelError(
                f"module {name}: example argument {position} is {type(arg).__name__}; give "
                "every argument of forward as a torch.Tensor (e.g. torch.tensor(1.0)), "
                "so that it becomes an input of the model"
            )
    if not args:
        raise ModelError(f"module {name}: example_args is empty; give forward's arguments")
    return tuple(args)


def _refuse_fewer_arguments(module, args: tuple, name: str) -> None:
    parameters = forward_parameters(module)
    if len(args) < len(parameters):
        raise ModelError(
            f"module {name}: forward takes {', '.join(parameters)}, example_args gives "
            f"{len(args)}; give each as a tensor (torch's exporters need every argument, "
            "those with a default too)"
        )


def forward_parameters(module, count: int | None = None) -> list[str]:
    """The names of ``forward``'s positional parameters, the first ``count`` of them if
    given (``input_i`` where unknown)."""
    schema = getattr(getattr(module, "forward", None), "schema", None)
    if schema is not None:  # a ScriptModule: its compiled signature
        names = [a.name for a in schema.arguments][1:]
    else:
        try:
            parameters = list(inspect.signature(module.forward).parameters.values())
        except (TypeError, ValueError):
            parameters = []
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        names = [p.name for p in parameters if p.kind in positional]
    if count is None:
        return names
    return names[:count] + [f"input_{i}" for i in range(len(names), count)]


def _names(given: Sequence[str] | None, default: list[str], what: str, name: str) -> list[str]:
    if given is None:
        return default
    if isinstance(given, str) or not isinstance(given, Sequence):
        raise ModelError(f"module {name}: {what} must be a list of names, got {given!r:.60}")
    names = list(given)
    if len(names) != len(default):
        raise ModelError(
            f"module {name}: {what} has {len(names)} names for {len(default)} "
            f"{'example arguments' if what == 'input_names' else 'outputs of forward'} "
            f"({', '.join(default)}); give one name each"
        )
    for n in names:
        if not isinstance(n, str) or not n.isidentifier() or keyword.iskeyword(n):
            raise ModelError(
                f"module {name}: {what} holds {n!r:.40}; a name must be a Python identifier "
                "(letters, digits and _, not a keyword)"
            )
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ModelError(f"module {name}: {what} names {twice} more than once")
    return names


def _deterministic_outputs(module, args: tuple, name: str, torch) -> list:
    """The module's outputs at the example, which a second call must repeat."""
    try:
        with torch.no_grad():
            first = flat_outputs(module(*copies(args)), name)
            second = flat_outputs(module(*copies(args)), name)
    except ModelError:
        raise
    except Exception as exc:  # the module's own error on its example
        raise ModelError(
            f"module {name} fails on example_args ({first_line(exc)}); give arguments "
            "forward accepts"
        ) from exc
    if not all(_same(a, b) for a, b in zip(first, second, strict=True)):
        raise ModelError(
            f"module {name}: two calls on the same example give different outputs (random "
            "numbers drawn inside forward?); pass the noise as an input tensor, as the "
            "drift-diffusion example of docs/pytorch.md does"
        )
    return first


def _same(a, b) -> bool:
    a, b = a.detach().cpu().numpy(), b.detach().cpu().numpy()
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")


@contextmanager
def _evaluation_mode(module) -> Iterator[None]:
    """The module in evaluation mode for the block, each part's mode restored after."""
    modes = [(sub, sub.training) for sub in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for sub, training in modes:
            sub.training = training
