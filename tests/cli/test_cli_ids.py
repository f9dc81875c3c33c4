"""``mdf-loops validate``, ``run`` and ``export`` on a file as modeci-mdf's ONNX importer
writes it: node and parameter ids such as ``/A/Add``, and an output port whose value is
exactly such an id (stock reads it as that value: mdf_loops/model/references.py).

The oracle is numpy written here; the exported file runs in onnxruntime.
"""

from __future__ import annotations

import json

import numpy as np
import onnxruntime
import pytest
import yaml

from mdf_loops.cli import commands as cli

INPUT = [[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]]


def _document() -> dict:
    """Add 1 then multiply by 5, as modeci-mdf's ``onnx_to_mdf`` wrote ModECI's ab.json."""

    def node(node_id: str, port: str, op: str, b: float, out: str) -> dict:
        return {
            "input_ports": {port: {"shape": [2, 3], "type": "float"}},
            "parameters": {
                "B": {"value": b},
                node_id: {"function": op, "args": {"A": port, "B": "B"}},
            },
            "output_ports": {out: {"value": node_id}},
        }

    edge = {"sender": "/A/Add", "receiver": "/B/Mul",
            "sender_port": "_A_Add_output_0", "receiver_port": "_A_Add_output_0"}
    nodes = {
        "/A/Add": node("/A/Add", "input", "onnx::Add", 1.0, "_A_Add_output_0"),
        "/B/Mul": node("/B/Mul", "_A_Add_output_0", "onnx::Mul", 5.0, "_4"),
    }
    graph = {"nodes": nodes, "edges": {"/A/Add._A_Add_output_0_/B/Mul._A_Add_output_0": edge}}
    return {"ONNX Model": {"format": "ModECI MDF v0.4", "graphs": {"main_graph": graph}}}


@pytest.fixture(params=["json", "yaml"])
def path(request, tmp_path):
    path = tmp_path / f"ab.{request.param}"
    dump = json.dumps if request.param == "json" else yaml.safe_dump
    path.write_text(dump(_document()))
    return path


def _main(capsys, *args) -> tuple[int, str, str]:
    status = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_validate_finds_nothing(capsys, path):
    assert _main(capsys, "validate", path) == (0, f"{path}: valid\n", "")


@pytest.mark.parametrize("backend", ["scheduler", "onnxruntime", "auto"])
def test_run_gives_the_answer_under_the_ids_as_written(capsys, path, backend, tmp_path):
    saved = tmp_path / "out.npz"
    status, out, err = _main(capsys, "-q", "run", path, "--backend", backend,
                             "-i", f"input={json.dumps(INPUT)}", "-o", saved)
    assert status == 0, err
    with np.load(saved) as outputs:
        assert sorted(outputs) == ["/B/Mul._4"]
        np.testing.assert_array_equal(outputs["/B/Mul._4"], (np.array(INPUT) + 1.0) * 5.0)


def test_export_writes_a_model_onnxruntime_runs(capsys, path, tmp_path):
    exported = tmp_path / "ab.onnx"
    status, _, err = _main(capsys, "-q", "export", path, "-o", exported)
    assert status == 0, err
    session = onnxruntime.InferenceSession(str(exported), providers=["CPUExecutionProvider"])
    (result,) = session.run(["/B/Mul._4"], {"input": np.array(INPUT)})
    np.testing.assert_array_equal(result, (np.array(INPUT) + 1.0) * 5.0)


def test_an_id_inside_a_larger_expression_is_one_clear_error(capsys, tmp_path):
    document = _document()
    nodes = document["ONNX Model"]["graphs"]["main_graph"]["nodes"]
    nodes["/B/Mul"]["output_ports"]["_4"]["value"] = "/B/Mul + 1"
    path = tmp_path / "ab_plus.json"
    path.write_text(json.dumps(document))
    status, out, err = _main(capsys, "run", path)
    assert (status, out) == (1, "")
    assert err.count("\n") == 1 and err.startswith("mdf-loops: error: ")
    assert "'/B/Mul' is an id but not a Python name" in err
