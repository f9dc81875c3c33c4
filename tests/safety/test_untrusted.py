"""Model text never becomes code in an untrusted run, whatever path modeci-mdf takes.

Every payload here would create a marker file (or set a marker environment
variable) if it ran; each test asserts that nothing appears, and a control run
with ``trusted=True`` shows that the payload is live.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from modeci_mdf.functions.standard import mdf_functions
from modeci_mdf.mdf import Function, Graph, InputPort, Model, Node, OutputPort, Parameter
from onnx import helper as oh

from conftest import child_peak, needs_input_port_fields
import mdf_loops
import mdf_loops.files
from mdf_loops.errors import MdfLoopsError, ModelError, SizeLimitError
from mdf_loops.safety.checks import UnsafeExpressionError

MARKER_ENV = "MDF_LOOPS_TEST_MARKER"


def _payloads(marker: Path) -> list[str]:
    """Text that, evaluated anywhere, would leave a marker."""
    write = f"open({str(marker)!r}, 'w').write('ran')"
    env = f"__import__('os').environ.__setitem__({MARKER_ENV!r}, 'ran')"
    return [write, env, repr(write), repr(env), f"{write} # actr.chunk_to_string", "'exec'"]


def _nothing_ran(marker: Path) -> None:
    assert not marker.exists(), "a payload ran"
    assert MARKER_ENV not in os.environ, "a payload ran"


def _document(node: dict) -> dict:
    return {"m": {"format": "ModECI MDF v0.4", "graphs": {"main": {"nodes": {"n": node}}}}}


def _run_file(tmp_path: Path, node: dict, **kwargs):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(_document(node)))
    return mdf_loops.run(str(path), backend="scheduler", **kwargs)


@pytest.fixture
def marker(tmp_path):
    os.environ.pop(MARKER_ENV, None)
    path = tmp_path / "marker"
    yield path
    os.environ.pop(MARKER_ENV, None)


def test_an_actr_function_with_code_in_a_chunk_is_refused_and_trusted_shows_it_is_live(
        tmp_path, marker):
    code = f"open({str(marker)!r}, 'w').write('ran') and 1"
    node = {"parameters": {"p": {"function": "chunk_to_string", "args": {"chunk": {"a": code}}}},
            "output_ports": {"out": {"value": "p"}}}
    with pytest.raises(UnsafeExpressionError) as error:
        _run_file(tmp_path, node)
    refused = {problem.path: problem.message for problem in error.value.problems}
    assert "chunk_to_string" in refused["graphs.main.nodes.n.parameters.p.function"]
    assert "graphs.main.nodes.n.parameters.p.args.chunk.a" in refused
    assert "\n" not in str(error.value)
    _nothing_ran(marker)
    _run_file(tmp_path, node, trusted=True)
    assert marker.exists()  # the control: stock modeci-mdf runs the chunk's text


@pytest.mark.parametrize("where", ["parameters", "functions"])
@pytest.mark.parametrize("function", ["pattern_to_string", "chunk # actr.chunk_to_string",
                                      "x # ddm.drift_diffusion_integrator",
                                      "y # onnx_ops.get_onnx_schema"])
def test_functions_modeci_mdf_dispatches_by_substring_are_refused(tmp_path, marker, where,
                                                                  function):
    node = {where: {"f": {"function": function, "args": {"chunk": {"a": "'1'"}}}},
            "output_ports": {"out": {"value": "f"}}}
    with pytest.raises(UnsafeExpressionError) as error:
        _run_file(tmp_path, node)
    assert f"graphs.main.nodes.n.{where}.f.function" in {p.path for p in error.value.problems}
    problems = mdf_loops.validate(str(tmp_path / "model.json"))
    assert any(p.path == f"graphs.main.nodes.n.{where}.f.function" for p in problems)
    _nothing_ran(marker)


def test_a_parameter_holding_a_builtins_name_gives_the_name_not_the_builtin(tmp_path):
    node = {"parameters": {"e": {"value": "'exec'"}}, "output_ports": {"out": {"value": "e"}}}
    assert str(_run_file(tmp_path, node)["n.out"]) == "exec"
    assert callable(_run_file(tmp_path, node, trusted=True)["n.out"])  # stock: the builtin


@needs_input_port_fields  # the stock engine reads port defaults from 0.4.14 on
def test_an_input_port_default_read_by_name_is_data(tmp_path, marker):
    code = f"open({str(marker)!r}, 'w').write('ran')"
    node = {"input_ports": {"x": {"default_value": code}},
            "parameters": {"p": {"value": "x"}}, "output_ports": {"out": {"value": "p"}}}
    with pytest.raises(UnsafeExpressionError):
        _run_file(tmp_path, node)
    node["input_ports"]["x"]["default_value"] = repr(code)  # text whose text is code
    node["parameters"]["n"] = {"value": "y"}
    node["input_ports"]["y"] = {"default_value": "12"}
    node["output_ports"]["number"] = {"value": "n"}
    outputs = _run_file(tmp_path, node)
    assert str(outputs["n.out"]) == repr(code) and outputs["n.number"] == 12
    _nothing_ran(marker)
    node["input_ports"]["x"]["default_value"] = code
    _run_file(tmp_path, node, trusted=True)
    assert marker.exists()  # the control: modelspec evaluates the text a name holds


def test_code_nested_in_dict_and_list_args_is_refused(tmp_path, marker):
    code = f"open({str(marker)!r}, 'w')"
    node = {"parameters": {"p": {"function": "linear", "args": {
        "variable0": 1, "slope": [1, {"deep": [[code]]}], "intercept": 0}}},
        "output_ports": {"out": {"value": "p"}}}
    with pytest.raises(UnsafeExpressionError) as error:
        _run_file(tmp_path, node)
    assert "parameters.p.args.slope[1].deep[0][0]" in str(error.value)
    _nothing_ran(marker)


def test_an_edited_model_is_checked_again(marker):
    node = Node(id="n", input_ports=[InputPort(id="x")],
                output_ports=[OutputPort(id="y", value="x + 1")])
    model = Model(id="m", graphs=[Graph(id="main", nodes=[node])])
    assert mdf_loops.run(model, {"x": 1}, backend="scheduler")["n.y"] == 2
    node.output_ports[0].value = f"open({str(marker)!r}, 'w')"
    with pytest.raises(UnsafeExpressionError):
        mdf_loops.run(model, {"x": 1}, backend="scheduler")
    _nothing_ran(marker)


# ---------------------------------------------------------------- every standard function


def _carriers(payload: str) -> list:
    return [payload, {"a": payload, "b": {"c": [payload]}}, [payload, [payload]]]


def _standard_function_model(name: str, carrier, as_function: bool) -> Model:
    arguments = list(mdf_functions[name].get("arguments") or ["x"])
    args = {argument: carrier for argument in arguments}
    if as_function:
        node = Node(id="n", functions=[Function(id="f", function=name, args=args)],
                    output_ports=[OutputPort(id="out", value="f")])
    else:
        node = Node(id="n", parameters=[Parameter(id="f", function=name, args=args)],
                    output_ports=[OutputPort(id="out", value="f")])
    return Model(id="m", graphs=[Graph(id="main", nodes=[node])])


def _run_untrusted(model: Model) -> None:
    try:
        mdf_loops.run(model, backend="scheduler")
    except MdfLoopsError:
        pass  # refused, or failed on garbage arguments: both are fine, as long as nothing ran


def test_every_standard_function_with_payload_arguments_runs_nothing(marker):
    mdf_loops.register()
    for name in sorted(mdf_functions):
        for payload in _payloads(marker):
            for carrier in _carriers(payload):
                _run_untrusted(_standard_function_model(name, carrier, as_function=False))
                _nothing_ran(marker)


_JSON_LEAF = st.one_of(st.integers(-3, 3), st.just("x"), st.just("'text'"))


@settings(max_examples=150, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_standard_functions_with_nested_payloads_run_nothing(marker, data):
    mdf_loops.register()
    name = data.draw(st.sampled_from(sorted(mdf_functions)), label="function")
    payload = data.draw(st.sampled_from(_payloads(marker)), label="payload")
    leaves = st.one_of(_JSON_LEAF, st.just(payload))
    carrier = data.draw(st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from("abc"), inner, max_size=3)),
        max_leaves=6), label="argument")
    as_function = data.draw(st.booleans(), label="in functions")
    _run_untrusted(_standard_function_model(name, carrier, as_function))
    _nothing_ran(marker)


# ---------------------------------------------------------------- ONNX files

SECRET = b"SECRET-KEY-BYTES-0123456789abcdef"


def _external_data_model(folder: Path, location: str) -> Path:
    tensor = onnx.TensorProto(name="w", data_type=onnx.TensorProto.UINT8, dims=[len(SECRET)])
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", location), ("length", str(len(SECRET)))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    graph = oh.make_graph([oh.make_node("Identity", ["w"], ["y"])], "g", [],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.UINT8, [len(SECRET)])],
                          [tensor])
    path = folder / "model.onnx"
    path.write_bytes(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
                     .SerializeToString())
    return path


@pytest.fixture
def home(tmp_path):
    """A home folder with a key below it, and a model saved in it."""
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_rsa").write_bytes(SECRET)
    return tmp_path


def _no_secret_in(*folders: Path) -> None:
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file() and path.name != "id_rsa":
                assert SECRET not in path.read_bytes(), path


def test_external_data_below_the_model_folder_is_not_read_untrusted(home):
    model = _external_data_model(home, ".ssh/id_rsa")
    for call in (lambda: mdf_loops.run(str(model)), lambda: mdf_loops.onnx_to_mdf(str(model)),
                 lambda: mdf_loops.validate(str(model))):
        with pytest.raises(ModelError, match="initializer 'w' keeps its data in another file"):
            call()
    outputs = mdf_loops.run(str(model), trusted=True)  # the control: the data is there
    assert outputs["y"].tobytes() == SECRET


def test_external_data_only_from_inside_the_named_folder(home):
    (home / "models").mkdir()
    model = _external_data_model(home / "models", "../.ssh/id_rsa")
    for folder in (home / "models", home):
        with pytest.raises(ModelError, match="is not a file inside"):
            mdf_loops.run(str(model), external_data_dir=str(folder))
    (home / "models" / "weights.bin").write_bytes(b"w" * len(SECRET))
    model = _external_data_model(home / "models", "weights.bin")
    outputs = mdf_loops.run(str(model), external_data_dir=str(home / "models"))
    assert outputs["y"].tobytes() == b"w" * len(SECRET)


def test_import_on_the_command_line_does_not_copy_external_data(home):
    import subprocess
    import sys

    model = _external_data_model(home, ".ssh/id_rsa")
    out = home / "out.json"
    done = subprocess.run([sys.executable, "-m", "mdf_loops", "import", str(model), "-o",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--external-data-dir" in done.stderr and not out.exists()
    _no_secret_in(home)


def test_a_tiny_file_with_a_huge_sparse_initializer_allocates_nothing(tmp_path):
    values = oh.make_tensor("v", onnx.TensorProto.FLOAT, [1], [1.0])
    indices = oh.make_tensor("i", onnx.TensorProto.INT64, [1], [0])
    graph = oh.make_graph([oh.make_node("Identity", ["v"], ["y"])], "g", [],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                          sparse_initializer=[oh.make_sparse_tensor(values, indices,
                                                                    [20000, 20000])])
    path = tmp_path / "sparse.onnx"
    path.write_bytes(oh.make_model(graph).SerializeToString())
    assert path.stat().st_size < 200
    result, peak = child_peak("import mdf_loops\nmdf_loops.onnx_to_mdf(sys.argv[1])", str(path))
    assert result.startswith("SizeLimitError") and "[20000, 20000]" in result, result
    assert "\n" not in result and peak < 1000


def test_a_dense_tensor_declaring_more_than_max_elements_is_refused(tmp_path):
    tensor = onnx.TensorProto(name="w", data_type=onnx.TensorProto.FLOAT, dims=[100000, 100000])
    graph = oh.make_graph([oh.make_node("Identity", ["w"], ["y"])], "g", [],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], [tensor])
    with pytest.raises(SizeLimitError, match="max_elements"):
        mdf_loops.onnx_to_mdf(oh.make_model(graph))


# ---------------------------------------------------------------- operator sizes


def _f32(*shape):
    return np.ones(shape, np.float32)


_SIZE_CASES = [
    ("Pad", [_f32(2, 3), np.array([0, 1, 2, 3], np.int64)], {}),
    ("Pad", [_f32(2, 3), np.array([1, 2], np.int64), None, np.array([1], np.int64)], {}),
    ("Mul", [_f32(4, 1), _f32(1, 5)], {}),
    ("Where", [np.ones((3, 1), bool), _f32(1, 4), _f32(2, 1, 1)], {}),
    ("MatMul", [_f32(2, 3, 4), _f32(4, 5)], {}),
    ("MatMul", [_f32(4), _f32(3, 4, 2)], {}),
    ("Gemm", [_f32(4, 3), _f32(5, 4)], {"transA": 1, "transB": 1}),
    ("Einsum", [_f32(3, 4), _f32(4, 5)], {"equation": "ij,jk->ik"}),
    ("Einsum", [_f32(2, 3, 4), _f32(2, 4, 5)], {"equation": "...ij,...jk"}),
    ("Einsum", [_f32(3), _f32(4)], {"equation": "i,j"}),
    ("Concat", [_f32(2, 3), _f32(5, 3)], {"axis": 0}),
    ("Tile", [_f32(2, 3), np.array([3, 2], np.int64)], {}),
    ("Expand", [_f32(3, 1), np.array([2, 1, 4], np.int64)], {}),
    ("Range", [np.array(1.0, np.float32), np.array(10.0, np.float32),
               np.array(2.5, np.float32)], {}),
    ("ConstantOfShape", [np.array([3, 4], np.int64)], {}),
    ("OneHot", [np.array([0, 2, 1], np.int64), np.array(5, np.int64),
                np.array([0, 1], np.float32)], {}),
    ("Resize", [_f32(1, 1, 2, 3), None, np.array([1, 1, 2, 1.5], np.float32)], {}),
    ("Resize", [_f32(1, 1, 2, 3), None, None, np.array([1, 1, 5, 7], np.int64)], {}),
    ("RandomUniform", [], {"shape": [3, 5]}),
    ("RandomNormalLike", [_f32(2, 7)], {}),
    ("HannWindow", [np.array(7, np.int64)], {}),
    ("BlackmanWindow", [np.array(9, np.int64)], {}),
    ("MelWeightMatrix", [np.array(5, np.int64), np.array(16, np.int64),
                         np.array(8000, np.int64), np.array(0.0, np.float32),
                         np.array(4000.0, np.float32)], {}),
    ("DFT", [_f32(1, 6, 1), np.array(10, np.int64)], {}),
]


@pytest.mark.parametrize("op_type, inputs, attributes", _SIZE_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(_SIZE_CASES)])
def test_planned_sizes_match_onnx_reference_outputs(op_type, inputs, attributes):
    from onnx.reference import ReferenceEvaluator

    from mdf_loops.safety.operator_sizes import planned_elements

    names = [f"in{k}" if v is not None else "" for k, v in enumerate(inputs)]
    node = oh.make_node(op_type, names, ["out"], **attributes)
    graph = oh.make_graph([node], "g", [oh.make_tensor_value_info(n, 0, None) for n in names if n],
                          [oh.make_tensor_value_info("out", 0, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)])
    feeds = {n: v for n, v in zip(names, inputs) if n}
    (expected,) = ReferenceEvaluator(model).run(None, feeds)
    assert planned_elements(op_type, inputs, attributes) == np.size(expected)


@pytest.mark.parametrize("backend", ["scheduler", "onnxruntime"])
@pytest.mark.parametrize("case", ["pad", "broadcast", "random", "einsum", "constant_of_shape"])
def test_operators_asking_for_gigabytes_stop_before_allocating(case, backend):
    """Each ONNX operator asks for 2-4 GB; the scheduler refuses it before the kernel runs,
    onnxruntime's capped arena inside the kernel, before the memory is taken."""
    code = f"""
import numpy as np, mdf_loops
from onnx import helper as oh, TensorProto as T
F = lambda n, s: oh.make_tensor_value_info(n, T.FLOAT, s)
case = {case!r}
if case == "pad":
    node, inputs = oh.make_node("Pad", ["x", "p"], ["y"]), [F("x", [2])]
    inits, feeds = [oh.make_tensor("p", T.INT64, [2], [0, 600_000_000])], dict(x=np.ones(2, np.float32))
elif case == "broadcast":
    node, inputs, inits = oh.make_node("Mul", ["a", "b"], ["y"]), [F("a", [30000, 1]), F("b", [1, 30000])], []
    feeds = dict(a=np.ones((30000, 1), np.float32), b=np.ones((1, 30000), np.float32))
elif case == "random":
    node, inputs, inits, feeds = oh.make_node("RandomUniform", [], ["y"], shape=[30000, 30000]), [], [], {{}}
elif case == "constant_of_shape":  # a constant shape: onnxruntime folds it when it loads
    node, inputs, feeds = oh.make_node("ConstantOfShape", ["s"], ["y"]), [], {{}}
    inits = [oh.make_tensor("s", T.INT64, [2], [30000, 30000])]
else:
    node, inputs, inits = oh.make_node("Einsum", ["a", "b"], ["y"], equation="i,j->ij"), [F("a", [30000]), F("b", [30000])], []
    feeds = dict(a=np.ones(30000, np.float32), b=np.ones(30000, np.float32))
graph = oh.make_graph([node], "g", inputs, [F("y", None)], inits)
model = mdf_loops.onnx_to_mdf(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)]))
mdf_loops.run(model, feeds, backend={backend!r})"""
    result, peak = child_peak(code, limit_mb=4000)
    assert result.startswith("SizeLimitError") and "max_elements" in result, result
    assert "\n" not in result and peak < 1000


# ---------------------------------------------------------------- more attack classes


def test_a_yaml_file_copying_a_system_file_through_actr_is_refused(tmp_path, marker):
    secret = tmp_path / "system.conf"
    secret.write_bytes(SECRET)
    copy = f"open({str(marker)!r}, 'wb').write(open({str(secret)!r}, 'rb').read())"
    path = tmp_path / "model.yaml"
    path.write_text(
        "m:\n  format: ModECI MDF v0.4\n  graphs:\n    main:\n      nodes:\n        n:\n"
        "          functions:\n            f:\n              function: pattern_to_string\n"
        f"              args:\n                chunk:\n                  a: {json.dumps(copy)}\n"
        "          output_ports:\n            out:\n              value: f\n")
    result, peak = child_peak("import mdf_loops\nmdf_loops.run(sys.argv[1])", str(path))
    assert result.startswith("UnsafeExpressionError") and "nodes.n.functions.f" in result
    assert "\n" not in result and peak < 1000
    assert not marker.exists()
    assert {p.path for p in mdf_loops.validate(str(path))} >= {
        "graphs.main.nodes.n.functions.f.function", "graphs.main.nodes.n.functions.f.args.chunk.a"}


@needs_input_port_fields  # the stock engine reads port defaults from 0.4.14 on
@pytest.mark.parametrize("dtype", ["('u1', (46000, 46000))", "'S2000000000'", "'V2000000000'"])
def test_a_dtype_whose_elements_are_huge_is_refused(tmp_path, dtype):
    node = {"input_ports": {"d": {"default_value": dtype.strip("'")
                                  if dtype.startswith("'") else "x"}},
            "output_ports": {"literal": {"value": f"numpy.ones(1, dtype={dtype})"}}}
    path = tmp_path / "model.json"
    path.write_text(json.dumps(_document(node)))
    result, peak = child_peak("import mdf_loops\nmdf_loops.run(sys.argv[1], backend='scheduler')",
                               str(path))
    assert result.startswith(("UnsafeExpressionError", "SizeLimitError")) and "dtype" in result
    assert peak < 1000
    if dtype.startswith("'"):  # the same dtype as a value read at run time
        node["output_ports"] = {"computed": {"value": "numpy.zeros(1, d)"}}
        path.write_text(json.dumps(_document(node)))
        result, peak = child_peak(
            "import mdf_loops\nmdf_loops.run(sys.argv[1], backend='scheduler')", str(path))
        assert result.startswith("SizeLimitError") and "dtype" in result and peak < 1000


def test_a_huge_integer_and_deep_nesting_give_model_errors(tmp_path):
    digits = tmp_path / "digits.json"
    digits.write_text(json.dumps(_document({"parameters": {"p": {"value": 1}}}))
                      .replace('"value": 1', '"value": ' + "9" * 5000))
    deep = tmp_path / "deep.json"
    deep.write_text(json.dumps(_document({"parameters": {"p": {"value": 0}}}))
                    .replace('"value": 0', '"value": ' + "[" * 100_000 + "]" * 100_000))
    for path in (digits, deep):
        for call in (mdf_loops.run, mdf_loops.validate, mdf_loops.load_model):
            with pytest.raises(ModelError, match=str(path.name)) as error:
                call(str(path))
            assert "\n" not in str(error.value)


def _unnamed_files_work(folder: Path) -> bool:
    """Whether ``folder``'s filesystem makes unnamed files (Linux O_TMPFILE)."""
    try:
        os.close(os.open(folder, os.O_TMPFILE | os.O_WRONLY, 0o600))
        return True
    except (AttributeError, OSError):
        return False


@pytest.mark.parametrize("unnamed", [True, False], ids=["O_TMPFILE", "named temporary"])
def test_a_write_killed_half_way_leaves_nothing_or_a_part_the_next_write_removes(
        tmp_path, unnamed):
    import subprocess
    import sys

    if unnamed and not _unnamed_files_work(tmp_path):
        pytest.skip("this filesystem makes no unnamed files (O_TMPFILE)")
    target = tmp_path / "out.npz"
    code = ("import os, signal, sys\n"
            "import mdf_loops.files as files\n"
            "def killed(handle, payload):\n"
            "    os.write(handle, payload[:1000])\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n"
            "files._write_all = killed\n"
            + ("" if unnamed else "files._written_unnamed = lambda *args: False\n") +
            "files.write_atomically(sys.argv[1], b'x' * 100000)\n")
    done = subprocess.run([sys.executable, "-c", code, str(target)], timeout=300)
    assert done.returncode == -9 and not target.exists()
    assert len(list(tmp_path.iterdir())) == (0 if unnamed else 1)
    mdf_loops.files.write_atomically(target, b"complete")
    assert target.read_bytes() == b"complete"
    assert not list(tmp_path.glob(".out.npz.*"))


def test_run_limited_runs_a_model_in_a_child_and_stops_a_long_one():
    from mdf_loops.safety.sandbox import ResourceLimitError

    model = Model(id="m", graphs=[Graph(id="main", nodes=[Node(
        id="n", input_ports=[InputPort(id="a")],
        output_ports=[OutputPort(id="y", value="numpy.einsum('ij,jk,kl,lm->im', a, a, a, a)")])])])
    small = mdf_loops.safety.run_limited(model, {"a": np.eye(3)}, timeout=60, backend="scheduler")
    # the einsum loops 1000**5 times: past the plan's max_elements steps unless raised
    assert np.array_equal(small["n.y"], np.eye(3))
    with pytest.raises(ResourceLimitError, match="took longer than 2 s"):
        mdf_loops.safety.run_limited(model, {"a": np.ones((1000, 1000))}, timeout=2,
                                     backend="scheduler", max_elements=10**16)


def test_with_jax_loaded_the_limited_child_is_a_new_process_not_a_fork(tmp_path):
    """JAX's threads do not survive a fork (it warns); the child is then started afresh,
    from a script without a __main__ guard, and its limits hold as before."""
    pytest.importorskip("jax")
    import subprocess
    import sys

    script = tmp_path / "user_script.py"  # no `if __name__ == "__main__"` guard
    script.write_text(
        "import warnings, numpy as np\n"
        "warnings.simplefilter('error')\n"  # a fork warning would fail the script
        "import jax, mdf_loops\n"
        "from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort\n"
        "node = Node(id='n', input_ports=[InputPort(id='a')], output_ports=[OutputPort(\n"
        "    id='y', value=\"numpy.einsum('ij,jk,kl,lm->im', a, a, a, a)\")])\n"
        "model = Model(id='m', graphs=[Graph(id='main', nodes=[node])])\n"
        "small = mdf_loops.safety.run_limited(model, {'a': np.eye(3)}, timeout=120)\n"
        "print('SMALL', small['n.y'].tolist())\n"
        "try:\n"
        "    mdf_loops.safety.run_limited(model, {'a': np.ones((1000, 1000))}, timeout=2,\n"
        "                                 max_elements=10**16)\n"
        "except mdf_loops.MdfLoopsError as exc:\n"
        "    print('LONG', type(exc).__name__, exc)\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"SMALL {np.eye(3).tolist()}" in done.stdout
    assert "LONG ResourceLimitError" in done.stdout and "longer than 2 s" in done.stdout
    assert "fork" not in done.stderr


def test_the_content_key_follows_text_and_structure():
    from mdf_loops.safety.checks import model_digest

    weights = np.ones((3, 3))
    node = Node(id="n", input_ports=[InputPort(id="x")],
                parameters=[Parameter(id="W", value=weights),
                            Parameter(id="tags", value=[1, [2, "red"]])],
                output_ports=[OutputPort(id="y", value="W @ x")])
    model = Model(id="m", graphs=[Graph(id="main", nodes=[node])])
    key = model_digest(model)
    weights[0, 0] = 5.0  # numbers no check reads
    assert model_digest(model) == key
    node.parameters[1].value[1][1] = "open('f')"  # text inside a list
    assert model_digest(model) != key
    node.parameters[1].value[1][1] = "red"
    assert model_digest(model) == key
    node.output_ports.append(OutputPort(id="z", value="x"))
    assert model_digest(model) != key


@needs_input_port_fields  # time loops need modeci-mdf 0.4.14
@pytest.mark.parametrize("backend", ["python", "scheduler", "auto"])
def test_a_time_loop_that_grows_its_state_stops_at_the_step_past_max_elements(
        tmp_path, backend):
    # x keeps one element for 4 steps (the conversion's probe sees one shape), then doubles
    # each step: 2 ** (k - 3) elements at step k, first past 1,000 at k = 13 (iteration 12)
    doubled = next(k for k in range(100) if k > 3 and 2 ** (k - 3) > 1000)
    nodes = {"A": {"parameters": {
        "k": {"value": "k + 1", "default_initial_value": 0},
        "x": {"value": "numpy.concatenate([x, x]) if k > 3 else x",
              "default_initial_value": [1.0]}},
        "output_ports": {"out": {"value": "x[0]"}}}}
    path = tmp_path / "grow.json"
    path.write_text(json.dumps({"grow": {"format": "ModECI MDF v0.4", "generating_application":
                                         "test", "graphs": {"grow": {"nodes": nodes}}}}))
    with mdf_loops.safety.limits(max_elements=1000), pytest.raises(
            SizeLimitError, match=rf"iteration {doubled - 1}\b.*1024 elements"):
        mdf_loops.simulate(path, dt=1.0, steps=40, backend=backend)
