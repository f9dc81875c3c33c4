"""mdf_loops/model/inputs.py: what an input nobody gives holds, against stock modeci-mdf.

An input port with no ``default_value`` holds zeros of its ``shape`` in modeci-mdf's
engine (``numpy.full(shape, 0)``, ``0.0`` for a float ``type``); ModECI/MDF's own
condition examples and the files its ONNX importer writes rely on it for ports that
declare a shape. A scalar port without a default is still a missing input for us.
The oracle is stock's ``EvaluableGraph`` in a subprocess without ``import mdf_loops``
(tests/stock_runner.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter
from stock_runner import describe

import mdf_loops
from mdf_loops.errors import InputError

RUNNER = Path(__file__).resolve().parents[1] / "stock_runner.py"


def _node(node_id: str, port: InputPort, value: str) -> Node:
    return Node(
        id=node_id,
        input_ports=[port],
        parameters=[Parameter(id="k", value=3), Parameter(id="y", value=value)],
        output_ports=[OutputPort(id="out", value="y")],
    )


def _models() -> dict[str, Model]:
    float_port = InputPort(id="x", shape=(2,), type="float")
    int_port = InputPort(id="n", shape=(3,))
    return {
        "float_zeros": Model(
            id="float_zeros", graphs=[Graph(id="g", nodes=[_node("a", float_port, "x * k + 1")])]
        ),
        "int_zeros": Model(
            id="int_zeros", graphs=[Graph(id="g", nodes=[_node("b", int_port, "n + k")])]
        ),
    }


def _stock(paths: dict[str, Path], folder: Path) -> dict:
    result = folder / "stock.json"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    cases = [f"file:{path}" for path in paths.values()]
    done = subprocess.run(
        [sys.executable, str(RUNNER), "stock", str(result), *cases],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(result.read_text())


@pytest.fixture(scope="module")
def stock_and_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("engine_zeros")
    paths = {}
    for name, model in _models().items():
        paths[name] = folder / f"{name}.json"
        model.to_json_file(str(paths[name]))
    return _stock(paths, folder), paths


@pytest.mark.parametrize("backend", ["auto", "scheduler", "onnxruntime"])
@pytest.mark.parametrize("name", ["float_zeros", "int_zeros"])
def test_a_shaped_input_without_default_holds_stock_zeros(stock_and_files, name, backend):
    stock, paths = stock_and_files
    record = stock[f"file:{paths[name]}"]
    assert record["error"] is None, record["error"]
    expected = record["steps"][0]["outputs"]
    assert mdf_loops.validate(paths[name]) == []
    ours = mdf_loops.run(paths[name], backend=backend)
    assert {key: _exact(describe(np.asarray(value))) for key, value in ours.items()} == {
        key: _exact(text) for key, text in expected.items()
    }


def _exact(described: str) -> str:
    """Type, dtype, shape and bytes of stock_runner's description, without the repr
    (numpy writes ``dtype=int64`` in the repr of an array onnxruntime made)."""
    return " ".join(described.split(" ")[:4])


def test_the_zeros_are_what_the_numbers_say(caplog):
    with caplog.at_level("WARNING", logger="mdf_loops"):
        ours = mdf_loops.run(_models()["float_zeros"])
    assert "inputs ['x'] not given and without a default_value read zeros" in caplog.text
    assert ours["a.out"].tolist() == [1.0, 1.0] and ours["a.out"].dtype == np.float64
    given = mdf_loops.run(_models()["float_zeros"], {"x": [1.0, 2.0]})
    assert given["a.out"].tolist() == [4.0, 7.0]


@pytest.mark.parametrize("shape", [None, ()])
def test_a_scalar_input_without_default_must_still_be_given(shape):
    port = InputPort(id="x", shape=shape)
    model = Model(id="m", graphs=[Graph(id="g", nodes=[_node("a", port, "x * k")])])
    with pytest.raises(InputError, match=r"missing inputs \['x'\].*default_value"):
        mdf_loops.run(model)
    assert mdf_loops.run(model, {"x": 2.0})["a.out"] == 6.0
