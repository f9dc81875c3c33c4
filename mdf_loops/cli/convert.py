"""``mdf-loops import`` and ``mdf-loops export``: ONNX to MDF and back."""

from __future__ import annotations

import argparse
import functools

from mdf_loops.cli.common import (
    MdfLoopsError,
    add_input_option,
    add_limit_options,
    check_output,
    limited,
    load_valid_model,
    note,
)
from mdf_loops.cli.torch_import import TORCHSCRIPT_FILES
from mdf_loops.files import write_atomically


def add_import(subparsers, common) -> None:
    p = subparsers.add_parser(
        "import",
        parents=[common],
        help="convert an ONNX model (or a TorchScript module) to MDF JSON or YAML",
        description="Convert an ONNX model (with Scan, Loop and If at any depth) to an MDF "
        "model in JSON or YAML, chosen by the output file's extension. A TorchScript "
        "module saved with torch.jit.save (MODEL.pt) comes in with its loops as loop "
        "nodes; give an example of each argument of its forward with -i NAME=VALUE.",
    )
    p.add_argument("model", metavar="MODEL.onnx|MODEL.pt", help="the ONNX model or module")
    p.add_argument(
        "-o", "--output", required=True, metavar="OUT.json|OUT.yaml", help="the MDF file to write"
    )
    add_input_option(p)
    add_limit_options(p)
    p.set_defaults(command=_import)


def _import(args: argparse.Namespace) -> int:
    check_output(args.output, (".json", ".yaml", ".yml"), args.model)
    if not args.model.endswith((".onnx", *TORCHSCRIPT_FILES)):
        raise MdfLoopsError(
            f"{args.model}: expected an .onnx file, or a TorchScript module (.pt, .pth), to import"
        )
    if args.input and args.model.endswith(".onnx"):
        raise MdfLoopsError("--input gives examples to a TorchScript module; an .onnx needs none")

    text = limited(args, functools.partial(_imported, args), f"importing {args.model}")
    write_atomically(args.output, text)
    note(args, f"wrote {args.output}")
    return 0


def _exported(args: argparse.Namespace) -> bytes:
    from mdf_loops.cli.io import read_inputs
    from mdf_loops.model.interface import select_graph
    from mdf_loops.onnx.export import UntypedInputError, mdf_to_onnx

    model = load_valid_model(args.model)
    inputs = read_inputs(args.input, select_graph(model, args.graph))
    try:
        exported = mdf_to_onnx(model, graph=args.graph, example_inputs=inputs, opset=args.opset)
    except UntypedInputError as exc:  # name the command line's way to give an example
        raise UntypedInputError(
            exc.graph_id, exc.name, f"give an example value with -i {exc.name}=VALUE"
        ) from None
    return exported.SerializeToString()


def _imported(args: argparse.Namespace) -> str:
    from mdf_loops.cli.torch_import import import_torchscript
    from mdf_loops.onnx.import_ import onnx_to_mdf

    if args.model.endswith(TORCHSCRIPT_FILES):
        model = import_torchscript(args.model, args.input)
    else:
        model = onnx_to_mdf(args.model)
    return model.to_json() if args.output.endswith(".json") else model.to_yaml()


def add_export(subparsers, common) -> None:
    p = subparsers.add_parser(
        "export",
        parents=[common],
        help="convert an MDF model to ONNX",
        description="Convert an MDF model (JSON/YAML) with loop nodes to an ONNX model. Inputs "
        "given with --input serve as examples: their element types and shapes type "
        "the ONNX inputs the model does not declare.",
    )
    p.add_argument("model", metavar="MODEL", help="MDF JSON/YAML file")
    p.add_argument(
        "-o", "--output", required=True, metavar="OUT.onnx", help="the ONNX file to write"
    )
    add_input_option(p)
    p.add_argument(
        "--opset",
        type=int,
        metavar="N",
        help="ONNX opset to declare (default: the model's, else a recent one)",
    )
    p.add_argument("--graph", metavar="ID", help="the graph to export (default: the first)")
    add_limit_options(p)
    p.set_defaults(command=_export)


def _export(args: argparse.Namespace) -> int:
    check_output(args.output, (".onnx",), args.model)
    exported = limited(args, functools.partial(_exported, args), f"exporting {args.model}")
    write_atomically(args.output, exported)
    note(args, f"wrote {args.output}")
    return 0
