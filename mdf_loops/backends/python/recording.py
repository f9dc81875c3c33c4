"""The values a time-loop function records, as numpy arrays made for all the steps.

A float64 or int64 scan output is written in place: the function stores each step's
value at its step (``sK[iteration] = x``) into a ``memoryview`` of one numpy array made
for all the steps (8 bytes a step, no Python number kept), which takes what an ``array``
of its type takes (a float in an int64 output is a TypeError, where numpy would cut it
to an integer). Other values (arrays, values of no declared type) are appended to a
plain list (a list's ``append`` is the cheapest store Python has), moved out after each
chunk of steps, and stacked at the end.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["Recording"]

#: ``array`` typecode of a scan output (``LoopSource.scan_codes``) -> numpy dtype
_DTYPES = {"d": np.float64, "q": np.int64}


class Recording:
    """The scan outputs of one run of at most ``steps`` steps; ``scans`` are what the
    function writes to: a writable ``memoryview`` of the output's array for a float64
    or int64 output (``codes``), else a list it appends to (emptied by :meth:`move`)."""

    def __init__(self, codes: tuple[str | None, ...], steps: int, time_made: bool = False):
        """``time_made``: the function leaves the first scan output (the time) empty."""
        self._arrays = [
            np.empty(steps, _DTYPES[c]) if c in _DTYPES and not (time_made and k == 0) else None
            for k, c in enumerate(codes)
        ]
        self.scans: list[Any] = [[] if a is None else a.data for a in self._arrays]
        self._lists: list[list[Any]] = [[] for _ in codes]

    def move(self, start: int, stop: int) -> list[np.ndarray]:
        """After the steps ``start`` to ``stop``: their values (one array per scan output,
        rows = those steps), the appended ones moved out of their lists."""
        chunk = []
        for scan, array, kept in zip(self.scans, self._arrays, self._lists, strict=True):
            if array is not None:
                chunk.append(array[start:stop])  # written in place by the function
            else:
                kept += scan
                chunk.append(np.asarray(scan))
                scan.clear()
        return chunk

    def arrays(self, done: int) -> list[np.ndarray]:
        """Every scan output's values of the ``done`` steps run."""
        out = []
        for array, kept in zip(self._arrays, self._lists, strict=True):
            if array is not None:
                out.append(array[:done].copy() if done < len(array) else array)
            else:
                out.append(np.asarray(kept, dtype=float) if not kept else np.asarray(kept))
        return out
