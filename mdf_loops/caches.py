"""What the compiling backends keep per model: one cache, one input signature.

A compiled form (an onnxruntime session, a jitted JAX function, a rewritten model)
is kept per ``Model`` object (weakly: it goes with the model) and a key of the
backend's choosing, usually :func:`input_signature`. A :class:`CompileError` is
kept too, and raised again. A model edited in place (a field assigned, an item added,
removed or replaced at any depth, a number written into a list or a numeric array:
:mod:`mdf_loops.model.content`) is compiled again; :func:`clear_compiled` empties every
cache. Pure functions of text (a written-out step compiled
to a function) are kept by :func:`by_text`; :func:`clear_compiled` empties those too,
so a call after it costs what a first call in a new process costs.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

import numpy as np

from mdf_loops.errors import MdfLoopsError
from mdf_loops.model.content import content_version

__all__ = ["CompileCache", "by_text", "input_signature", "clear_compiled"]

T = TypeVar("T")

_ALL: weakref.WeakSet[CompileCache[Any]] = weakref.WeakSet()
_BY_TEXT: list[Callable[[], None]] = []  # the cache_clear of each by_text function

F = TypeVar("F", bound=Callable[..., Any])


def by_text(maxsize: int) -> Callable[[F], F]:
    """``functools.lru_cache(maxsize)`` for a pure function of hashable text, emptied by
    :func:`clear_compiled` with the other caches."""

    def wrap(function: F) -> F:
        cached = functools.lru_cache(maxsize=maxsize)(function)
        _BY_TEXT.append(cached.cache_clear)
        return cached  # type: ignore[return-value]

    return wrap


class CompileCache(Generic[T]):
    """Compiled forms by model object and key; failures of ``failure`` type cached too."""

    def __init__(self, failure: type[MdfLoopsError] | None = None) -> None:
        #: per model: the content version its entries were built for, and the entries
        self._entries: weakref.WeakKeyDictionary[Any, tuple[int, dict[Hashable, Any]]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self._failure = failure
        _ALL.add(self)

    def get(self, model: Any, key: Hashable, build: Callable[[], T]) -> T:
        """The entry of ``(model, key)``, built by ``build()`` the first time (and again
        after ``model`` was edited)."""
        version = content_version(model)  # outside the lock: it may walk the model
        with self._lock:
            entries = self._current(model, version)
            entry = entries.get(key)
        if entry is None:
            try:
                entry = build()
            except MdfLoopsError as exc:
                if self._failure is None or not isinstance(exc, self._failure):
                    raise
                entry = exc
            with self._lock:
                entries[key] = entry
        if isinstance(entry, MdfLoopsError):
            raise entry
        return entry

    def _current(self, model: Any, version: int) -> dict[Hashable, Any]:
        """``model``'s entries, emptied first when it was edited since they were built
        (call with the lock held)."""
        held = self._entries.get(model)
        if held is None or held[0] != version:  # new, or edited: what it held is stale
            held = self._entries[model] = (version, {})
        return held[1]

    def peek(self, model: Any, key: Hashable) -> T | None:
        """The entry of ``(model, key)`` when there is one and ``model`` was not edited
        since it was built; ``None`` otherwise (nor a kept failure)."""
        version = content_version(model)
        held = self._entries.get(model)
        if held is None or held[0] != version:
            return None
        entry = held[1].get(key)
        return None if isinstance(entry, MdfLoopsError) else entry

    def put(self, model: Any, key: Hashable, entry: T) -> None:
        """Keep ``entry`` for ``(model, key)`` in place of what was there."""
        version = content_version(model)
        with self._lock:
            self._current(model, version)[key] = entry

    def count(self, model: Any = None) -> int:
        """How many entries ``model`` has (every model's, without one)."""
        with self._lock:
            if model is not None:
                return len(self._entries.get(model, (0, {}))[1])
            return sum(len(entries) for _, entries in self._entries.values())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def input_signature(inputs: Mapping[str, Any]) -> tuple:
    """What a compilation depends on in the inputs: names, element types and ranks."""
    items: list[tuple[Any, ...]] = []
    for name in sorted(inputs):
        value = inputs[name]
        if isinstance(value, list):
            items.append((name, "seq", len(value) and input_signature({"e": value[0]})))
        elif value is None:
            items.append((name, "none"))
        else:
            array = np.asarray(value)
            items.append((name, array.dtype.str, array.ndim))
    return tuple(items)


def clear_compiled() -> None:
    """Forget every cached compilation of every backend (after editing a model in place)."""
    for cache in list(_ALL):
        cache.clear()
    for clear in _BY_TEXT:
        clear()
