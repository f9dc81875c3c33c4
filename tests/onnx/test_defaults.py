"""mdf_loops.onnx.defaults: an input's default is an optional input, and loading logs nothing.

onnxruntime logs a WARNING on load for each initializer that is also a graph input
(the form ONNX gives defaults); the exported files must load silently, still run
with no feeds (the defaults) and still take a value for each input. The oracle is
``mdf_loops.run`` on the scheduler; onnxruntime's log is read from the process's
standard error, where it writes it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime
import pytest

import mdf_loops
from conftest import ort_run
from mdf_loops.onnx.export import export_model

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.json"))
LEAKY = Path(__file__).resolve().parents[2] / "examples" / "leaky_integrator.json"


def _load_log(model, capfd) -> str:
    """What onnxruntime writes to standard error while it loads ``model`` (default options)."""
    capfd.readouterr()
    onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return capfd.readouterr().err


def test_the_initializer_form_of_a_default_is_what_onnxruntime_warns_of(capfd):
    """The check below can fail: the plain export (initializer + input) is warned of."""
    plain = export_model(mdf_loops.load_model(LEAKY)).model
    assert {t.name for t in plain.graph.initializer} == {"x0", "I"}
    assert "Initializer x0 appears in graph inputs" in _load_log(plain, capfd)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_exported_example_loads_without_a_log_line(path, capfd):
    exported = mdf_loops.mdf_to_onnx(mdf_loops.load_model(path))
    assert not exported.graph.initializer or not (
        {t.name for t in exported.graph.initializer} & {i.name for i in exported.graph.input})
    assert _load_log(exported, capfd) == ""


def test_a_default_is_used_when_left_out_and_replaced_when_fed():
    model = mdf_loops.load_model(LEAKY)
    exported = mdf_loops.mdf_to_onnx(model)
    assert [i.type.WhichOneof("value") for i in exported.graph.input] == ["optional_type"] * 2
    defaults = mdf_loops.run(model, backend="scheduler")
    for name, value in ort_run(exported, {}).items():
        np.testing.assert_allclose(value, defaults[name], rtol=1e-12)
    fed = {"x0": np.array(0.5), "I": np.linspace(0.0, 1.0, 7)}
    expected = mdf_loops.run(model, fed, backend="scheduler")
    for name, value in ort_run(exported, fed).items():
        np.testing.assert_allclose(value, expected[name], rtol=1e-12)


def test_an_export_before_opset_15_keeps_its_initializers():
    """The optional operators came in opset 15: an older export keeps the ONNX form."""
    exported = mdf_loops.mdf_to_onnx(mdf_loops.load_model(LEAKY), opset=13)
    assert {t.name for t in exported.graph.initializer} == {"x0", "I"}
    out = ort_run(exported, {})
    assert out["integrate.trace"].shape == (50,)
