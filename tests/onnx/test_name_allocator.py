"""The one name allocator (mdf_loops/onnx/builder.py NameAllocator) and its users."""

from __future__ import annotations

import keyword

from conftest import BOOL, FLOAT, onnx_model, value_info
from onnx import helper as oh

import mdf_loops
from mdf_loops.onnx.builder import NameAllocator


def test_fresh_names_count_up_from_two_and_respect_reserved_names():
    names = NameAllocator(["x"])
    assert [names.fresh("x"), names.fresh("x"), names.fresh("y"), names.fresh("")] == ["x_2", "x_3", "y", "v"]
    assert names.reserve("z") == "z" and names.taken("z") and names.fresh("z") == "z_2"


def test_normalize_turns_hints_into_acceptable_names():
    names = NameAllocator(normalize=lambda hint: hint.replace("/", "_"))
    assert [names.fresh("a/b"), names.fresh("a_b")] == ["a_b", "a_b_2"]


def test_of_graph_takes_every_value_name_of_the_graph_and_its_subgraphs():
    body = oh.make_graph([oh.make_node("Identity", ["x"], ["inner"])], "b", [],
                         [value_info("inner", FLOAT, [])])
    model = onnx_model([oh.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)],
                       [value_info("c", BOOL, [])], [value_info("y", FLOAT, [])])
    names = NameAllocator.of_graph(model.graph)
    assert names.fresh("inner") == "inner_2" and names.fresh("c") == "c_2"


def test_imported_ids_are_identifiers_and_never_keywords():
    model = onnx_model([oh.make_node("Relu", ["in/put"], ["lambda"], name="0node")],
                       [value_info("in/put", FLOAT, [2])], [value_info("lambda", FLOAT, [2])])
    mdf = mdf_loops.onnx_to_mdf(model)
    ids = [n.id for n in mdf.graphs[0].nodes]
    ports = [p.id for n in mdf.graphs[0].nodes for p in n.input_ports + n.output_ports]
    for name in ids + ports:
        assert name.isidentifier() and not keyword.iskeyword(name), name
