"""Does an exported PyTorch module follow the module at lengths other than the example's?

An exporter that unrolls a Python loop over a tensor's length writes a model
that answers only at the example's length (too few steps, or a fixed input
size); one that fixes an ``if`` on a size answers wrongly past it. Neither says
so. This check asks the module itself: every input dimension is grown by one in
turn (the last slice repeated); where the module (in eager mode) accepts the
grown input, the exported model, run on onnxruntime, must accept it too and
give the module's answer. A dimension the module does not accept at another
size (a feature size fixed by a weight) is not checked. The example itself is
checked first, so a difference the export made at the example's size is found
as well; a model onnxruntime cannot run at all (its LSTM has no float64 kernel) is
checked on onnx's reference evaluator instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx

from mdf_loops.errors import ModelError
from mdf_loops.onnx.torch_export import LOOP_ADVICE, first_line

__all__ = ["flat_outputs", "check_other_lengths", "copies"]

log = logging.getLogger(__name__)

Runner = Callable[[Sequence[np.ndarray]], list[np.ndarray]]


def flat_outputs(value: Any, module_name: str) -> list:
    """The tensors ``forward`` returned: one tensor, or a (nested) tuple or list of them."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)) and value:
        return [t for item in value for t in flat_outputs(item, module_name)]
    raise ModelError(
        f"module {module_name}: forward returned {type(value).__name__}; return a tensor "
        "or a tuple of tensors (each becomes an output of the MDF graph)"
    )


def check_other_lengths(
    module: Any, args: tuple, proto: onnx.ModelProto, input_names: Sequence[str], name: str
) -> None:
    """Refuse (:class:`ModelError`) an export that does not follow ``module`` at the
    example's size or at any size the module accepts one larger in one dimension."""
    run_onnx = _runner(module, args, proto, input_names, name)
    for position, (arg, input_name) in enumerate(zip(args, input_names, strict=True)):
        for axis in range(arg.dim()):
            grown = list(args)
            grown[position] = _grown(arg, axis)
            where = f"input '{input_name}' dimension {axis} at size {arg.shape[axis] + 1}"
            try:
                _eager(module, tuple(grown), name)
            except Exception as exc:  # the module itself refuses the size
                log.debug("%s: not checked, the module refuses it (%s)", where, first_line(exc))
                continue
            _compare(module, tuple(grown), run_onnx, where, name)


class _RunFailed(ModelError):
    """The exported model raised, where the module answered."""


def _runner(module, args: tuple, proto: onnx.ModelProto, input_names, name: str) -> Runner:
    """onnxruntime on the exported model, checked at the example's sizes; where
    onnxruntime cannot run the model at all (a kernel without the model's element type,
    such as its LSTM in float64), onnx's reference evaluator."""
    where = f"module {name} at the example's sizes"
    try:
        run_onnx = _onnxruntime(proto, input_names, name)
        _compare(module, args, run_onnx, where, name)
        return run_onnx
    except _RunFailed as exc:
        why = exc
    log.info("%s: checked on onnx's reference evaluator: onnxruntime cannot run it (%s)", name, why)
    run_onnx = _reference(proto, input_names)
    _compare(module, args, run_onnx, where, name)
    return run_onnx


def _compare(module, args: tuple, run_onnx: Runner, where: str, name: str) -> None:
    expected = [t.detach().cpu().numpy() for t in _eager(module, args, name)]
    try:
        got = run_onnx([a.detach().cpu().numpy() for a in args])
    except Exception as exc:  # onnxruntime refuses the size: it was fixed at the example
        what = f"the exported model refuses it ({first_line(exc)})"
        raise _RunFailed(str(_unrolled(name, where, what))) from exc
    for index, (want, have) in enumerate(zip(expected, got, strict=True)):
        if want.shape != have.shape or not _close(want, have):
            found = (
                f"shape {have.shape} instead of {want.shape}"
                if want.shape != have.shape
                else f"values differ by up to {np.max(np.abs(want - have)):.3g}"
            )
            raise _unrolled(name, where, f"output {index} of the exported model has {found}")


def _unrolled(name: str, where: str, what: str) -> ModelError:
    if where.endswith("at the example's sizes"):  # nothing was unrolled: an operator differs
        return ModelError(
            f"module {name}: the exported model does not follow the module at {where}: "
            f"{what}. torch's ONNX form of one of the module's operations differs from the "
            "operation itself; write that step another way (docs/pytorch.md)"
        )
    return ModelError(
        f"module {name}: the exported model does not follow the module at {where}: {what}. "
        f"A Python loop over that length was unrolled (or an if on it fixed) at the "
        f"example's size; {LOOP_ADVICE}"
    )


def _eager(module, args: tuple, name: str) -> list:
    import torch

    with torch.no_grad():
        return flat_outputs(module(*copies(args)), name)


def copies(args: tuple) -> tuple:
    """Fresh copies of tensors, so that a forward that writes into its arguments changes
    neither the user's tensors nor the next call's."""
    return tuple(a.detach().clone() for a in args)


def _grown(arg, axis: int):
    """``arg`` one longer along ``axis``: its last slice repeated (zeros if it is empty)."""
    import torch

    if arg.shape[axis] == 0:
        shape = list(arg.shape)
        shape[axis] = 1
        return torch.cat([arg, torch.zeros(shape, dtype=arg.dtype)], axis)
    return torch.cat([arg, arg.narrow(axis, arg.shape[axis] - 1, 1)], axis)


def _close(want: np.ndarray, have: np.ndarray) -> bool:
    if np.issubdtype(want.dtype, np.floating) or np.issubdtype(want.dtype, np.complexfloating):
        return bool(np.allclose(want, have, rtol=1e-4, atol=1e-5, equal_nan=True))
    return bool(np.array_equal(want, have))


def _reference(proto: onnx.ModelProto, input_names: Sequence[str]) -> Runner:
    from onnx.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator(proto)
    names = [i.name for i in proto.graph.input]

    def run(values: Sequence[np.ndarray]) -> list[np.ndarray]:
        by_name = dict(zip(input_names, values, strict=True))
        return list(evaluator.run(None, {n: by_name[n] for n in names}))

    return run


def _onnxruntime(proto: onnx.ModelProto, input_names: Sequence[str], name: str) -> Runner:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # its errors reach the caller as exceptions, not prints
    try:
        session = ort.InferenceSession(
            proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own classes
        raise _RunFailed(
            f"module {name}: onnxruntime cannot load the exported ONNX model ({first_line(exc)})"
        ) from exc
    names = [i.name for i in session.get_inputs()]

    def run(values: Sequence[np.ndarray]) -> list[np.ndarray]:
        by_name = dict(zip(input_names, values, strict=True))
        return session.run(None, {n: by_name[n] for n in names})

    return run
