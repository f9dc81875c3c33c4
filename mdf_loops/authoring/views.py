"""``map``, ``reduce``, ``foldl`` and ``foldr``: special cases of :func:`~.scan.scan`.

``reduce`` returns only the last step of each output; the last-step rewrite then
lowers it to a loop that carries states and stacks nothing.
"""

from __future__ import annotations

from typing import Any, Callable

from mdf_loops.authoring.scan import scan

__all__ = ["map", "reduce", "foldl", "foldr"]


def map(fn: Callable, sequences: Any, non_sequences: Any = None, go_backwards: bool = False,
        name: str | None = None):
    """``fn`` applied to each step of ``sequences`` (Python's ``map``); returns ``(outputs, updates)``."""
    return scan(fn, sequences=sequences, outputs_info=None, non_sequences=non_sequences,
                go_backwards=go_backwards, name=name)


def reduce(fn: Callable, sequences: Any, outputs_info: Any, non_sequences: Any = None,
           go_backwards: bool = False, name: str | None = None):
    """Python's ``reduce``: the last step of scan's outputs; returns ``(outputs, updates)``."""
    outputs, updates = scan(fn, sequences=sequences, outputs_info=outputs_info,
                            non_sequences=non_sequences, go_backwards=go_backwards, name=name)
    if isinstance(outputs, list):
        return [out[-1] for out in outputs], updates
    return (None if outputs is None else outputs[-1]), updates


def foldl(fn: Callable, sequences: Any, outputs_info: Any, non_sequences: Any = None,
          name: str | None = None):
    """Haskell's ``foldl``: :func:`reduce` from the first step to the last."""
    return reduce(fn, sequences, outputs_info, non_sequences, go_backwards=False, name=name)


def foldr(fn: Callable, sequences: Any, outputs_info: Any, non_sequences: Any = None,
          name: str | None = None):
    """Haskell's ``foldr``: :func:`reduce` from the last step to the first."""
    return reduce(fn, sequences, outputs_info, non_sequences, go_backwards=True, name=name)
