"""mdf_loops.validation.inputs: validate reports the input declarations and defaults run refuses.

The oracle is ``run`` itself: on the same file it must refuse with the message
validate gives (both come from mdf_loops.model.inputs), at the port validate names.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import needs_input_port_fields

import mdf_loops
from mdf_loops.errors import MdfLoopsError
from mdf_loops.validation.report import validate

ROOT = Path(__file__).resolve().parents[2]
LEAKY = json.loads((ROOT / "examples" / "leaky_integrator.json").read_text())
PORTS = "graphs.main.nodes.integrate.input_ports"


def _written(tmp_path: Path, edit) -> Path:
    document = copy.deepcopy(LEAKY)
    edit(document["leaky_integrator"]["graphs"]["main"]["nodes"]["integrate"]["input_ports"])
    path = tmp_path / "model.json"
    path.write_text(json.dumps(document))
    return path


def _run_refusal(path: Path) -> str:
    with pytest.raises(MdfLoopsError) as caught:
        mdf_loops.run(str(path), backend="scheduler")
    return str(caught.value)


@needs_input_port_fields
def test_a_default_that_does_not_fit_its_declaration(tmp_path):
    path = _written(tmp_path, lambda ports: ports["I"]["default_value"].__setitem__(3, "x"))
    (problem,) = validate(path)
    assert problem.path == f"{PORTS}.I.default_value"
    assert problem.message.startswith("input 'I': ")
    assert _run_refusal(path) == problem.message


@needs_input_port_fields
def test_a_default_of_another_rank_than_declared(tmp_path):
    path = _written(tmp_path, lambda ports: ports["x0"].update(default_value=[0.0, 1.0]))
    (problem,) = validate(path)
    assert problem.path == f"{PORTS}.x0.default_value"
    assert "expected shape []" in problem.message
    assert _run_refusal(path) == problem.message


def test_an_unreadable_onnx_type(tmp_path):
    path = _written(tmp_path, lambda ports: ports["I"]["metadata"]["onnx_type"]["tensorType"]
                    .update(shape={"dim": 3.5}))
    (problem,) = validate(path)
    assert problem.path == f"{PORTS}.I.metadata"
    assert "metadata 'onnx_type' is not an ONNX type" in problem.message
    assert problem.message in _run_refusal(path)


def test_fitting_defaults_give_no_problem_and_run(tmp_path):
    path = _written(tmp_path, lambda ports: ports["x0"].update(default_value=0.5))
    assert validate(path) == []
    assert mdf_loops.run(str(path), backend="scheduler")["integrate.trace"].shape == (50,)
