"""Pictures of MDF models with loops, drawn with Graphviz.

modeci-mdf's own ``modeci_mdf.interfaces.graphviz`` draws a loop node as one box
and its body not at all. Here

* each Scan/Loop/If node is a blue cluster labelled with the operator and its
  attributes (trip count, condition, num_scan_inputs, axes, directions);
* the cluster holds the node's input ports (small ovals, above) and output ports
  (below), and one grey cluster per body graph (an If has two);
* a body starts with its formal inputs (yellow houses, in order, each with its
  role: state, scan element, iteration number, condition, carried value);
  dashed blue edges bind the loop's inputs to them and the body's formal
  outputs to the loop's outputs ("final" values and "stacked" scan outputs);
  dotted edges carry outer-scope reads into the body; a dashed grey "next" edge
  runs from each new state or carried value back to its formal input;
* nested loops are nested clusters, drawn the same way.

:func:`to_graphviz` gives the ``graphviz.Digraph``; :func:`render` writes a PNG,
SVG or PDF (chosen by the file extension) with Graphviz's ``dot`` program. How the
pieces are drawn is in :mod:`mdf_loops.rendering`. A model file decides how much
Graphviz has to lay out, so a drawing of more than :data:`MAX_STATEMENTS` nodes,
edges and labels is refused before ``dot`` starts, and ``dot`` is stopped after
:data:`DOT_SECONDS` seconds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import graphviz
from modeci_mdf.mdf import Model

from mdf_loops.errors import MdfLoopsError
from mdf_loops.files import write_atomically
from mdf_loops.model.interface import load_model
from mdf_loops.rendering.graphs import Drawing
from mdf_loops.rendering.labels import html_label, text

__all__ = [
    "to_graphviz",
    "render",
    "picture",
    "image_format",
    "FORMATS",
    "MAX_STATEMENTS",
    "DOT_SECONDS",
]

#: file extensions :func:`render` writes, and the Graphviz output format of each
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
#: the most statements (nodes, edges, labels) a drawing may hand to Graphviz
MAX_STATEMENTS = 10_000
#: how long Graphviz may take to lay out and draw one picture
DOT_SECONDS = 60


def to_graphviz(model: Model | str | os.PathLike, graph: str | None = None) -> graphviz.Digraph:
    """A Graphviz drawing of one graph of ``model`` (default: the first), loops drawn open.

    Args:
        model: an MDF ``Model``, or a path to MDF JSON/YAML or ONNX.
        graph: id of the graph to draw.
    """
    model = load_model(model)
    if not model.graphs:
        raise MdfLoopsError(f"model '{model.id}' has no graph to draw")
    target = (
        model.graphs[0] if graph is None else next((g for g in model.graphs if g.id == graph), None)
    )
    if target is None:
        raise MdfLoopsError(f"model '{model.id}' has no graph '{graph}'")
    dot = graphviz.Digraph(name=model.id)
    dot.attr(
        label=html_label(f"<b>{text(model.id)}</b>: graph {text(target.id)}"),
        labelloc="t",
        fontname="Helvetica",
        fontsize="16",
        newrank="true",
    )
    dot.attr("node", fontname="Helvetica", fontsize="11")
    dot.attr("edge", fontname="Helvetica", fontsize="9", color="#555555")
    drawing = Drawing(dot)
    drawing.top_level(target)
    drawing.finish()
    return dot


def render(
    model: Model | str | os.PathLike, path: str | os.PathLike, graph: str | None = None
) -> Path:
    """Draw ``model`` into ``path``: PNG, SVG or PDF by its extension. Returns the path.

    Needs Graphviz's ``dot`` program (Debian/Ubuntu: ``apt-get install graphviz``).
    The file is written through a temporary file, so an earlier file survives a failure.
    """
    path = Path(path)
    return write_atomically(path, picture(model, image_format(path), graph, where=str(path)))


def image_format(path: str | os.PathLike) -> str:
    """The Graphviz format :func:`render` writes to ``path``, by its extension."""
    found = FORMATS.get(Path(path).suffix.lower())
    if found is None:
        raise MdfLoopsError(
            f"{path}: cannot tell the picture format; use one of {', '.join(FORMATS)}"
        )
    return found


def picture(
    model: Model | str | os.PathLike,
    image_format: str,
    graph: str | None = None,
    where: str = "the picture",
) -> bytes:
    """The drawing of ``model`` (:func:`to_graphviz`) as ``"png"``, ``"svg"`` or ``"pdf"``
    bytes; ``where`` names the picture in errors."""
    dot = to_graphviz(model, graph)
    statements = len(dot.body)
    if statements > MAX_STATEMENTS:
        raise MdfLoopsError(
            f"{where}: the drawing has {statements} nodes, edges and labels, over the "
            f"{MAX_STATEMENTS} Graphviz lays out in reasonable time; draw one graph "
            "(graph=..., --graph) or a smaller model"
        )
    return _run_dot(dot.source, image_format, where)


def _run_dot(source: str, image_format: str, where: str) -> bytes:
    """Graphviz's ``dot`` on ``source``, stopped after :data:`DOT_SECONDS` seconds."""
    executable = shutil.which("dot")
    if executable is None:
        raise MdfLoopsError(
            "drawing needs Graphviz's 'dot' program on the PATH "
            "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz)"
        )
    try:
        done = subprocess.run(
            [executable, f"-T{image_format}"],
            input=source.encode("utf-8"),
            capture_output=True,
            timeout=DOT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise MdfLoopsError(
            f"{where}: Graphviz took longer than {DOT_SECONDS} s and was stopped; "
            "draw one graph (graph=..., --graph) or a smaller model"
        ) from None
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        failure = reason[-1] if reason else f"exit status {done.returncode}"
        raise MdfLoopsError(f"{where}: Graphviz failed: {failure}")
    return done.stdout
