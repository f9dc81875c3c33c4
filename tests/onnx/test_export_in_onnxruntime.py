"""mdf_loops.onnx.export: a file mdf_to_onnx writes runs in onnxruntime wherever run answers.

The oracle is ``mdf_loops.run`` on the scheduler backend (every node through
modeci-mdf's engine); the exported model runs in a plain onnxruntime session, as
a user of the file would run it. Every example runs on its defaults and with each
sequence input cut to zero length (a Scan or Loop of zero steps, which onnxruntime
itself cannot run: the export carries the If that gives the reference answer).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx.helper import tensor_dtype_to_np_dtype

import mdf_loops
from conftest import assert_same, ort_run
from mdf_loops.model.inputs import default_input
from mdf_loops.workloads import elman_rnn

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.json"))


def _defaults(model) -> dict:
    """The value of every input the model gives a default."""
    graph = model.graphs[0]
    interface = mdf_loops.model.graph_interface(graph)
    ports = {p.id: p for n in graph.nodes for p in n.input_ports}
    found = {name: default_input([ports[port]]) for name, port in interface.inputs.items()}
    return {name: value for name, (has, value) in found.items() if has}


def _zero_length(inputs: dict) -> dict:
    """Each input of at least one dimension, cut to length 0 along its first axis."""
    return {name: np.asarray(v)[:0] if np.ndim(v) >= 1 else v for name, v in inputs.items()}


def _declared_dtype(value_type) -> np.dtype:
    """The element type of a tensor input, or of an optional one (an input with a default)."""
    if value_type.HasField("optional_type"):
        value_type = value_type.optional_type.elem_type
    return tensor_dtype_to_np_dtype(value_type.tensor_type.elem_type)


def _same_outputs(exported, feeds: dict, expected: dict) -> None:
    """onnxruntime on ``exported``, each input fed as the file declares it, gives ``expected``."""
    typed = {i.name: np.asarray(feeds[i.name], _declared_dtype(i.type))
             for i in exported.graph.input if i.name in feeds}
    got = ort_run(exported, typed)
    assert set(got) == set(expected)
    for name, value in expected.items():
        assert np.shape(got[name]) == np.shape(value), name
        np.testing.assert_allclose(np.asarray(got[name], np.float64),
                                   np.asarray(value, np.float64), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize("length", ["defaults", "zero length"])
def test_an_exported_example_runs_in_onnxruntime_where_run_answers(path, length):
    model = mdf_loops.load_model(path)
    inputs = _defaults(model)
    if length == "zero length":
        inputs = _zero_length(inputs)
    try:
        expected = mdf_loops.run(model, inputs, backend="scheduler")
    except mdf_loops.MdfLoopsError:
        pytest.skip("run gives no answer on these inputs, so the export owes none")
    typed = {name: np.asarray(v) for name, v in inputs.items()}
    exported = mdf_loops.mdf_to_onnx(model, example_inputs=typed)
    _same_outputs(exported, typed, expected)


def test_an_imported_rnn_of_zero_steps_exports_and_runs():
    rnn = elman_rnn(steps=4)
    model = mdf_loops.onnx_to_mdf(rnn.model)
    empty = {"h0": rnn.inputs["h0"], "X": rnn.inputs["X"][:0]}
    exported = mdf_loops.mdf_to_onnx(model)
    expected = mdf_loops.run(model, empty, backend="scheduler")
    assert expected["H"].shape == (0, rnn.inputs["h0"].shape[0])
    assert_same(ort_run(exported, empty)["H"], expected["H"])
    assert_same(ort_run(exported, empty)["h_last"], rnn.inputs["h0"])  # the initial state
