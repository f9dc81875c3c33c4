"""``map``, ``reduce``, ``foldl`` and ``foldr``: special cases of :func:`~.scan.scan`.

``reduce`` returns only the last step of each output; the last-step rewrite then
lowers it to a loop that carries states and stacks nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mdf_loops.authoring.errors import ScanError
from mdf_loops.authoring.scan import scan

__all__ = ["map", "reduce", "foldl", "foldr"]


def map(
    fn: Callable,
    sequences: Any,
    non_sequences: Any = None,
    truncate_gradient: int = -1,
    go_backwards: bool = False,
    mode: Any = None,
    name: str | None = None,
    return_updates: bool = True,
) -> Any:
    """``fn`` applied to each step of ``sequences`` (Python's ``map``); PyTensor's parameters."""
    return scan(
        fn,
        sequences=sequences,
        outputs_info=None,
        non_sequences=non_sequences,
        truncate_gradient=truncate_gradient,
        go_backwards=go_backwards,
        mode=mode,
        name=name,
        return_updates=return_updates,
    )


def reduce(
    fn: Callable,
    sequences: Any,
    outputs_info: Any,
    non_sequences: Any = None,
    go_backwards: bool = False,
    mode: Any = None,
    name: str | None = None,
    return_updates: bool = True,
) -> Any:
    """Python's ``reduce``: the last step of scan's outputs; PyTensor's parameters."""
    outputs, updates = scan(
        fn,
        sequences=sequences,
        outputs_info=outputs_info,
        non_sequences=non_sequences,
        go_backwards=go_backwards,
        mode=mode,
        name=name,
    )
    if isinstance(outputs, list):
        last: Any = [out[-1] for out in outputs]
    else:
        last = None if outputs is None else outputs[-1]
    if not return_updates:
        if updates:
            raise ScanError(
                f"reduce{f' {name!r}' if name else ''}: return_updates=False, but "
                "fn updates shared values; use return_updates=True"
            )
        return last
    return last, updates


def foldl(
    fn: Callable,
    sequences: Any,
    outputs_info: Any,
    non_sequences: Any = None,
    mode: Any = None,
    name: str | None = None,
    return_updates: bool = True,
) -> Any:
    """Haskell's ``foldl``: :func:`reduce` from the first step to the last."""
    return reduce(
        fn,
        sequences,
        outputs_info,
        non_sequences,
        go_backwards=False,
        mode=mode,
        name=name,
        return_updates=return_updates,
    )


def foldr(
    fn: Callable,
    sequences: Any,
    outputs_info: Any,
    non_sequences: Any = None,
    mode: Any = None,
    name: str | None = None,
    return_updates: bool = True,
) -> Any:
    """Haskell's ``foldr``: :func:`reduce` from the last step to the first."""
    return reduce(
        fn,
        sequences,
        outputs_info,
        non_sequences,
        go_backwards=True,
        mode=mode,
        name=name,
        return_updates=return_updates,
    )
