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
pieces are drawn is in :mod:`mdf_loops.rendering`. A graph of more than
``max_drawn_items`` nodes and edges is refused before Graphviz sees it, and ``dot`` is
stopped after ``max_program_seconds`` (:mod:`mdf_loops.rendering.bounds`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import graphviz
from modeci_mdf.mdf import Model

from mdf_loops.errors import MdfLoopsError
from mdf_loops.files import write_atomically
from mdf_loops.model.interface import load_model, select_graph
from mdf_loops.ops.common import limits
from mdf_loops.rendering.bounds import check_drawable, run_dot
from mdf_loops.rendering.graphs import Drawing
from mdf_loops.rendering.labels import html_label, text

__all__ = [
    "to_graphviz",
    "render",
    "picture",
    "image_format",
    "FORMATS",
]

#: file extensions :func:`render` writes, and the Graphviz output format of each
FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}


def to_graphviz(model: Model | str | os.PathLike, graph: str | None = None) -> graphviz.Digraph:
    """A Graphviz drawing of one graph of ``model`` (default: the first), loops drawn open.

    Args:
        model: an MDF ``Model``, or a path to MDF JSON/YAML or ONNX.
        graph: id of the graph to draw.
    """
    model = load_model(model)
    target = select_graph(model, graph)
    check_drawable(target, f"graph '{target.id}' of model '{model.id}'")
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
    model: Model | str | os.PathLike,
    path: str | os.PathLike,
    graph: str | None = None,
    *,
    max_drawn_items: int | None = None,
    max_program_seconds: int | None = None,
) -> Path:
    """Draw ``model`` into ``path``: PNG, SVG or PDF by its extension. Returns the path.

    Needs Graphviz's ``dot`` program (Debian/Ubuntu: ``apt-get install graphviz``).
    The file is written through a temporary file, so an earlier file survives a failure.
    ``max_drawn_items`` and ``max_program_seconds`` change those limits for this call
    (:class:`mdf_loops.safety.Limits`).
    """
    path = Path(path)
    image = picture(
        model,
        image_format(path),
        graph,
        where=str(path),
        max_drawn_items=max_drawn_items,
        max_program_seconds=max_program_seconds,
    )
    return write_atomically(path, image)


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
    *,
    max_drawn_items: int | None = None,
    max_program_seconds: int | None = None,
) -> bytes:
    """The drawing of ``model`` (:func:`to_graphviz`) as ``"png"``, ``"svg"`` or ``"pdf"``
    bytes; ``where`` names the picture in errors. The limits as in :func:`render`."""
    with _drawing_limits(max_drawn_items, max_program_seconds):
        return run_dot(to_graphviz(model, graph).source, image_format, where)


@contextmanager
def _drawing_limits(max_drawn_items: int | None, max_program_seconds: int | None) -> Iterator[None]:
    given = {"max_drawn_items": max_drawn_items, "max_program_seconds": max_program_seconds}
    with limits(**{name: value for name, value in given.items() if value is not None}):
        yield
