"""A Scan whose scan_input_axes or scan_output_axes lists another number of axes than it has
scan inputs or outputs: one ModelError naming the node and the attribute, on export and on
the compiled backends (the scheduler's own check is in tests/test_errors.py)."""

from __future__ import annotations

import numpy as np
import pytest

import mdf_loops
from conftest import expression_node, loop_node, mdf_body, mdf_model
from mdf_loops.onnx.export import mdf_to_onnx

INPUTS = {"s0": np.zeros(2), "xs": np.ones((3, 2))}


def _scan(**attributes):
    step = expression_node("step", ["s", "x"], {"s_next": "s + x"})
    body = mdf_body("accumulate", [step], ["s", "x"], ["step.s_next", "step.s_next"])
    args = {"initial_state_and_scan_inputs": "[s0, xs]"}
    return mdf_model(
        loop_node("my_scan", "Scan", args, {"body": body}, ["s0", "xs"], 2,
                  {"num_scan_inputs": 1, **attributes})
    )


CASES = [
    ("scan_input_axes", [0, 0], "expected 1 (one per scan input)"),
    ("scan_output_axes", [0, 1], "expected 1 (one per scan output)"),
]


@pytest.mark.parametrize("attribute,axes,fragment", CASES)
def test_export_refuses_an_axes_list_of_the_wrong_length(attribute, axes, fragment):
    with pytest.raises(mdf_loops.errors.ModelError) as info:
        mdf_to_onnx(_scan(**{attribute: axes}), example_inputs=INPUTS)
    message = str(info.value)
    for part in ("my_scan", f"{attribute} has 2 entries", fragment):
        assert part in message, message


@pytest.mark.parametrize("backend", ["onnxruntime", "jax"])
@pytest.mark.parametrize("attribute,axes,fragment", CASES)
def test_compiled_backends_name_the_attribute(backend, attribute, axes, fragment):
    if backend == "jax":
        pytest.importorskip("jax")
    with pytest.raises(mdf_loops.MdfLoopsError) as info:
        mdf_loops.run(_scan(**{attribute: axes}), INPUTS, backend=backend)
    assert "my_scan" in str(info.value) and f"{attribute} has 2 entries" in str(info.value)


def test_axes_of_the_right_length_still_export_and_agree_with_numpy():
    model = _scan(scan_input_axes=[1], scan_output_axes=[1])
    xs = np.arange(6.0).reshape(2, 3)  # scanned along axis 1: 3 steps of 2 values
    outputs = mdf_loops.run(model, {"s0": np.zeros(2), "xs": xs}, backend="onnxruntime")
    running = np.cumsum(xs, axis=1)
    np.testing.assert_allclose(outputs["my_scan.out0"], running[:, -1])
    np.testing.assert_allclose(outputs["my_scan.out1"], running)
