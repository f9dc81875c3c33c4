"""``mdf-loops render``: draw a model, loops open."""

from __future__ import annotations

import argparse
import functools

from mdf_loops.cli.common import (
    add_limit_options,
    check_model_path,
    check_output,
    limited,
    note,
    positive_int,
)
from mdf_loops.files import write_atomically


def add(subparsers, common) -> None:
    p = subparsers.add_parser(
        "render",
        parents=[common],
        help="draw a model, loops open, as PNG, SVG or PDF",
        description="Draw a model with Graphviz: each loop node a cluster holding its body, "
        "nested loops nested clusters. The format follows the output's extension.",
    )
    p.add_argument("model", metavar="MODEL", help="MDF JSON/YAML or ONNX file")
    p.add_argument(
        "-o", "--output", required=True, metavar="FILE.png|svg|pdf", help="the picture to write"
    )
    p.add_argument("--graph", metavar="ID", help="the graph to draw (default: the first)")
    p.add_argument(
        "--max-drawn-items",
        type=positive_int,
        metavar="N",
        help="refuse a graph of more nodes and edges, bodies included (default 2,000); "
        "see docs/safety.md",
    )
    p.add_argument(
        "--max-program-seconds",
        type=positive_int,
        metavar="SECONDS",
        help="stop Graphviz's dot after this long (default 60)",
    )
    add_limit_options(p)
    p.set_defaults(command=_render)


def _render(args: argparse.Namespace) -> int:
    from mdf_loops.render import FORMATS, image_format, picture

    check_output(args.output, tuple(FORMATS), args.model)
    check_model_path(args.model)
    image = limited(
        args,
        functools.partial(
            picture,
            args.model,
            image_format(args.output),
            args.graph,
            where=args.output,
            max_drawn_items=args.max_drawn_items,
            max_program_seconds=args.max_program_seconds,
        ),
        f"drawing {args.model}",
    )
    write_atomically(args.output, image)
    note(args, f"wrote {args.output}")
    return 0
