"""Every tensor of an ONNX file that keeps its data in another file passes one gate
(mdf_loops/safety/onnx_files.py): dense, sparse initializers, a Constant's
``sparse_value``, in bodies; never read from the current directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx import helper as oh

import mdf_loops
from mdf_loops.errors import ModelError

SECRET = b"SECRET-KEY-BYTES-0123456789abcdef"
_FLOATS = len(SECRET) // 4  # the secret read as float32 values


def _external_values(location: str) -> TensorProto:
    values = TensorProto(name="v", data_type=TensorProto.FLOAT, dims=[_FLOATS])
    values.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("length", str(4 * _FLOATS))):
        entry = values.external_data.add()
        entry.key, entry.value = key, value
    return values


def _sparse(location: str) -> onnx.SparseTensorProto:
    indices = oh.make_tensor("i", TensorProto.INT64, [_FLOATS], list(range(_FLOATS)))
    return oh.make_sparse_tensor(_external_values(location), indices, [_FLOATS])


def _sparse_initializer_model(location: str) -> onnx.ModelProto:
    graph = oh.make_graph(
        [oh.make_node("Identity", ["s"], ["y"])], "g", [],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [_FLOATS])],
        sparse_initializer=[_sparse(location)])
    graph.sparse_initializer[0].values.name = "s"
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


def _constant_in_a_loop_body_model(location: str) -> onnx.ModelProto:
    """A Loop of one iteration whose body's Constant has a sparse_value kept outside."""
    constant = oh.make_node("Constant", [], ["c"], sparse_value=_sparse(location))
    body = oh.make_graph(
        [constant, oh.make_node("Identity", ["cond"], ["cond_out"]),
         oh.make_node("Identity", ["c"], ["out"])], "body",
        [oh.make_tensor_value_info("i", TensorProto.INT64, []),
         oh.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [oh.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         oh.make_tensor_value_info("out", TensorProto.FLOAT, [_FLOATS])])
    trip = oh.make_tensor("n", TensorProto.INT64, [], [1])
    graph = oh.make_graph(
        [oh.make_node("Loop", ["n", ""], ["y"], body=body)], "g", [],
        [oh.make_tensor_value_info("y", TensorProto.FLOAT, [1, _FLOATS])], [trip])
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])


MODELS = {"sparse initializer": _sparse_initializer_model,
          "Constant sparse_value in a Loop body": _constant_in_a_loop_body_model}


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """A secret in the current directory, a model (naming it) in another folder."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "id_rsa").write_bytes(SECRET)
    models = tmp_path / "models"
    models.mkdir()
    monkeypatch.chdir(cwd)
    return cwd, models


def _save(model: onnx.ModelProto, folder: Path) -> Path:
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("make", list(MODELS.values()), ids=list(MODELS))
def test_sparse_external_data_is_held_to_the_external_data_rules(layout, make):
    cwd, models = layout
    path = _save(make("id_rsa"), models)
    for call in (lambda: mdf_loops.run(str(path)), lambda: mdf_loops.onnx_to_mdf(str(path)),
                 lambda: mdf_loops.validate(str(path)),
                 lambda: mdf_loops.onnx_to_mdf(make("id_rsa"))):
        with pytest.raises(ModelError, match="values keeps its data in another file"):
            call()
    for rules in ({"trusted": True}, {"external_data_dir": str(models)}):
        # the model's own folder, or the folder named: never the current directory
        with pytest.raises(ModelError, match="values: external data: .*models/id_rsa: no such"):
            mdf_loops.run(str(path), **rules)


@pytest.mark.parametrize("make", list(MODELS.values()), ids=list(MODELS))
def test_sparse_external_data_is_read_from_the_folder_named(layout, make):
    cwd, models = layout
    weights = np.arange(_FLOATS, dtype=np.float32) + 0.5
    (models / "weights.bin").write_bytes(weights.tobytes())
    path = _save(make("weights.bin"), models)
    for rules in ({"trusted": True}, {"external_data_dir": str(models)}):
        outputs = mdf_loops.run(str(path), **rules)
        np.testing.assert_array_equal(np.reshape(outputs["y"], -1), weights)


def test_the_command_line_copies_no_secret_from_the_current_directory(layout):
    cwd, models = layout
    path = _save(_constant_in_a_loop_body_model("id_rsa"), models)
    out = models / "out.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    command = ["import", str(path), "-o", str(out), "--external-data-dir", str(models)]
    done = subprocess.run([sys.executable, "-m", "mdf_loops", *command], cwd=cwd, env=env,
                          capture_output=True, timeout=300)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert b"values: external data" in done.stderr and SECRET not in done.stdout + done.stderr
    assert not out.exists()
