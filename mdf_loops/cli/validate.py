"""``mdf-loops validate``: check a model and list every problem."""

from __future__ import annotations

import argparse
import functools
import sys

from mdf_loops.cli.common import add_limit_options, check_model_path, count, limited, note


def add(subparsers, common) -> None:
    p = subparsers.add_parser(
        "validate",
        parents=[common],
        help="check a model and list every problem",
        description="Check a model against the JSON Schema of the loop-node convention and its "
        "rules (body signatures, axes, ids, edges, references). Prints each problem "
        "with its path in the model; exit status 1 when there is any.",
    )
    p.add_argument("model", metavar="MODEL", help="MDF JSON/YAML or ONNX file")
    add_limit_options(p)
    p.set_defaults(command=_validate)


def _validate(args: argparse.Namespace) -> int:

    check_model_path(args.model)
    problems = limited(args, functools.partial(_problems, args.model), f"validating {args.model}")
    for problem in problems:
        print(problem)
    if problems:
        print(f"mdf-loops: {args.model}: {count(len(problems), 'problem')}", file=sys.stderr)
        return 1
    note(args, f"{args.model}: valid", stream=sys.stdout)
    return 0


def _problems(path: str) -> list[str]:
    from mdf_loops.validation.report import validate

    return [str(p) for p in validate(path)]
