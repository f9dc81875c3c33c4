"""An MDF graph planned for torch: exported to ONNX once, then planned into a :class:`Program`.

:func:`plan` is the one way a model becomes torch code, for :func:`mdf_loops.to_pytorch`
(its trainable form: constants found as parameters) and for ``run(backend="torch")``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import onnx
from google.protobuf.message import Error as ProtobufError
from modeci_mdf.mdf import Graph, Model

from mdf_loops.backends.torch.interpreter import ConstantTable, Program
from mdf_loops.backends.torch.parameters import Trained, constant_sites, lift_parameters
from mdf_loops.errors import CompileError, ModelError
from mdf_loops.onnx.export import export_model

__all__ = ["TorchPlan", "plan"]


@dataclass
class TorchPlan:
    """What a torch module runs: the program, its constants and inputs, and what it trains."""

    graph_id: str
    program: Program
    table: ConstantTable
    #: the exported model's inputs and their types (the caller's, then the lifted parameters)
    input_types: dict[str, onnx.TypeProto]
    output_names: tuple[str, ...]
    #: trained values: lifted parameters by input name, onnx::Constant nodes by constant key
    lifted: dict[str, Trained]
    constants: dict[str, Trained]


def plan(
    model: Model,
    target: Graph,
    example_inputs: Mapping[str, Any] | None,
    *,
    trainable: bool,
    sized: bool = False,
) -> TorchPlan:
    """Export ``target`` (its floating-point constants made trainable when asked) and plan it.

    ``sized``: a model that is not trusted; its operators are sized and its loops' values
    held to the limits as it runs (:mod:`.limits`).

    Raises :class:`~mdf_loops.errors.CompileError` naming the node when a node has no torch
    lowering, or the model cannot be exported to ONNX.
    """
    exported_model, lifted = lift_parameters(model, target) if trainable else (model, {})
    try:
        exported = export_model(
            exported_model, graph=target.id, example_inputs=example_inputs
        ).model
    except ModelError as exc:
        raise CompileError(f"cannot export to ONNX: {exc}") from exc
    except (RecursionError, ValueError, TypeError, ProtobufError) as exc:  # nesting limits
        raise CompileError(f"cannot export to ONNX: {type(exc).__name__}: {exc}") from exc
    opset = next((o.version for o in exported.opset_import if o.domain in ("", "ai.onnx")), 21)
    table = ConstantTable()
    program = Program(exported.graph, opset, table, sized=sized)
    constants = constant_sites(target, table.sites) if trainable else {}
    return TorchPlan(
        target.id,
        program,
        table,
        {i.name: i.type for i in exported.graph.input},
        tuple(o.name for o in exported.graph.output),
        lifted,
        constants,
    )
