"""mdf_loops/backends/optable.py: the operator tables of the JAX and torch lowerings."""

from __future__ import annotations

import pytest
from onnx import helper

from mdf_loops.backends.optable import NodeCall, OperatorTable, operator_key
from mdf_loops.errors import CompileError

BACKENDS = ["jax", "torch"]


def _table(backend: str) -> OperatorTable:
    pytest.importorskip(backend)
    if backend == "jax":
        from mdf_loops.backends.jax import interpreter  # noqa: F401  (fills the table)
        from mdf_loops.backends.jax.registry import OPS
    else:
        from mdf_loops.backends.torch import interpreter  # noqa: F401  (fills the table)
        from mdf_loops.backends.torch.registry import OPS
    return OPS


def test_keys_are_the_op_type_or_domain_and_op_type():
    assert operator_key(helper.make_node("Add", ["a", "b"], ["c"])) == "Add"
    assert operator_key(helper.make_node("Add", ["a"], ["c"], domain="ai.onnx")) == "Add"
    node = helper.make_node("Scaler", ["a"], ["c"], domain="ai.onnx.ml")
    assert operator_key(node) == "ai.onnx.ml::Scaler"


def test_a_table_registers_what_make_builds_and_refuses_an_unknown_operator_by_name():
    table: OperatorTable[tuple] = OperatorTable("toy", lambda fn, **options: (fn, options))
    table.op("Add", "Sum", twice=True)(abs)
    assert dict(table) == {"Add": (abs, {"twice": True}), "Sum": (abs, {"twice": True})}
    node = helper.make_node("Add", ["a", "b"], ["c"])
    assert table.lowering_of(node, "node 'n'") == (abs, {"twice": True})
    with pytest.raises(CompileError, match=r"node 'm': no toy lowering for x\.y::Mul; run it"):
        table.lowering_of(helper.make_node("Mul", [], [], domain="x.y"), "node 'm'")


def test_a_node_call_reads_attributes_with_text_as_str():
    node = helper.make_node("Pad", ["x"], ["y", "z"], mode="reflect", axes=[0, 2])
    call = NodeCall(node, "node 'p'")
    assert call.attr("mode") == "reflect" and call.attr("axes") == [0, 2]
    assert call.attr("value", 0.5) == 0.5 and call.n_outputs == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_both_tables_hold_the_sequence_and_optional_operators(backend):
    table = _table(backend)
    shared = {"SequenceEmpty", "SequenceConstruct", "SequenceLength", "SequenceAt",
              "SequenceInsert", "SequenceErase", "Optional", "OptionalHasElement",
              "OptionalGetElement", "ConcatFromSequence", "SplitToSequence"}
    assert shared <= set(table)
    with pytest.raises(CompileError, match=f"(?i)no {backend} lowering for ai.onnx::NoSuchOp"):
        table.lowering_of(helper.make_node("NoSuchOp", [], []), "node 'q'")
