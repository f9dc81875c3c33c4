"""mdf_loops/model/interface.py: every entry point picks a model's graph the same way.

A model file without graphs (ModECI/MDF's NeuroML simulation files are such
documents) or a graph id the model lacks gets one message from every command and
API call, naming the model and its graphs; before, ``simulate`` said "has no graph
'None'" and ``simulate --save-model`` ended in an IndexError.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import mdf_loops
from mdf_loops.cli.commands import main
from mdf_loops.errors import ModelError
from mdf_loops.model.compat import INPUT_DEFAULTS

NO_GRAPH = "model 'empty' has no graph; an MDF model holds at least one under 'graphs'"
NO_SUCH = "model 'one' has no graph 'other'; its graphs: 'main'"


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    one = {"one": {"graphs": {"main": {"nodes": {"n": {
        "parameters": {"p": {"value": 2}}, "output_ports": {"out": {"value": "p"}}}}}}}}
    paths = {"empty": tmp_path / "empty.json", "one": tmp_path / "one.json"}
    paths["empty"].write_text(json.dumps({"empty": {"format": "ModECI MDF v0.4"}}))
    paths["one"].write_text(json.dumps(one))
    return paths


def _entry_points(path: Path, graph: str | None):
    yield "run", lambda: mdf_loops.run(path, graph=graph)
    yield "run scheduler", lambda: mdf_loops.run(path, graph=graph, backend="scheduler")
    yield "mdf_to_onnx", lambda: mdf_loops.mdf_to_onnx(path, graph=graph)
    yield "to_graphviz", lambda: mdf_loops.to_graphviz(path, graph=graph)
    if graph is None and INPUT_DEFAULTS:  # simulate runs the first graph (modeci-mdf >= 0.4.14)
        yield "simulate", lambda: mdf_loops.simulate(path, dt=0.1, steps=2)


@pytest.mark.parametrize("case", ["empty", "one"])
def test_every_api_entry_point_names_the_missing_graph(files, case):
    graph, expected = (None, NO_GRAPH) if case == "empty" else ("other", NO_SUCH)
    for name, call in _entry_points(files[case], graph):
        with pytest.raises(ModelError) as raised:
            call()
        assert str(raised.value) == expected, name
    assert mdf_loops.run(files["one"])["n.out"] == 2


def test_every_command_names_the_missing_graph(files, tmp_path, capsys):
    empty = str(files["empty"])
    commands = [["render", empty, "-o", str(tmp_path / "p.svg")]]
    if INPUT_DEFAULTS:  # time loops need modeci-mdf >= 0.4.14 (older ones are refused first)
        commands += [
            ["simulate", empty, "--dt", "0.1", "--steps", "2", "--save-model", str(tmp_path / "t.json")],
            ["simulate", empty, "--dt", "0.1", "--steps", "2"],
        ]
    for command in commands:
        assert main(["-q", *command]) == 1
        err = capsys.readouterr().err
        assert err == f"mdf-loops: error: {NO_GRAPH}\n", command
    for command in (["run", "--graph", "other"], ["export", "-o", str(tmp_path / "o.onnx"),
                                                  "--graph", "other"]):
        assert main(["-q", command[0], str(files["one"]), *command[1:]]) == 1
        assert capsys.readouterr().err == f"mdf-loops: error: {NO_SUCH}\n", command
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.json", "one.json"]
