"""The ``mdf-loops`` command, run as a real program (a subprocess), success and failure paths.

Values are checked against numpy written here (leaky integrator, Elman RNN), the
expected outputs of ONNX conformance cases, and onnxruntime on exported files.
A failure must be one line on stderr (``mdf-loops: error: ...``) naming the file or
model element, with exit status 1 and nothing on stdout.

Starting Python with mdf-loops takes seconds, so the subprocesses are declared
with :func:`program` next to the test that checks them and all start together,
in parallel, the first time a test asks for a result. Cases that need no new
process (every example file, small option errors) call ``cli.main`` in-process.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnxruntime
import pytest

import mdf_loops
from conftest import assert_same, control_flow_cases, needs_dot
from mdf_loops import ops
from mdf_loops.cli import commands as cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
LEAKY = EXAMPLES / "leaky_integrator.json"


def untyped_leaky(folder: Path) -> Path:
    """The leaky integrator without its input types: wrong shapes then fail inside the loop."""
    document = json.loads(LEAKY.read_text())
    for port in document["leaky_integrator"]["graphs"]["main"]["nodes"]["integrate"]["input_ports"].values():
        port.pop("metadata", None)
    path = folder / "untyped_leaky.json"
    path.write_text(json.dumps(document))
    return path
ELMAN = EXAMPLES / "elman_rnn.json"
HAS_DOT = shutil.which("dot") is not None


#: the console script installed with the package, next to this Python
SCRIPT = shutil.which("mdf-loops", path=str(Path(sys.executable).parent))


def mdf_loops_command(*args, cwd: Path | None = None, script: bool = False) -> subprocess.CompletedProcess:
    """``python -m mdf_loops ARGS`` (the program behind the console script), or the
    installed ``mdf-loops`` script itself."""
    program = [SCRIPT] if script else [sys.executable, "-m", "mdf_loops"]
    return subprocess.run([*program, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=600)


# ---------------------------------------------------------------- programs run in parallel

_PROGRAMS: dict[str, tuple[tuple, str | None, bool]] = {}


def program(name: str, *args, after: str | None = None, script: bool = False) -> str:
    """Declare ``mdf-loops ARGS``, run in the workspace folder (after program ``after``;
    through the installed console script when ``script``)."""
    _PROGRAMS[name] = (args, after, script)
    return name


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A folder with the files the programs read."""
    folder = tmp_path_factory.mktemp("workspace")
    for name in ("test_scan9_sum", "test_loop16_seq_none"):
        (folder / f"{name}.onnx").write_bytes(control_flow_cases()[name].model.SerializeToString())
    np.save(folder / "x0.npy", np.array(0.25))
    np.save(folder / "current.npy", _current())
    (folder / "invalid.json").write_text(LEAKY.read_text().replace('"I_t"\n', '"I_t",\n "extra"\n', 1))
    (folder / "broken.json").write_text('{"model": {"graphs": {\n')
    (folder / "broken.yaml").write_text("model:\n  graphs: {main: [1, 2}\n")
    (folder / "earlier.npz").write_bytes(b"earlier")
    untyped_leaky(folder)
    return folder


@pytest.fixture(scope="module")
def results(workspace) -> dict[str, subprocess.CompletedProcess]:
    """Every declared program's result, by name (all started at once)."""
    def chain(name: str) -> dict:
        args, _, script = _PROGRAMS[name]
        if script and SCRIPT is None:
            return {name: None}
        done = {name: mdf_loops_command(*args, cwd=workspace, script=script)}
        for follower, (_, after, _) in _PROGRAMS.items():
            if after == name:
                done.update(chain(follower))
        return done

    roots = [name for name, (_, after, _) in _PROGRAMS.items() if after is None]
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        finished = list(pool.map(chain, roots))
    return {name: result for done in finished for name, result in done.items()}


def assert_one_error_line(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("mdf-loops: error: ")
    for fragment in fragments:
        assert fragment in lines[0]


# ---------------------------------------------------------------- oracles


def _current() -> np.ndarray:
    return np.random.default_rng(7).normal(size=40)


def leaky_oracle(x0: float, current: np.ndarray, dt: float = 0.1, tau: float = 2.0) -> np.ndarray:
    x, trace = x0, []
    for i_t in current:
        x = x + dt * (-x + i_t) / tau
        trace.append(x)
    return np.array(trace)


def _example(name: str):
    spec = importlib.util.spec_from_file_location(f"cli_example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def elman_oracle(h0: np.ndarray, x: np.ndarray) -> np.ndarray:
    w = _example("elman_rnn").weights()
    h, hidden = h0, []
    for x_t in x:
        h = np.tanh(w["W"] @ x_t + w["U"] @ h + w["b"])
        hidden.append(h)
    return np.array(hidden)


# ---------------------------------------------------------------- run, import, export, validate, render

PRINTED = program("printed", "run", LEAKY, "--input", "x0=0.5", "--input", "I=[1, 1, 0, 2]")


def test_run_prints_each_output_with_dtype_shape_and_values(results):
    result = results[PRINTED]
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # not a terminal: no progress, no notes
    lines = result.stdout.splitlines()
    expected = leaky_oracle(0.5, np.array([1.0, 1.0, 0.0, 2.0]))
    assert lines[0] == "integrate.x_final: float64, shape ()"
    assert float(lines[1]) == pytest.approx(expected[-1], abs=1e-6)
    assert lines[2] == "integrate.trace: float64, shape (4,)"
    shown = np.array([float(v) for v in lines[3].strip(" []").split()])
    np.testing.assert_allclose(shown, expected, atol=1e-6)


SAVED = program("saved", "run", LEAKY, "-i", "x0=x0.npy", "-i", "I=current.npy", "-o", "leaky_out.npz")


def test_run_reads_npy_files_and_saves_npz(results, workspace):
    result = results[SAVED]
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "mdf-loops: wrote 2 outputs to leaky_out.npz\n")
    with np.load(workspace / "leaky_out.npz") as saved:
        np.testing.assert_allclose(saved["integrate.trace"], leaky_oracle(0.25, _current()), rtol=1e-12)
        assert saved["integrate.x_final"].shape == ()


ONNX_RUN = program("onnx_run", "run", "test_scan9_sum.onnx", "-i", "initial=[0, 0]",
                   "-i", "x=[[1, 2], [3, 4], [5, 6]]")


def test_run_an_onnx_model_with_json_inputs_cast_to_the_declared_type(results):
    result = results[ONNX_RUN]
    assert result.returncode == 0, result.stderr
    expected_y, expected_z = control_flow_cases()["test_scan9_sum"].data_sets[0][1]
    lines = result.stdout.splitlines()
    assert lines[0] == f"y: float32, shape {expected_y.shape}"
    np.testing.assert_array_equal([float(v) for v in lines[1].strip(" []").split()], expected_y)
    assert lines[2] == f"z: float32, shape {expected_z.shape}"


IMPORTED = program("imported", "import", "test_loop16_seq_none.onnx", "-o", "loop16.yaml")
RUN_IMPORTED = program("run_imported", "run", "loop16.yaml", "-i", "trip_count=5", "-i", "cond=true",
                       "-i", "opt_seq=[0]", "-o", "loop16_out.npz", after=IMPORTED)


def test_import_then_run_a_loop_with_a_nested_if(results, workspace):
    assert (results[IMPORTED].returncode, results[IMPORTED].stderr) == (0, "mdf-loops: wrote loop16.yaml\n")
    assert results[RUN_IMPORTED].returncode == 0, results[RUN_IMPORTED].stderr
    (expected,) = control_flow_cases()["test_loop16_seq_none"].data_sets[0][1]
    with np.load(workspace / "loop16_out.npz") as saved:
        assert sorted(saved.files) == [f"seq_res[{k}]" for k in range(len(expected))]
        assert_same([saved[f"seq_res[{k}]"] for k in range(len(expected))], expected)


EXPORTED = program("exported", "export", ELMAN, "-o", "elman.onnx")


def test_export_writes_onnx_that_onnxruntime_runs_to_the_numpy_result(results, workspace):
    assert (results[EXPORTED].returncode, results[EXPORTED].stderr) == (0, "mdf-loops: wrote elman.onnx\n")
    inputs = _example("elman_rnn").example_inputs()
    session = onnxruntime.InferenceSession(str(workspace / "elman.onnx"),
                                           providers=["CPUExecutionProvider"])
    outputs = dict(zip([o.name for o in session.get_outputs()], session.run(None, inputs)))
    np.testing.assert_allclose(outputs["rnn.hidden"], elman_oracle(inputs["h0"], inputs["x"]),
                               rtol=1e-9)


EXPORTED_LEAKY = program("exported_leaky", "export", LEAKY, "-o", "leaky.onnx")


def test_export_reads_the_declared_input_types(results, workspace):
    # no example inputs: the leaky integrator's ports declare a scalar and a sequence
    assert (results[EXPORTED_LEAKY].returncode, results[EXPORTED_LEAKY].stderr) == \
        (0, "mdf-loops: wrote leaky.onnx\n")
    session = onnxruntime.InferenceSession(str(workspace / "leaky.onnx"),
                                           providers=["CPUExecutionProvider"])
    # the example's defaults make its inputs optional ones: inputs that may be left out
    assert session.get_overridable_initializers() == []
    assert [(i.name, i.type, i.shape) for i in session.get_inputs()] == [
        ("x0", "optional(tensor(double))", []), ("I", "optional(tensor(double))", ["steps"])]
    x_final, trace = session.run(None, {"x0": np.array(0.25), "I": _current()})
    np.testing.assert_allclose(trace, leaky_oracle(0.25, _current()), rtol=1e-12)
    np.testing.assert_allclose(x_final, trace[-1], rtol=1e-12)


RENDERED = program("rendered", "render", "test_loop16_seq_none.onnx", "-o", "loop16.png", "-q")


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot program is not installed")
def test_render_writes_a_png(results, workspace):
    assert (results[RENDERED].returncode, results[RENDERED].stdout, results[RENDERED].stderr) == (0, "", "")
    assert (workspace / "loop16.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


VALID = program("valid", "validate", LEAKY, script=True)


def test_the_installed_console_script_validates_a_model(results):
    if results[VALID] is None:
        pytest.skip("the package is not installed with its console script")
    assert (results[VALID].returncode, results[VALID].stdout, results[VALID].stderr) == \
        (0, f"{LEAKY}: valid\n", "")


# ---------------------------------------------------------------- failure paths

MISSING = program("missing", "run", "absent.json")
BROKEN_JSON = program("broken_json", "run", "broken.json")
BROKEN_YAML = program("broken_yaml", "validate", "broken.yaml")


def test_a_missing_or_malformed_model_file(results):
    assert_one_error_line(results[MISSING], "absent.json: no such file")
    assert_one_error_line(results[BROKEN_JSON], "broken.json: not valid JSON", "(line 2, column 1)")
    assert_one_error_line(results[BROKEN_YAML], "broken.yaml: not valid YAML", "line 2")


RUN_INVALID = program("run_invalid", "run", "invalid.json", "-i", "x0=0", "-i", "I=[1]")
VALIDATE_INVALID = program("validate_invalid", "validate", "invalid.json")


def test_a_model_that_fails_validation(results):
    assert_one_error_line(results[RUN_INVALID], "invalid.json is not a valid model: ",
                          "graphs.main.nodes.integrate.parameters.body: expects 2 formal inputs")
    result = results[VALIDATE_INVALID]
    assert result.returncode == 1
    assert result.stdout == ("graphs.main.nodes.integrate.parameters.body: expects 2 formal inputs "
                             "(1 state + 1 scan input), found 3\n")
    assert result.stderr == "mdf-loops: invalid.json: 1 problem\n"


LOOP_SHAPE = program("loop_shape", "run", "untyped_leaky.json", "-i", "x0=0",
                     "-i", "I=[[1, 2], [3, 4]]", "-o", "earlier.npz", "--backend", "scheduler")
DECLARED_SHAPE = program("declared_shape", "run", LEAKY, "-i", "x0=0", "-i", "I=[[1, 2], [3, 4]]",
                         "-o", "earlier.npz")


def test_an_input_with_the_wrong_shape(results, workspace):
    assert_one_error_line(results[LOOP_SHAPE], "node 'integrate'",
                          "state 0 changed shape from () to (2,)", "iteration 0")
    assert (workspace / "earlier.npz").read_bytes() == b"earlier"  # a failed run writes nothing
    assert not [p for p in workspace.iterdir() if p.name.endswith(".part")]


def test_an_input_against_its_declared_type(results, workspace):
    assert_one_error_line(results[DECLARED_SHAPE], "input 'I'",
                          "expected shape [?] (as the model declares), got [2, 2]")
    assert (workspace / "earlier.npz").read_bytes() == b"earlier"


# ---------------------------------------------------------------- progress on a terminal


@pytest.mark.skipif(not hasattr(ops, "observe_iterations"),
                    reason="the engine offers no iteration hook (ops.observe_iterations)")
@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_progress_shows_on_a_terminal(tmp_path):
    import pty

    np.save(tmp_path / "current.npy", np.ones(40000))
    args = [sys.executable, "-m", "mdf_loops", "run", str(LEAKY), "--backend", "scheduler", "-i", "x0=0",
            "-i", f"I={tmp_path / 'current.npy'}", "-o", str(tmp_path / "out.npz")]
    controller, terminal = pty.openpty()
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=terminal)
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the program ended and closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    process.wait(timeout=600)
    os.close(controller)
    assert process.returncode == 0
    assert re.search(rb"node 'integrate': iteration [\d,]+/40,000", shown), shown[-300:]


# ---------------------------------------------------------------- in-process: option errors


def _main(capsys, *args) -> tuple[int, str, str]:
    status = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _error(capsys, *args) -> str:
    status, out, err = _main(capsys, *args)
    assert (status, out) == (1, "")
    assert err.count("\n") == 1 and err.startswith("mdf-loops: error: ")
    return err


def test_input_options_that_do_not_fit(capsys, tmp_path):
    assert "unknown input 'current'; the model takes 'I', 'x0'" in _error(capsys, "run", LEAKY, "-i", "current=[1]")
    assert "input 'I': 'ones' is neither a .npy/.npz file nor a JSON value" in _error(capsys, "run", LEAKY, "-i", "I=ones")
    no_defaults = tmp_path / "no_defaults.json"
    document = json.loads(LEAKY.read_text())
    for port in document["leaky_integrator"]["graphs"]["main"]["nodes"]["integrate"]["input_ports"].values():
        port.pop("default_value")
    no_defaults.write_text(json.dumps(document))
    assert "missing inputs ['I']" in _error(capsys, "run", no_defaults, "-i", "x0=0")
    assert "absent.npy: no such file" in _error(capsys, "run", LEAKY, "-i", f"I={tmp_path / 'absent.npy'}")
    np.savez(tmp_path / "other.npz", J=np.ones(3))
    assert "holds no array 'I' (it holds J)" in _error(capsys, "run", LEAKY, "-i", f"I={tmp_path / 'other.npz'}")
    assert "input 'x0' is given twice" in _error(capsys, "run", LEAKY, "-i", "x0=0", "-i", "x0=1")


def test_outputs_of_the_wrong_kind_are_refused(capsys, tmp_path):
    assert "x.txt: the output must end in .png or .svg or .pdf" in _error(capsys, "render", LEAKY, "-o", tmp_path / "x.txt")
    assert "x.txt: the output must end in .npz or .npy or .json or .csv" in \
        _error(capsys, "run", LEAKY, "-o", tmp_path / "x.txt")
    assert "folder" in _error(capsys, "import", tmp_path / "m.onnx", "-o", tmp_path / "absent" / "m.json")
    assert "expected an .onnx file, or a TorchScript module (.pt, .pth), to import" in \
        _error(capsys, "import", LEAKY, "-o", tmp_path / "m.json")
    assert list(tmp_path.iterdir()) == []


def test_an_expected_json_literal_is_typed_by_the_declaration(capsys):
    status, out, _ = _main(capsys, "run", ELMAN, "-i", "h0=[0, 0, 0, 0, 0]", "-i", "x=[[1, 0, 0]]")
    assert status == 0
    assert "rnn.hidden: float64, shape (1, 5)" in out
    assert "expected shape [5]" in _error(capsys, "run", ELMAN, "-i", "h0=[0, 0]", "-i", "x=[[1, 0, 0]]")


def test_an_input_against_the_declared_shape_of_an_onnx_model(capsys, tmp_path):
    path = tmp_path / "scan9.onnx"
    path.write_bytes(control_flow_cases()["test_scan9_sum"].model.SerializeToString())
    assert "input 'initial': expected shape [2] (as the model declares), got [3]" in \
        _error(capsys, "run", path, "-i", "initial=[0, 0, 0]", "-i", "x=[[1, 2]]")
    x = np.array([[1, 2], [3, 4], [5, 6]])
    for dtype in (np.int64, np.float64):  # cast to the declared float32
        np.save(tmp_path / "x.npy", x.astype(dtype))
        status, out, _ = _main(capsys, "run", path, "-i", "initial=[0.5, 0]", "-i", f"x={tmp_path / 'x.npy'}")
        assert status == 0 and "y: float32, shape (2,)\n  [ 9.5 12. ]" in out
    np.save(tmp_path / "x.npy", x.astype(np.complex64))
    assert "input 'x': complex64 values for an input the model declares float32" in \
        _error(capsys, "run", path, "-i", "initial=[0, 0]", "-i", f"x={tmp_path / 'x.npy'}")


def test_all_inputs_from_one_npz_and_quiet(capsys, tmp_path):
    inputs = _example("elman_rnn").example_inputs()
    np.savez(tmp_path / "inputs.npz", **inputs)
    assert _main(capsys, "run", ELMAN, "--input", tmp_path / "inputs.npz", "-o", tmp_path / "out.npz",
                 "--quiet") == (0, "", "")
    with np.load(tmp_path / "out.npz") as saved:
        np.testing.assert_allclose(saved["rnn.hidden"], elman_oracle(inputs["h0"], inputs["x"]),
                                   rtol=1e-10)


def test_verbose_adds_the_traceback(capsys, tmp_path):
    status, out, err = _main(capsys, "run", untyped_leaky(tmp_path), "-v", "-i", "x0=0",
                             "-i", "I=[[1, 2]]")
    assert (status, out) == (1, "")
    assert "Traceback (most recent call last)" in err
    assert err.rstrip().splitlines()[-1].startswith("mdf-loops: error: node 'integrate'")


def test_refuses_to_overwrite_the_model_it_reads(capsys, tmp_path):
    model = tmp_path / "leaky.json"
    model.write_text(LEAKY.read_text())
    assert "leaky.json: refusing to overwrite the input file" in _error(capsys, "import", model, "-o", model)
    os.link(model, tmp_path / "same_file.onnx")  # another name of the model file
    assert "same_file.onnx: refusing to overwrite the input file" in \
        _error(capsys, "export", model, "-o", tmp_path / "same_file.onnx")
    assert model.read_text() == LEAKY.read_text()


def test_large_arrays_are_abbreviated_on_a_terminal_only(capsys, tmp_path, monkeypatch):
    np.save(tmp_path / "current.npy", np.linspace(0.0, 1.0, 5000))
    run = ("run", LEAKY, "-i", "x0=0", "-i", f"I={tmp_path / 'current.npy'}")
    status, out, _ = _main(capsys, *run)  # stdout is not a terminal here: every value, exactly
    assert status == 0 and "..." not in out
    printed = np.array([float(v) for v in out.split("shape (5000,)\n")[1].replace("[", " ")
                        .replace("]", " ").split()])
    expected = leaky_oracle(0.0, np.linspace(0.0, 1.0, 5000))
    np.testing.assert_array_equal(printed, expected)  # full precision: equal, not close
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    status, out, _ = _main(capsys, *run)
    assert "integrate.trace: float64, shape (5000,)" in out and "..." in out
    assert len(out) < 400
    status, out, _ = _main(capsys, *run, "--full")
    assert "..." not in out and len(out) > 5000


@pytest.mark.parametrize("extension", [".npz", ".npy", ".json", ".csv"])
def test_run_saves_outputs_in_each_format(extension, capsys, tmp_path):
    """Every format holds the leaky integrator's values, checked against numpy written here."""
    current = np.linspace(-1.0, 1.0, 7)
    model = LEAKY if extension != ".npy" else _one_output_leaky(tmp_path)
    target = tmp_path / f"out{extension}"
    status, out, err = _main(capsys, "run", model, "-i", "x0=0.5", "-i", f"I={current.tolist()}",
                             "-o", target)
    assert (status, out) == (0, ""), err
    trace = leaky_oracle(0.5, current)
    if extension == ".npz":
        with np.load(target) as saved:
            np.testing.assert_array_equal(saved["integrate.trace"], trace)
    elif extension == ".npy":
        np.testing.assert_array_equal(np.load(target), trace)
    elif extension == ".json":
        saved = json.loads(target.read_text())
        assert saved["integrate.trace"]["dtype"] == "float64"
        assert saved["integrate.trace"]["shape"] == [7]
        np.testing.assert_array_equal(saved["integrate.trace"]["values"], trace)
        assert saved["integrate.x_final"]["values"] == trace[-1]
    else:
        import csv

        rows = list(csv.reader(target.read_text().splitlines()))
        assert rows[0] == ["output", "i0", "value"]
        assert rows[1] == ["integrate.x_final", "", repr(float(trace[-1]))]
        values = [float(r[2]) for r in rows[2:] if r[0] == "integrate.trace"]
        assert [int(r[1]) for r in rows[2:]] == list(range(7))
        np.testing.assert_array_equal(values, trace)


def _one_output_leaky(folder: Path) -> Path:
    document = json.loads(LEAKY.read_text())
    document["leaky_integrator"]["graphs"]["main"]["nodes"]["integrate"]["output_ports"].pop("x_final")
    path = folder / "one_output.json"
    path.write_text(json.dumps(document))
    return path


def test_an_npy_file_for_several_outputs_is_refused_before_running(capsys, tmp_path):
    err = _error(capsys, "run", LEAKY, "-o", tmp_path / "out.npy")
    assert "an .npy file holds one array, and the model has 2 outputs" in err
    assert "integrate.x_final, integrate.trace" in err and "OUT.npz" in err


def test_no_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main([])
    assert stop.value.code == 2
    assert "usage: mdf-loops" in capsys.readouterr().err


# ---------------------------------------------------------------- in-process: every example


EXAMPLE_FILES = sorted(EXAMPLES.glob("*.json"))


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_validate_and_render_every_example(example, tmp_path, capsys):
    assert _main(capsys, "validate", example) == (0, f"{example}: valid\n", "")
    yaml_file = example.with_suffix(".yaml")
    assert _main(capsys, "validate", yaml_file) == (0, f"{yaml_file}: valid\n", "")
    if HAS_DOT:
        assert _main(capsys, "render", yaml_file, "-o", tmp_path / "x.svg")[0] == 0
        assert "<svg" in (tmp_path / "x.svg").read_text()


def _inputs_of(example: Path) -> dict | None:
    script = example.with_suffix(".py")
    make = getattr(_example(example.stem), "example_inputs", None) if script.exists() else None
    if make is None or any(p.default is inspect.Parameter.empty
                           for p in inspect.signature(make).parameters.values()):
        return None
    inputs = make()
    if not inputs or not all(isinstance(v, np.ndarray) for v in inputs.values()):
        return None
    return inputs


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_run_every_example_from_an_npz(example, tmp_path, capsys):
    """The command hands inputs and outputs through unchanged: its .npz equals what
    ``mdf_loops.run`` returns (whose values test_examples.py checks against numpy)."""
    inputs = _inputs_of(example)
    if inputs is None:
        pytest.skip("the example script gives no example_inputs() of arrays")
    np.savez(tmp_path / "inputs.npz", **inputs)
    status, _, err = _main(capsys, "run", example, "-i", tmp_path / "inputs.npz", "-o", tmp_path / "out.npz")
    assert status == 0, err
    expected = mdf_loops.run(example, inputs)
    with np.load(tmp_path / "out.npz") as saved:
        assert sorted(saved.files) == sorted(expected)
        for name, value in expected.items():
            assert_same(saved[name], value, rtol=0, atol=0)


# ---------------------------------------------------------------- the documentation pages


@needs_dot  # the page renders a picture
def test_the_console_sessions_of_docs_cli_md(capsys, tmp_path, monkeypatch):
    """Every ``$ mdf-loops ...`` line of docs/cli.md prints what the page shows after it
    (run in a scratch folder that sees the examples; python blocks run in test_docs.py)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "examples").symlink_to(EXAMPLES)
    (tmp_path / "broken_model.json").write_text(
        LEAKY.read_text().replace('"I_t"\n', '"I_t",\n "extra"\n', 1))
    commands = 0
    for block in re.findall(r"^```console\n(.*?)^```", (ROOT / "docs" / "cli.md").read_text(),
                            re.S | re.M):
        for session in re.split(r"^\$ ", block, flags=re.M)[1:]:
            command, _, shown = session.partition("\n")
            words = shlex.split(command)
            assert words[0] == "mdf-loops"
            cli.main(words[1:])
            captured = capsys.readouterr()
            assert captured.out + captured.err == shown, command
            commands += 1
    assert commands >= 10


def test_the_progress_line_shows_each_enclosing_loop_with_its_total():
    import io

    stream = io.StringIO()
    from mdf_loops.cli.progress import ProgressLine

    line = ProgressLine(stream)
    line.started -= 1.0  # past the first half second
    line.update("node 'trials'", 4, 200)
    line.last = 0.0
    line.update("node 'trials' > iteration 4 > node 'steps'", 96, None)
    shown = "node 'trials' > iteration 4/200 > node 'steps': iteration 96"
    assert stream.getvalue().endswith("\r" + shown)
    line.clear()
    assert stream.getvalue().endswith("\r" + " " * len(shown) + "\r")


def test_the_progress_line_shows_the_elapsed_time_when_no_loop_reports():
    """onnxruntime runs a model as one call: the line shows the time since the start."""
    import io

    from mdf_loops.cli.progress import ProgressLine

    stream = io.StringIO()
    line = ProgressLine(stream)
    line.elapsed()
    assert stream.getvalue() == ""  # nothing in the first second
    line.started -= 75.2
    line.elapsed()
    assert stream.getvalue() == "\rrunning: 75 s"
    line.last_iteration = line.started + 75.0  # a loop reported just now: its line stays
    line.elapsed()
    assert stream.getvalue() == "\rrunning: 75 s"


def test_the_progress_display_stops_its_clock_and_clears_the_line():
    import io
    import threading

    from mdf_loops.cli.progress import progress

    stream = io.StringIO()
    with progress(stream):
        assert any(t.name == "mdf-loops progress" for t in threading.enumerate())
    assert not any(t.name == "mdf-loops progress" for t in threading.enumerate())
    assert stream.getvalue() == ""  # a short block shows nothing


# ---------------------------------------------------------------- a fast start


def _fresh_python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_parsing_arguments_imports_nothing_heavy():
    """``mdf-loops --help`` needs neither modeci-mdf, graph-scheduler, onnx nor onnxruntime."""
    heavy = ("modeci_mdf", "graph_scheduler", "onnx", "onnxruntime", "mdf_loops.authoring")
    shown = _fresh_python(
        "import sys, contextlib, io\n"
        "from mdf_loops.cli import commands\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try: commands.main(['--help'])\n"
        "    except SystemExit: pass\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    assert shown == "[]"


def test_validate_does_not_import_the_engine():
    shown = _fresh_python(
        "import sys\n"
        "from mdf_loops.cli import commands\n"
        "assert commands.main(['-q', 'validate', 'examples/lstm_cell.json']) == 0\n"
        "print(sorted(m for m in ('graph_scheduler', 'onnxruntime', 'modeci_mdf.execution_engine')"
        " if m in sys.modules))")
    assert shown == "[]"


def test_a_valid_model_runs_and_validates_without_jsonschema(tmp_path):
    """Whether a file conforms to the JSON Schema is answered without jsonschema, which
    is imported only to say what is wrong in a file that does not."""
    broken = json.loads(LEAKY.read_text())
    broken["leaky_integrator"]["graphs"]["main"]["nodes"]["integrate"]["parameters"]["p.q"] = {}
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    shown = _fresh_python(
        "import sys, contextlib, io\n"
        "from mdf_loops.cli import commands\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert commands.main(['-q', 'run', 'examples/newton.json']) == 0\n"
        "    assert commands.main(['-q', 'validate', 'examples/lstm_cell.json']) == 0\n"
        "before = 'jsonschema' in sys.modules\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        f"    assert commands.main(['-q', 'validate', {str(tmp_path / 'broken.json')!r}]) == 1\n"
        "print(before, 'jsonschema' in sys.modules, repr(out.getvalue()))")
    before, after, report = shown.splitlines()[-1].split(" ", 2)
    assert (before, after) == ("False", "True")
    assert "nodes.integrate.parameters: 'p.q' is not an id" in report


@pytest.mark.parametrize("order", ["mdf_loops first", "engine first"])
def test_import_mdf_loops_registers_the_loops_in_either_order(order):
    """The stock engine runs a Scan after ``import mdf_loops``, whichever is imported first;
    the value is checked against numpy (the leaky integrator's recurrence)."""
    imports = ["import mdf_loops", "from modeci_mdf.execution_engine import EvaluableGraph"]
    if order == "engine first":
        imports.reverse()
    shown = _fresh_python("\n".join(imports) + "\n"
                          "import numpy as np\n"
                          "from modeci_mdf.utils import load_mdf\n"
                          "engine = EvaluableGraph(load_mdf('examples/leaky_integrator.json').graphs[0])\n"
                          "engine.evaluate(initializer={'x0': np.array(0.5), 'I': np.ones(3)})\n"
                          "print(float(engine.enodes['integrate'].evaluable_outputs['x_final'].curr_value))")
    x = 0.5
    for _ in range(3):
        x = x + 0.1 * (-x + 1.0) / 2.0
    assert float(shown.splitlines()[-1]) == pytest.approx(x, abs=1e-12)
