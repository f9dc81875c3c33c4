"""mdf_loops/model/references.py: an expression that is exactly an id is that value, as stock
reads it.

modeci-mdf's own ONNX importer (``modeci_mdf.interfaces.onnx.onnx_to_mdf``) names nodes
and parameters by ONNX node names (``/A/Add``) and writes an output port
``{"value": "/A/Add"}``; stock modeci-mdf runs such files because modelspec looks an
expression up as a whole key before it evaluates it as Python. The oracles: stock's
``EvaluableGraph`` in a subprocess without ``import mdf_loops`` (tests/stock_runner.py),
and onnxruntime on the ONNX model the file was converted from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from conftest import needs_input_port_fields
from onnx import TensorProto, helper, numpy_helper

import mdf_loops
from mdf_loops.errors import MdfLoopsError, ModelError
from mdf_loops.model.references import (
    id_problem,
    ids_inside,
    is_python_name,
    parameter_reference_refusal,
    referenced_id,
)

RUNNER = Path(__file__).resolve().parents[1] / "stock_runner.py"
INPUT = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
#: ONNX graph output -> the output name stock gives its port (node id '.' port id)
OUTPUTS = {"out": "/C/Sin.out", "/D/Cos_output_0": "/D/Cos._D_Cos_output_0"}


def _onnx_model() -> onnx.ModelProto:
    """Add, Mul, Sin and Cos nodes named as torch's exporter names them ('/A/Add')."""

    def constant(name: str, value: float) -> onnx.NodeProto:
        tensor = numpy_helper.from_array(np.array(value), name)
        return helper.make_node("Constant", [], [name], name=f"/{name}/Constant", value=tensor)

    nodes = [
        constant("B1", 1.5),
        constant("B2", -2.0),
        helper.make_node("Add", ["input", "B1"], ["/A/Add_output_0"], name="/A/Add"),
        helper.make_node("Mul", ["/A/Add_output_0", "B2"], ["/B/Mul_output_0"], name="/B/Mul"),
        helper.make_node("Sin", ["/B/Mul_output_0"], ["out"], name="/C/Sin"),
        helper.make_node("Cos", ["/A/Add_output_0"], ["/D/Cos_output_0"], name="/D/Cos"),
    ]
    value = lambda name: helper.make_tensor_value_info(name, TensorProto.DOUBLE, [2, 3])  # noqa: E731
    graph = helper.make_graph(nodes, "main_graph", [value("input")], [value(n) for n in OUTPUTS])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _stock(paths: list[Path], folder: Path) -> dict:
    """Each file's first graph evaluated once by stock modeci-mdf (inputs read zeros)."""
    result = folder / "stock.json"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, str(RUNNER), "stock", str(result), *(f"file:{p}" for p in paths)],
        env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {Path(name[5:]).stem: record for name, record in json.loads(result.read_text()).items()}


def _stock_values(record: dict) -> dict[str, np.ndarray]:
    """The arrays of stock_runner's bit-exact descriptions (``ndarray float64 (2, 3) HEX ...``)."""
    values = {}
    for name, text in record["steps"][0]["outputs"].items():
        kind, dtype, *rest = text.split(" ")
        if kind in ("float", "int"):  # a Python number: its repr
            values[name] = np.asarray(float(dtype) if kind == "float" else int(dtype))
            continue
        assert kind == "ndarray", text
        shape_end = next(k for k, f in enumerate(rest) if f.endswith(")"))
        shape = json.loads("[" + " ".join(rest[: shape_end + 1])[1:-1].rstrip(",") + "]")
        values[name] = np.frombuffer(bytes.fromhex(rest[shape_end + 1]), dtype).reshape(shape)
    return values


def _hand_written(nodes: dict) -> dict:
    return {"m": {"graphs": {"g": {"nodes": nodes}}}}


def _node(parameters: dict, outputs: dict, inputs: dict | None = None) -> dict:
    return {
        "input_ports": inputs or {"x": {"shape": [2], "type": "float"}},
        "parameters": parameters,
        "output_ports": {port: {"value": value} for port, value in outputs.items()},
    }


ADD = {"function": "onnx::Add", "args": {"A": "x", "B": "x"}}
MUL_BY_A_B = {"function": "onnx::Mul", "args": {"A": "a b", "B": "x"}}
#: hand-written models stock runs: ids that are no Python names, read only whole
RUNS = {
    "port_reads_input": _hand_written({"n 1": _node({}, {"o": "/x"}, {"/x": {"shape": [2]}})}),
    "digit_and_space_ids": _hand_written(
        {"2 b": _node({"2x": ADD, "a b": {"value": 4.0}}, {"o": "2x", "k": "a b"})}
    ),
}
#: hand-written models stock fails on, and the words of our refusal
REFUSED = {
    "id_inside_an_expression": (
        _hand_written({"/A": _node({"/A/Add": ADD}, {"o": "/A/Add + 1"})}),
        "'/A/Add' is an id but not a Python name: an expression names such an id only whole",
    ),
    "parameter_reads_an_id": (
        _hand_written({"/A": _node({"/A/Add": ADD, "y": {"value": "/A/Add"}}, {"o": "y"})}),
        "modeci-mdf's engine reads a parameter's expressions as Python to order them",
    ),
    "argument_reads_an_id": (
        _hand_written({"/A": _node({"a b": {"value": 2}, "y": MUL_BY_A_B}, {"o": "y"})}),
        "'a b' is an id but not a Python name, and modeci-mdf's engine",
    ),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    from modeci_mdf.interfaces.onnx import onnx_to_mdf as modeci_onnx_to_mdf

    folder = tmp_path_factory.mktemp("ids")
    model = _onnx_model()
    onnx.save(model, folder / "importer.onnx")
    modeci_onnx_to_mdf(model).to_json_file(str(folder / "importer.json"))
    paths = {"importer": folder / "importer.json", "onnx": folder / "importer.onnx"}
    for name, document in {**RUNS, **{k: d for k, (d, _) in REFUSED.items()}}.items():
        paths[name] = folder / f"{name}.json"
        paths[name].write_text(json.dumps(document))
    return paths


@pytest.fixture(scope="module")
def stock(files) -> dict[str, dict]:
    names = ["importer", *RUNS, *REFUSED]
    return _stock([files[name] for name in names], files["importer"].parent)


def test_the_importer_writes_the_construct(files):
    """What the tests below rely on: modeci-mdf's importer writes ids with '/', and an
    output port whose value is exactly a parameter's id."""
    nodes = json.loads(files["importer"].read_text())["ONNX Model"]["graphs"]["main_graph"]["nodes"]
    assert {"/A/Add", "/B/Mul", "/C/Sin", "/D/Cos"} <= set(nodes)
    assert nodes["/A/Add"]["output_ports"]["_A_Add_output_0"] == {"value": "/A/Add"}
    assert "/A/Add" in nodes["/A/Add"]["parameters"]
    assert mdf_loops.validate(mdf_loops.load_model(files["importer"])) == []


@pytest.mark.parametrize("backend", ["scheduler", "onnxruntime", "auto"])
@pytest.mark.parametrize("name", ["importer", *RUNS])
def test_run_gives_stocks_answer(files, stock, name, backend):
    assert stock[name]["error"] is None, stock[name]["error"]
    expected = _stock_values(stock[name])
    assert mdf_loops.validate(files[name]) == []
    ours = mdf_loops.run(files[name], backend=backend)
    assert set(ours) <= set(expected) and ours  # the names stock gives, ids as written
    for key, value in ours.items():
        assert np.asarray(value).dtype == expected[key].dtype, key
        np.testing.assert_allclose(value, expected[key], rtol=1e-6, err_msg=key)


@pytest.mark.parametrize("backend", ["scheduler", "onnxruntime", "auto"])
def test_run_gives_onnxruntimes_answer_on_the_original_model(files, backend):
    session = onnxruntime.InferenceSession(str(files["onnx"]), providers=["CPUExecutionProvider"])
    expected = dict(zip(OUTPUTS, session.run(list(OUTPUTS), {"input": INPUT}), strict=True))
    ours = mdf_loops.run(files["importer"], {"input": INPUT}, backend=backend)
    assert sorted(ours) == sorted(OUTPUTS.values())  # '/D/Cos._D_Cos_output_0', as stock's
    for onnx_name, name in OUTPUTS.items():
        np.testing.assert_allclose(ours[name], expected[onnx_name], rtol=1e-12, err_msg=name)


def test_the_export_names_the_value_the_reference_names(files, tmp_path):
    exported = tmp_path / "exported.onnx"
    onnx.save(mdf_loops.mdf_to_onnx(mdf_loops.load_model(files["importer"])), exported)
    original = onnxruntime.InferenceSession(str(files["onnx"]), providers=["CPUExecutionProvider"])
    ours = onnxruntime.InferenceSession(str(exported), providers=["CPUExecutionProvider"])
    assert sorted(o.name for o in ours.get_outputs()) == sorted(OUTPUTS.values())
    expected = dict(zip(OUTPUTS, original.run(list(OUTPUTS), {"input": INPUT}), strict=True))
    names = list(OUTPUTS.values())
    got = dict(zip(names, ours.run(names, {"input": INPUT}), strict=True))
    for onnx_name, name in OUTPUTS.items():
        np.testing.assert_allclose(got[name], expected[onnx_name], rtol=1e-12)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_stock_cannot_run_is_refused_the_same_by_validate_and_run(files, stock, name):
    assert stock[name]["error"] is not None  # stock fails on it too
    (problem,) = mdf_loops.validate(files[name])
    assert REFUSED[name][1] in problem.message
    for backend in ("scheduler", "onnxruntime", "auto"):
        for trusted in (False, True):
            if "inside" in name and trusted:
                continue  # the allow-list applies to a model not trusted: below
            with pytest.raises(ModelError) as caught:
                mdf_loops.run(files[name], backend=backend, trusted=trusted)
            assert str(problem) in str(caught.value)


def test_a_trusted_run_of_an_id_inside_an_expression_fails_naming_it(files):
    path = files["id_inside_an_expression"]
    with pytest.raises(MdfLoopsError, match="'/A/Add' is an id but not a Python name"):
        mdf_loops.run(path, backend="onnxruntime", trusted=True)
    with pytest.raises(MdfLoopsError, match=r"node '/A'.*/A/Add \+ 1"):  # stock's own words
        mdf_loops.run(path, backend="scheduler", trusted=True)


@pytest.mark.parametrize("bad_id", ["a.b", ""])
@pytest.mark.parametrize("field", ["nodes", "parameters", "input_ports"])
def test_an_id_no_model_can_use_is_refused_by_validate_and_run(bad_id, field, tmp_path):
    node = _node({"y": {"value": "x * 2"}}, {"o": "y"})
    nodes = {"n": node}
    if field == "nodes":
        nodes = {bad_id: node}
    else:
        node[field][bad_id] = {"value": 1} if field == "parameters" else {"shape": [2]}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_hand_written(nodes)))
    expected = f"{bad_id!r} is not an id: an id is not empty and holds no '.'"
    problems = mdf_loops.validate(path)
    assert [expected in p.message for p in problems] == [True], problems
    with pytest.raises(ModelError, match="is not an id"):
        mdf_loops.run(path, backend="scheduler", trusted=True)


def test_a_reference_is_the_text_exactly():
    scope = frozenset({"/A/Add", "x", "2x"})
    assert referenced_id("/A/Add", scope) == "/A/Add"
    assert referenced_id("2x", scope) == "2x"
    assert referenced_id(" /A/Add", scope) is None  # modelspec compares the text as written
    assert referenced_id("/A/Mul", scope) is None
    assert referenced_id(3, scope) is None
    assert [is_python_name(t) for t in ("x", "/A", "if", "é")] == [True, False, False, False]
    assert ids_inside("/A/Add + x * 2x", scope) == ["/A/Add", "2x"]
    assert ids_inside("/A/Add", scope) == []  # whole: a reference, not a piece


def test_what_no_id_can_be_and_where_a_reference_cannot_stand():
    assert id_problem("/A/Add") is None and id_problem("a b") is None
    assert all("is not an id" in str(id_problem(bad)) for bad in ("x.3", ""))
    scope = {"/A/Add", "x", "x.3"}
    assert str(parameter_reference_refusal("/A/Add", scope)).startswith(
        "'/A/Add' is an id but not a Python name, and modeci-mdf's engine"
    )
    assert parameter_reference_refusal("x", scope) is None
    assert parameter_reference_refusal("/A/Mul", scope) is None  # no reference
    assert parameter_reference_refusal("x.3", scope) is None  # reported where it is defined


@needs_input_port_fields  # time loops need modeci-mdf 0.4.14
def test_simulate_gives_stocks_answer_where_only_stateless_ids_are_no_python_names(tmp_path):
    from stock_batch import StockJob, stock_batch

    document = _stateful("v", "A", "/A/out")
    path = tmp_path / "state.json"
    path.write_text(json.dumps(document))
    record = ["A./A/out", "/B/Mul.o"]
    expected = stock_batch({"s": StockJob(path, 0.1, 5, record)}, tmp_path / "stock")["s"]
    ours = mdf_loops.simulate(path, dt=0.1, steps=5, record=record)
    for name in record:
        np.testing.assert_allclose(np.ravel(ours[name]), np.ravel(expected[name]), rtol=1e-12)


@needs_input_port_fields  # time loops need modeci-mdf 0.4.14
def test_simulate_refuses_a_stateful_node_whose_id_is_no_python_name(tmp_path):
    path = tmp_path / "state.json"
    path.write_text(json.dumps(_stateful("/A/v", "/A/Int", "/A/out")))
    for trusted in (False, True):  # refused by the time loop, before any backend sees it
        with pytest.raises(ModelError, match=r"^node '/A/Int' parameter '/A/v': a time loop "
                                             r"carries its value .* rename the node"):
            mdf_loops.simulate(path, dt=0.1, steps=5, record=["/A/Int./A/out"],
                               trusted=trusted)


def _stateful(state: str, node: str, port: str) -> dict:
    """An integrator ``node`` of state ``state`` (dv/dt = 2) feeding ``/B/Mul`` (3 v)."""
    integrator = {
        "parameters": {
            "rate": {"value": 2.0},
            state: {"default_initial_value": 1.0, "time_derivative": "rate"},
        },
        "output_ports": {port: {"value": state}},
    }
    edge = {"sender": node, "receiver": "/B/Mul", "sender_port": port, "receiver_port": "v_in"}
    multiply = _node({"/B/Mul": {"value": "v_in * 3"}}, {"o": "/B/Mul"}, {"v_in": {"shape": [1]}})
    graph = {"nodes": {node: integrator, "/B/Mul": multiply}, "edges": {f"{node}.{port}_b": edge}}
    return {"m": {"graphs": {"g": graph}}}
