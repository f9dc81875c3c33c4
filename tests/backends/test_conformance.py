"""The ONNX backend node test cases with Loop, Scan or If, run through onnx_to_mdf + run.

The cases are collected from the installed onnx package when the tests are
collected (see ``conftest.control_flow_cases``); their expected outputs are the
oracle: values, element types and shapes, sequences as lists, ``None`` for an
empty optional.
"""

from __future__ import annotations

import pytest

import mdf_loops
from conftest import assert_same, control_flow_cases, run_mdf

EXPECTED_CASE_COUNT = 38


def test_selection_finds_every_control_flow_case():
    cases = control_flow_cases()
    assert len(cases) == EXPECTED_CASE_COUNT, sorted(cases)
    for name in ("test_loop11", "test_loop13_seq", "test_loop16_seq_none", "test_scan_sum",
                 "test_scan9_sum", "test_if", "test_if_seq", "test_if_opt"):
        assert name in cases


@pytest.mark.parametrize("name", sorted(control_flow_cases()))
def test_case(name):
    case = control_flow_cases()[name]
    model = mdf_loops.onnx_to_mdf(case.model)
    input_names = [vi.name for vi in case.model.graph.input]
    output_names = [vi.name for vi in case.model.graph.output]
    assert case.data_sets, f"{name} has no data"
    for inputs, expected_outputs in case.data_sets:
        results = run_mdf(model, dict(zip(input_names, inputs)))
        assert sorted(results) == sorted(output_names)
        for output_name, expected in zip(output_names, expected_outputs):
            assert_same(results[output_name], expected, rtol=case.rtol, atol=case.atol)
