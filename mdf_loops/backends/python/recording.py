"""The values a time-loop function records, chunk by chunk, as numpy arrays.

The function appends each step's values to plain lists (a list's ``append`` is the
cheapest store Python has); after each chunk of steps, the values of a float64 or int64
scan output move into one numpy array made for all the steps (8 bytes a step), so a
long run holds one chunk of Python numbers at most. Other values (arrays, values of
no declared type) stay in their list and are stacked at the end.
"""

from __future__ import annotations

from array import array as typed
from typing import Any

import numpy as np

__all__ = ["Recording"]

#: ``array`` typecode of a scan output (``LoopSource.scan_codes``) -> numpy dtype
_DTYPES = {"d": np.float64, "q": np.int64}


class Recording:
    """The scan outputs of one run of at most ``steps`` steps; ``scans`` are what the
    function appends to (one list per scan output, emptied by :meth:`move`)."""

    def __init__(self, codes: tuple[str | None, ...], steps: int, time_made: bool = False):
        """``time_made``: the function leaves the first scan output (the time) empty."""
        self.scans: list[list[Any]] = [[] for _ in codes]
        self._codes = codes
        self._arrays = [
            np.empty(steps, _DTYPES[c]) if c in _DTYPES and not (time_made and k == 0) else None
            for k, c in enumerate(codes)
        ]
        self._lists: list[list[Any]] = [[] for _ in codes]

    def move(self, start: int, stop: int) -> list[np.ndarray]:
        """After the steps ``start`` to ``stop``: their values moved out of the scans, and
        returned (one array per scan output, rows = those steps)."""
        chunk = []
        parts = zip(self._codes, self.scans, self._arrays, self._lists, strict=True)
        for code, scan, array, kept in parts:
            if array is not None:
                # through an ``array`` of its type: a float in an int64 output is a
                # TypeError, as it was appended (numpy would cut it to an integer)
                array[start:stop] = np.frombuffer(typed(code or "d", scan), array.dtype)
                chunk.append(array[start:stop])
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
