"""A model's content: its key, and a cheap test of whether the object was edited since.

:func:`model_digest` walks a model like its serialized form and hashes what the safety
checks read: every element, field, text, key and number, with numeric arrays and lists
of plain numbers by type and shape only. It costs about 3 µs per item walked (a few
milliseconds for a model with a few hundred ports and parameters).

:func:`content_key` is that digest, computed again only when the object changed:
the first call takes a *snapshot* of the model (each container walked, with the
identity of what it holds, a copy of each list of numbers and the bytes of each numeric
array), and each later call compares the live object against it in a few C calls (about
20 µs for a model of 800 objects and 6,000 numbers, some 50 µs when the CPU caches are
cold). Any assignment to a field, any item added, removed or replaced in a list or dict,
at any depth, and any number written into a list or a numeric array in place shows as a
change, except a string, None or class put in the place of an equal one, or a number in
a list of numbers put in the place of an equal one (the same content, but for ``2`` in
the place of ``2.0`` or ``-0.0`` in the place of ``0.0``: there a list compares equal).
:func:`content_version` counts the changes seen, so that caches of compiled forms drop
what an edit made stale; :func:`edit_test` gives the comparison itself, for a caller
that keeps something only while the model holds (:mod:`mdf_loops.run_plans`).
"""

from __future__ import annotations

import gc
import hashlib
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import chain
from operator import is_, itemgetter
from typing import Any

import numpy as np

__all__ = ["model_digest", "content_key", "content_version", "edit_test", "unchanged_during"]

_NUMBERS = (bool, int, float, complex, np.number, np.bool_)
_ATOMS = frozenset({str, bytes, type(None), bool, int, float, complex})
_PLAIN_NUMBERS = frozenset({int, float, bool})
_EQUAL_IS_SAME = frozenset({str, type(None), type})  # an equal value is the same content


def model_digest(model: Any, numbers: bool = False) -> Any:
    """A key of what the safety checks read in ``model``: equal for equal content,
    different after any edit that could change their verdict.

    A SHA-256 over every element, field, text, key and number of the model, walked
    like its serialized form. Numeric arrays and lists of plain numbers enter by type
    and shape only: no check reads their values, and hashing a large weight matrix
    on every run would cost more than the checks (``numbers=True``: lists of plain
    numbers enter with their values, for a model no snapshot can watch). A model too
    deep or strange to walk gets a key equal to nothing else, so it is checked every time.
    """
    digest = hashlib.sha256()
    stack: list[Any] = [model]
    seen: dict[int, tuple] = {}  # containers walked (kept alive, so ids stay theirs) by number
    try:
        while stack:
            value = stack.pop()
            if isinstance(value, (Mapping, list, tuple)) or hasattr(type(value), "__attrs_attrs__"):
                if id(value) in seen:
                    digest.update(f"r{seen[id(value)][0]}\0".encode())
                    continue
                seen[id(value)] = (len(seen), value)
            _feed(digest, value, stack, numbers)
    except Exception:  # never reuse a check of content that could not be walked
        return object()
    return digest.hexdigest()


def _feed(digest: Any, value: Any, stack: list, numbers: bool = False) -> None:
    """Add ``value`` (and push what it contains) to ``digest``."""
    if isinstance(value, str):
        token = f"s{len(value)}:{value}"
    elif value is None or isinstance(value, _NUMBERS):
        token = f"n{type(value).__name__}:{value!r}"
    elif isinstance(value, np.ndarray):
        token = f"a{value.dtype.str}{value.shape}"
        if value.dtype.kind not in "biufc":
            stack.extend(reversed(value.reshape(-1).tolist()))
    elif isinstance(value, Mapping):
        token = f"d{len(value)}"
        for key, item in reversed(list(value.items())):
            stack.extend((item, key))
    elif isinstance(value, (list, tuple)):
        token = f"l{len(value)}"
        if numbers or not all(type(item) in _PLAIN_NUMBERS for item in value):
            stack.extend(reversed(value))
    elif hasattr(type(value), "__attrs_attrs__"):
        token = f"o{type(value).__qualname__}"
        for field in reversed(type(value).__attrs_attrs__):
            stack.extend((getattr(value, field.name), field.name))
    else:
        token = f"x{type(value).__qualname__}:{value!r}"
    digest.update(token.encode("utf-8", "surrogatepass"))
    digest.update(b"\0")


def _is_atom(value: Any) -> bool:
    return type(value) in _ATOMS or isinstance(value, _NUMBERS)


class _Snapshot:
    """What a model object held when it was walked: the identity of everything its
    objects, lists and dicts refer to (the value, for lists of atoms), read back in one C
    call (``gc.get_referents``); ``None`` from :meth:`take` when something in it cannot
    be watched this way."""

    def __init__(self) -> None:
        self.owners: list[Any] = []  # attrs objects, lists and dicts, in walk order
        self.rooted = False  # whether the model itself was the first (and is left out)
        self.referents: list[Any] = []  # what they referred to, in gc.get_referents' order
        self.dicts: list[dict] = []  # their keys (not all of them are gc referents)
        self.atom_lists: list[list] = []  # lists of atoms, with copies
        self.atom_copies: list[list] = []
        #: what :meth:`holds` compares in one C call: the referents, the dicts' keys and
        #: the copies of the lists of atoms (a list compared with its copy: identity
        #: first, element by element, touching no element that is the same)
        self.saved: list[Any] = []
        self.arrays: list[np.ndarray] = []  # numeric arrays: dtype, shape and bytes
        self.array_types: list[tuple] = []
        self.array_bytes: list[bytes] = []
        self.opaque: list[Any] = []  # other objects, by their repr (as the digest reads them)
        self.opaque_reprs: list[str] = []
        self.pick: Callable[[list], tuple] = tuple  # the referents compared by identity
        self.picked: tuple = ()

    @classmethod
    def take(cls, model: Any) -> _Snapshot | None:
        snapshot, stack, seen = cls(), [model], set()
        while stack:
            value = stack.pop()
            if _is_atom(value) or id(value) in seen:
                continue
            seen.add(id(value))
            if not snapshot._add(value, stack):
                return None
        # the model itself is not kept (the snapshot lives in a dict weakly keyed by it):
        # holds() is given it again
        snapshot.rooted = bool(snapshot.owners) and snapshot.owners[0] is model
        if snapshot.rooted:
            del snapshot.owners[0]
        snapshot.referents = snapshot._referents(model)
        if any(item is model for item in snapshot.referents):  # a model that holds itself
            return None
        keys = list(chain.from_iterable(snapshot.dicts))
        snapshot.saved = [*snapshot.referents, *keys, *snapshot.atom_copies]
        snapshot._pick_identities()
        return snapshot

    def _pick_identities(self) -> None:
        """Where an equal value may still be another object (anything but a string, None
        or a class, or an object that equals only itself, as modeci-mdf's elements do),
        :meth:`holds` compares identities too: what is watched must be the very object
        that was walked."""
        where = [i for i, item in enumerate(self.referents) if _equal_may_differ(type(item))]
        if len(where) > 1:
            self.pick = itemgetter(*where)
        else:
            self.pick = lambda items: tuple(items[i] for i in where)
        self.picked = self.pick(self.referents)

    def _referents(self, model: Any) -> list[Any]:
        return (
            gc.get_referents(model, *self.owners) if self.rooted else gc.get_referents(*self.owners)
        )

    def _add(self, value: Any, stack: list) -> bool:
        kind = type(value)
        if hasattr(kind, "__attrs_attrs__"):
            self.owners.append(value)  # its slots are its referents
            if hasattr(value, "__dict__"):  # fields in an instance dict: watch the dict
                self._add_dict(vars(value))
            stack.extend(getattr(value, field.name) for field in kind.__attrs_attrs__)
        elif kind is list and all(type(item) in _ATOMS for item in value):
            self.atom_lists.append(value)
            self.atom_copies.append(list(value))
        elif kind is list:
            self.owners.append(value)
            stack.extend(value)
        elif kind is tuple:  # immutable: only what it holds can change
            stack.extend(value)
        elif kind is dict:
            self._add_dict(value)
            stack.extend(value.values())
        elif kind is np.ndarray and value.dtype.kind in "biufc":
            self.arrays.append(value)
            self.array_types.append((value.dtype, value.shape))
            self.array_bytes.append(value.tobytes())
        elif kind is np.ndarray:  # text or objects: walked by the digest, not watched here
            return False
        else:  # a set, or another object the digest reads by its repr: watched the same way
            try:
                self.opaque_reprs.append(repr(value))
            except Exception:
                return False
            self.opaque.append(value)
        return True

    def _add_dict(self, value: dict) -> None:
        self.owners.append(value)
        self.dicts.append(value)

    def holds(self, model: Any) -> bool:
        """Whether everything walked in ``model`` still holds what it held."""
        owners = self.owners  # (not through _referents: a Python call costs on every run)
        live = gc.get_referents(model, *owners) if self.rooted else gc.get_referents(*owners)
        live += chain.from_iterable(self.dicts)  # (few steps: each costs most when the
        live += self.atom_lists  # CPU caches are cold, as after the compiled loop ran)
        try:  # in C, identity first: about 1 ns a reference where nothing changed
            if live != self.saved:
                return False
            if self.opaque and list(map(repr, self.opaque)) != self.opaque_reprs:
                return False
        except Exception:  # an array (or a strange object) in the place of another
            return False
        return all(map(is_, self.pick(live), self.picked)) and (
            not self.arrays or self._arrays_hold()
        )

    def _arrays_hold(self) -> bool:
        """Each array's dtype, shape and bytes (bytes: a NaN equals itself, -0.0 is not 0.0)."""
        return (
            all(
                (a.dtype, a.shape) == saved
                for a, saved in zip(self.arrays, self.array_types, strict=True)
            )
            and [a.tobytes() for a in self.arrays] == self.array_bytes
        )


def _equal_may_differ(kind: type) -> bool:
    """Whether an object of ``kind`` may equal another that is not the same content (or
    not the same object to watch): not for strings, None and classes, nor for objects
    whose equality is identity (a list compares those by identity already)."""
    return kind not in _EQUAL_IS_SAME and kind.__eq__ is not object.__eq__


class _Watched:
    __slots__ = ("snapshot", "key", "version")

    def __init__(self, snapshot: _Snapshot | None, key: Any, version: int) -> None:
        self.snapshot, self.key, self.version = snapshot, key, version


_WATCHED: weakref.WeakKeyDictionary[Any, _Watched] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()
_STILL: ContextVar[tuple[Any, _Watched] | None] = ContextVar("mdf_loops_still", default=None)


@contextmanager
def unchanged_during(model: Any) -> Iterator[None]:
    """Compare ``model`` with its snapshot once, and take it as unchanged inside the block
    (one call of :func:`mdf_loops.run` asks several times)."""
    try:
        entry = _watched(model)
    except TypeError:
        yield
        return
    token = _STILL.set((model, entry))
    try:
        yield
    finally:
        _STILL.reset(token)


def _watched(model: Any) -> _Watched:
    still = _STILL.get()
    if still is not None and still[0] is model:
        return still[1]
    with _LOCK:
        entry = _WATCHED.get(model)
    if entry is not None and entry.snapshot is not None and entry.snapshot.holds(model):
        return entry
    snapshot = _Snapshot.take(model)
    # not watchable: the digest, numbers included, tells whether it changed
    key = model_digest(model, numbers=snapshot is None)
    if entry is None:
        version = 0
    elif entry.snapshot is None and snapshot is None:
        version = entry.version + (key != entry.key)
    else:
        version = entry.version + 1
    entry = _Watched(snapshot, key, version)
    with _LOCK:
        _WATCHED[model] = entry
    return entry


def content_key(model: Any) -> Any:
    """:func:`model_digest` of ``model``, walked again only after the object was edited
    (with ``numbers=True`` for a model no snapshot can watch, walked on each call)."""
    try:
        return _watched(model).key
    except TypeError:  # not weakly referable: no snapshot to keep
        return model_digest(model)


def content_version(model: Any) -> int:
    """A number that grows each time ``model`` is seen edited since it was last looked at."""
    try:
        return _watched(model).version
    except TypeError:
        return -1


def edit_test(model: Any) -> Callable[[Any], bool] | None:
    """A test ``still(model) -> bool``: whether ``model`` still holds what it holds now
    (the snapshot comparison, without the bookkeeping of :func:`content_version`); None
    for a model no snapshot can watch."""
    try:
        snapshot = _watched(model).snapshot
    except TypeError:
        return None
    return None if snapshot is None else snapshot.holds
