"""What a file can make drawing cost: a picture's size is counted before Graphviz sees
it, and Graphviz's ``dot`` program runs under a wall-time limit.

Graphviz's layout time grows much faster than the drawing: a valid model of 1,000
nodes and 24,000 edges keeps ``dot`` busy for minutes. :func:`check_drawable` refuses a
graph whose nodes and edges (bodies at every depth included) number more than
``max_drawn_items``; :func:`run_dot` kills ``dot`` (and anything it started) after
``max_program_seconds``. Both limits are fields of :class:`mdf_loops.safety.Limits`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess

from modeci_mdf.mdf import Graph

from mdf_loops.errors import MdfLoopsError, ResourceLimitError
from mdf_loops.model.convention import loop_bodies
from mdf_loops.ops.common import current_limits, how_to_raise

__all__ = ["drawn_items", "check_drawable", "run_dot"]


def drawn_items(graph: Graph, stop_after: int) -> tuple[int, int, bool]:
    """(nodes, edges, all counted) of ``graph`` and of its loop bodies at every depth;
    counting stops once nodes and edges together pass ``stop_after`` (so a body that
    contains itself ends it too)."""
    nodes = edges = 0
    pending = [graph]
    while pending and nodes + edges <= stop_after:
        current = pending.pop()
        nodes, edges = nodes + len(current.nodes), edges + len(current.edges)
        for node in current.nodes:
            pending.extend(loop_bodies(node).values())
    return nodes, edges, not pending


def check_drawable(graph: Graph, where: str) -> None:
    """Raise :class:`ResourceLimitError` when ``graph`` is too large to draw
    (``max_drawn_items``); ``where`` names the graph in the message."""
    limit = current_limits().max_drawn_items
    nodes, edges, complete = drawn_items(graph, limit)
    if nodes + edges > limit:
        counted = "has" if complete else "has at least"
        raise ResourceLimitError(
            f"{where} {counted} {nodes} nodes and {edges} edges (loop bodies included), "
            f"over the drawing limit of {limit} nodes and edges together (max_drawn_items); "
            "Graphviz could take many minutes to lay it out; if the picture is wanted, "
            f"{how_to_raise('max_drawn_items')}"
        )


def run_dot(source: str, image_format: str, where: str) -> bytes:
    """The picture Graphviz's ``dot`` draws of ``source`` in ``image_format``; ``dot`` is
    killed after ``max_program_seconds`` of wall time (:class:`ResourceLimitError`)."""
    program = shutil.which("dot")
    if program is None:
        raise MdfLoopsError(
            "drawing needs Graphviz's 'dot' program on the PATH "
            "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz)"
        )
    seconds = current_limits().max_program_seconds
    try:
        process = subprocess.Popen(
            [program, f"-T{image_format}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: killed with all it started
        )
    except OSError as exc:
        raise MdfLoopsError(f"{where}: cannot start Graphviz's dot ({exc.strerror})") from None
    try:
        image, errors = process.communicate(source.encode("utf-8"), timeout=seconds)
    except subprocess.TimeoutExpired:
        _kill(process)
        raise ResourceLimitError(
            f"{where}: Graphviz's dot was still laying out the picture after {seconds} s "
            f"and was stopped (max_program_seconds); nothing was written. Draw a smaller "
            f"graph, or {how_to_raise('max_program_seconds')}"
        ) from None
    except BaseException:
        _kill(process)
        raise
    if process.returncode != 0:
        reason = errors.decode("utf-8", "replace").strip().splitlines()
        last = reason[-1] if reason else f"exit status {process.returncode}"
        raise MdfLoopsError(f"{where}: Graphviz failed: {last}")
    return image


def _kill(process: subprocess.Popen) -> None:
    """End ``process`` and its process group, and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.communicate()
