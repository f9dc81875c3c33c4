"""A port's declared ONNX type (mdf_loops/onnx/types.py parsed_type): a declaration that is
no ONNX type is one ModelError naming the port, never protobuf's ParseError."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import mdf_loops
from mdf_loops.errors import MdfLoopsError, ModelError

LEAKY = Path(__file__).resolve().parents[2] / "examples" / "leaky_integrator.json"


def test_a_declared_type_with_an_unknown_field_is_a_model_error_naming_the_port(tmp_path):
    document = json.loads(LEAKY.read_text())
    port = document["leaky_integrator"]["graphs"]["main"]["nodes"]["integrate"]["input_ports"]["I"]
    port["metadata"]["onnx_type"] = {"I": {"elemType": 11}}  # not a field of TypeProto
    path = tmp_path / "model.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ModelError, match="port 'I': metadata 'onnx_type' is not an ONNX type"):
        mdf_loops.mdf_to_onnx(mdf_loops.load_model(path))
    with pytest.raises(MdfLoopsError, match="port 'I'"):
        mdf_loops.run(path, {"x0": 0.0, "I": np.ones(3)}, backend="onnxruntime")
