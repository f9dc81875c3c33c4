"""The progress line of ``mdf-loops run`` on a terminal."""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO


def shows_progress(args: argparse.Namespace) -> bool:
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


@contextmanager
def progress(stream: TextIO) -> Iterator[None]:
    """Show progress on ``stream`` (a terminal) while the block runs: the loop iterations
    the scheduler reports, else (onnxruntime runs a model as one call) the elapsed time,
    redrawn by a background thread."""
    from mdf_loops import ops

    display = ProgressLine(stream)
    stop = threading.Event()
    clock = threading.Thread(
        target=_tick, args=(display, stop), daemon=True, name="mdf-loops progress"
    )
    clock.start()
    observe: Callable | None = getattr(ops, "observe_iterations", None)
    try:
        if observe is None:  # the engine offers no iteration hook
            yield
        else:
            with observe(display.update):
                yield
    finally:
        stop.set()
        clock.join()
        display.clear()


def _tick(display: ProgressLine, stop: threading.Event) -> None:
    while not stop.wait(0.25):
        display.elapsed()


class ProgressLine:
    """One status line, redrawn at most ten times a second after the first half second.

    It shows the innermost running loop with the iterations of the loops around it,
    e.g. ``node 'trials' > iteration 5/200 > node 'steps': iteration 96/100``.
    """

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.started = time.monotonic()
        self.last = 0.0
        self.last_iteration = 0.0
        self.width = 0
        self.totals: dict[str, int | None] = {}
        self.lock = threading.Lock()
        self.shown = ""

    def elapsed(self) -> None:
        """Show the time since the start (after half a second), when no loop iteration was
        shown for a second."""
        now = time.monotonic()
        seconds = now - self.started
        if seconds < 0.5 or now - self.last_iteration < 1.0:
            return
        text = f"running: {seconds:.1f} s" if seconds < 10 else f"running: {seconds:,.0f} s"
        if text != self.shown:
            self.show(text)

    def update(self, location: str, done: int, total: int | None) -> None:
        """Called as an iteration of the loop at ``location`` starts (``done`` before it)."""
        self.totals[location] = total
        now = time.monotonic()
        if now - self.started < 0.5 or now - self.last < 0.1:
            return
        self.last = self.last_iteration = now
        self.show(f"{self.describe(location)}: iteration {_of(done, total)}")

    def describe(self, location: str) -> str:
        """``location`` with the total of each enclosing loop after its iteration number."""
        parts = location.split(" > ") if location else ["loop"]
        for k, part in enumerate(parts):
            total = self.totals.get(" > ".join(parts[:k]))
            if k and part.startswith("iteration ") and total is not None:
                parts[k] = f"iteration {_of(int(part.split()[1]), total)}"
        return " > ".join(parts)

    def show(self, text: str) -> None:
        width = _terminal_width(self.stream) - 1
        text = text if len(text) <= width else "..." + text[-(width - 3) :]
        with self.lock:
            self.stream.write("\r" + text.ljust(self.width))
            self.stream.flush()
            self.width, self.shown = len(text), text

    def clear(self) -> None:
        with self.lock:
            if self.width:
                self.stream.write("\r" + " " * self.width + "\r")
                self.stream.flush()
                self.width, self.shown = 0, ""


def _of(done: int, total: int | None) -> str:
    return f"{done:,}" if total is None else f"{done:,}/{total:,}"


def _terminal_width(stream: TextIO) -> int:
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        columns = 0
    return columns if columns >= 20 else 80
