"""A PyTorch module to ONNX with its loops kept: the exporter chosen by what the module is.

torch has two ONNX exporters, and each keeps loops for one kind of code only:

* the TorchScript exporter (``torch.onnx.export(dynamo=False)``) keeps ``for``,
  ``while`` and ``if`` as ONNX ``Loop`` and ``If`` for ``torch.jit.script``-ed
  code; a plain module it *traces*, which runs Python loops once at the example
  and records the steps taken (silently unrolled);
* the dynamo exporter (``dynamo=True``) keeps torch's higher-order ``scan``,
  ``while_loop`` and ``cond`` as ``Scan``, ``Loop`` and ``If``, unrolls plain
  ``for`` loops and refuses ``while``/``if`` on a tensor's value.

So a module is scripted (a plain one by :func:`scripted`, when TorchScript
compiles it) and exported by the TorchScript exporter; a module TorchScript
cannot compile (torch's higher-order loops are such) goes to the dynamo
exporter. Every input and output dimension is exported as dynamic, so lengths
other than the example's are accepted; :mod:`mdf_loops.onnx.torch_check` then
checks that the exported model follows the module at other lengths.

torch's warnings, log records and prints during an export go to this module's
DEBUG log (:func:`quiet_torch`), never to the terminal.
"""

from __future__ import annotations

import inspect
import io
import logging
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from typing import Any

import onnx

from mdf_loops.errors import ModelError
from mdf_loops.onnx.torch_symbolics import cell_forms

__all__ = ["ExportedModule", "export_module", "quiet_torch", "scripted"]

log = logging.getLogger(__name__)

#: the loggers torch and its ONNX exporter write to
_TORCH_LOGGERS = ("torch", "onnxscript")

#: what to change, said by every error about a loop torch cannot export
LOOP_ADVICE = (
    "write the loop so that torch.jit.script compiles the module (for/while/if on "
    "tensors, typed arguments), or with torch's higher-order loops "
    "(torch._higher_order_ops.scan / while_loop / cond); docs/pytorch.md"
)


@dataclass(frozen=True)
class ExportedModule:
    """The ONNX model of a module, and which exporter wrote it."""

    proto: onnx.ModelProto
    exporter: str  # "torchscript" or "dynamo"
    scripting_error: str = ""  # why torch.jit.script refused the module ("" if it did not)


class _ToOurLog(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        log.debug("%s: %s", record.name, record.getMessage())


@contextmanager
def quiet_torch() -> Iterator[None]:
    """torch's warnings, log records and prints in the block go to our DEBUG log.

    torch gives many of its loggers a handler of their own (writing to stderr, not
    propagating); each gets its handlers back after the block.
    """
    loggers = [logging.getLogger(name) for name in _TORCH_LOGGERS] + [
        lg
        for name, lg in logging.root.manager.loggerDict.items()
        if isinstance(lg, logging.Logger) and lg.handlers and name.startswith(_TORCH_LOGGERS)
    ]
    state = [(lg, lg.handlers[:], lg.propagate) for lg in loggers]
    printed = io.StringIO()
    try:
        for lg in loggers:
            lg.handlers[:] = [_ToOurLog()]
            lg.propagate = False
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with redirect_stdout(printed), redirect_stderr(printed):
                yield
    finally:
        for lg, handlers, propagate in state:
            lg.handlers[:], lg.propagate = handlers, propagate
    for warning in caught:
        log.debug("torch warned: %s: %s", warning.category.__name__, warning.message)
    if printed.getvalue().strip():
        log.debug("torch printed: %s", printed.getvalue().strip())


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message, with its class."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


def scripted(module: Any) -> tuple[Any, str]:
    """The module compiled by ``torch.jit.script`` (itself if it is a ScriptModule), or
    ``(None, why)`` when TorchScript cannot compile it."""
    import torch

    if isinstance(module, torch.jit.ScriptModule):
        return module, ""
    try:
        return torch.jit.script(module), ""
    except Exception as exc:  # TorchScript's frontend raises many classes
        log.info("torch.jit.script cannot compile %s: %s", type(module).__name__, exc)
        return None, first_line(exc)


def export_module(
    module: Any,
    args: tuple,
    input_names: Sequence[str],
    output_names: Sequence[str],
    output_ranks: Sequence[int],
) -> ExportedModule:
    """The ONNX model of ``module`` at ``args``, every dimension dynamic (see the module)."""
    script, why = scripted(module)
    if script is not None:
        proto = _torchscript_onnx(script, args, input_names, output_names, output_ranks)
        return ExportedModule(proto, "torchscript")
    return ExportedModule(_dynamo_onnx(module, args, input_names, output_names, why), "dynamo", why)


def _torchscript_onnx(script, args, input_names, output_names, output_ranks) -> onnx.ModelProto:
    import torch

    ranks = [a.dim() for a in args] + list(output_ranks)
    names = [*input_names, *output_names]
    dynamic = {
        n: {axis: f"{n}_{axis}" for axis in range(r)} for n, r in zip(names, ranks, strict=True)
    }
    buffer = io.BytesIO()
    try:
        with cell_forms():
            torch.onnx.export(
                script,
                args,
                buffer,  # type: ignore[arg-type]  # torch writes to a file object too
                dynamo=False,
                input_names=list(input_names),
                output_names=list(output_names),
                dynamic_axes=dynamic,
            )
    except Exception as exc:  # torch raises its own classes and RuntimeError
        raise ModelError(
            f"module {_name(script)}: torch's TorchScript ONNX exporter refused the scripted "
            f"module ({first_line(exc)}); an operator without an ONNX form needs another "
            f"way to write it, a loop: {LOOP_ADVICE}"
        ) from exc
    return onnx.load_from_string(buffer.getvalue())


def _dynamo_onnx(module, args, input_names, output_names, scripting_error) -> onnx.ModelProto:
    import torch
    from torch.export import Dim

    dynamic = _dynamic_shapes(module, args, Dim.AUTO)
    try:
        program = torch.onnx.export(
            module,
            args,
            dynamo=True,
            input_names=list(input_names),
            output_names=list(output_names),
            dynamic_shapes=dynamic,
            verbose=False,
        )
    except Exception as exc:  # torch.export raises its own classes
        cause = exc.__cause__ or exc
        raise ModelError(
            f"module {_name(module)} cannot be exported with its loops: torch.jit.script "
            f"refused it ({scripting_error}), and torch.export refused it too "
            f"({first_line(cause)}); a Python while/if on a tensor's value and code "
            f"TorchScript does not compile cannot become a loop: {LOOP_ADVICE}"
        ) from exc
    if program is None or program.model_proto is None:
        raise ModelError(f"module {_name(module)}: torch's dynamo exporter returned no model")
    return program.model_proto


def _dynamic_shapes(module, args: tuple, dim) -> tuple:
    """Every dimension of every argument dynamic, in the structure torch.export binds
    ``args`` to ``forward``'s parameters (``*args`` as one tuple)."""

    def every_axis(a) -> dict:
        return {axis: dim for axis in range(a.dim())}

    try:
        bound = inspect.signature(module.forward).bind(*args).arguments.values()
    except (TypeError, ValueError):  # no signature to bind: one entry per argument
        return tuple(every_axis(a) for a in args)
    return tuple(
        tuple(map(every_axis, v)) if isinstance(v, tuple) else every_axis(v) for v in bound
    )


def _name(module: Any) -> str:
    return repr(getattr(module, "original_name", None) or type(module).__name__)
