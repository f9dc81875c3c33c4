"""The limits of a model that is not trusted, as the torch backend applies them.

* Every operator with a size plan is sized before its torch kernel runs, by the
  scheduler's plan (:func:`mdf_loops.safety.operator_sizes.node_size_check`), bound to
  the node once when the graph is planned (:func:`sized`); operators without one cannot
  be larger than their inputs and cost nothing.
* Loops count their iterations with the scheduler's guard
  (:class:`~mdf_loops.ops.common.IterationGuard`: ``max_iterations``,
  ``max_total_iterations``), and each iteration's carried values and the scan outputs
  stacked so far are held to ``max_elements`` (:func:`check_loop_values`).
* A limit passed anywhere names where: the node, and the loop nodes and iterations
  around it (:func:`located`), as the scheduler's errors do.

A trusted model is planned without any of it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from mdf_loops.errors import LimitError, SizeLimitError
from mdf_loops.ops.common import check_elements, current_limits

__all__ = ["BACKEND", "sized", "located", "check_loop_values"]

#: how errors name this backend
BACKEND = "torch backend"


def sized(fn: Callable[..., Any], check: Callable[[Sequence[Any]], None], where: str) -> Callable:
    """``fn`` (a step's call on its inputs) that first sizes its result with ``check``."""

    def sized_fn(*inputs: Any) -> Any:
        try:
            check(inputs)
        except SizeLimitError as exc:
            raise SizeLimitError(exc.reason, location=f"{where} ({BACKEND})") from None
        return fn(*inputs)

    return sized_fn


def located(exc: LimitError, where: str, at: str | None = None) -> LimitError:
    """``exc``, raised by the loop or branch at ``where`` (or in its body ``at`` an
    iteration or a branch), naming them: ``node 'outer' (Scan), iteration 3 > node
    'inner' (Loop): ...``."""
    inner = exc.location
    if at is None and inner:  # already located, in its body: keep its place
        return exc
    here = where if at is None else f"{where}, {at}"
    if not inner:
        here = f"{here} ({BACKEND})"
    error = type(exc)(exc.reason, location=f"{here} > {inner}" if inner else here)
    error.__cause__ = exc.__cause__
    return error


def check_loop_values(carried: Iterable[tuple[int, Any]], stacked: list[int],
                      elements: Sequence[Any], iteration: int) -> None:  # fmt: skip
    """Hold one iteration's carried values (``(k, value)``: the k-th carried value), and
    each scan output stacked so far (``stacked``, updated here), to ``max_elements``."""
    limit = current_limits().max_elements
    for k, value in carried:
        count = _count(value)
        if count > limit:
            check_elements(count, f"loop-carried value {k}", iteration)
    if len(stacked) < len(elements):
        stacked.extend([0] * (len(elements) - len(stacked)))
    for k, value in enumerate(elements):
        stacked[k] += _count(value)
        if stacked[k] > limit:
            check_elements(stacked[k], f"scan output {k} (stacked)", iteration)


def _count(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel()
    if isinstance(value, list):  # a sequence: its members together
        return max(len(value), sum(_count(item) for item in value))
    return 1
