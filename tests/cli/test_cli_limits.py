"""The command's safety options: --trusted, the work limits and --timeout (real subprocesses)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import needs_dot, needs_input_port_fields
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter

import mdf_loops

EXAMPLES = Path(__file__).parents[2] / "examples"


def _command(*args: str, timeout: float = 300, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mdf_loops", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def _one_error_line(result: subprocess.CompletedProcess, *pieces: str) -> None:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for piece in pieces:
        assert piece in lines[0], lines[0]


def _counter_model(path, limit_expression: str = "x < 1e12") -> str:
    """A while loop x <- x + 1 that runs until ``limit_expression`` turns false."""
    step = Node(id="step", input_ports=[InputPort(id="x")],
                output_ports=[OutputPort(id="x_next", value="x + 1"),
                              OutputPort(id="go", value=limit_expression.replace("x", "(x + 1)"))])
    body = Graph(id="count_body", nodes=[step])
    mdf_loops.model.set_body_signature(body, ["i", "cond", "x"], ["step.go", "step.x_next"])
    loop = Node(id="counter", input_ports=[InputPort(id="start")], parameters=[
        Parameter(id="body", value=mdf_loops.model.wrap_body(body)),
        Parameter(id="counter", function="onnx::Loop", args={"cond": "True", "v_initial": "[start]"}),
    ], output_ports=[OutputPort(id="final", value="counter[0]")])
    Model(id="counter", graphs=[Graph(id="main", nodes=[loop])]).to_json_file(str(path))
    return str(path)


def test_max_iterations_stops_a_loop_that_runs_on(tmp_path):
    model = _counter_model(tmp_path / "counter.json")
    result = _command("run", model, "-i", "start=0", "--backend", "scheduler",
                      "--max-iterations", "50")
    _one_error_line(result, "node 'counter'", "iteration 50", "--max-iterations")


def test_a_limit_must_be_a_positive_number(tmp_path):
    result = _command("run", _counter_model(tmp_path / "c.json"), "--max-iterations", "0")
    assert result.returncode == 2 and "positive" in result.stderr


def test_timeout_ends_a_long_run_with_one_line(tmp_path):
    model = _counter_model(tmp_path / "counter.json")
    started = time.monotonic()
    result = _command("run", model, "-i", "start=0", "--backend", "scheduler",
                      "--max-iterations", "100000000", "--max-total-iterations", "100000000",
                      "--timeout", "3")
    _one_error_line(result, "took longer than 3 s", "--timeout")
    assert time.monotonic() - started < 120


def test_an_untrusted_expression_is_refused_and_trusted_runs_it(tmp_path):
    node = Node(id="calc", input_ports=[InputPort(id="x")],
                output_ports=[OutputPort(id="y", value="__import__('math').sqrt(x)")])
    path = tmp_path / "sqrt.json"
    Model(id="sqrt", graphs=[Graph(id="main", nodes=[node])]).to_json_file(str(path))
    refused = _command("run", str(path), "-i", "x=16")
    _one_error_line(refused, "__import__", "refused")
    trusted = _command("run", str(path), "-i", "x=16", "--trusted", "--backend", "scheduler")
    assert trusted.returncode == 0, trusted.stderr
    assert "4" in trusted.stdout


# ---------------------------------------------------------------- limits the kernel enforces


def _peak_command(*args: str) -> tuple[subprocess.CompletedProcess, int]:
    """The command run inside a Python child, which reports the peak memory (MB) of the
    processes the command forked and waited for: with --max-memory, the one that did
    the work. (Measured in a fresh Python: a process started from this one would count
    this process's own peak too, which Linux keeps across exec.)"""
    code = ("import resource, sys\n"
            "from mdf_loops.cli.commands import main\n"
            "status = main(sys.argv[1:])\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024,"
            " file=sys.stderr)\n"
            "sys.exit(status)\n")
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=300)
    *lines, peak = done.stderr.strip().splitlines()
    done.stderr = "\n".join(lines) + "\n"
    return done, int(peak)


def _einsum_model(tmp_path) -> tuple[str, str]:
    import numpy as np

    node = Node(id="n", input_ports=[InputPort(id="a")], output_ports=[
        OutputPort(id="out", value="numpy.einsum('ij,jk,kl,lm->im', a, a, a, a)")])
    path = tmp_path / "einsum.json"
    Model(id="m", graphs=[Graph(id="main", nodes=[node])]).to_json_file(str(path))
    np.save(tmp_path / "a.npy", np.ones((1000, 1000)))
    return str(path), f"a={tmp_path / 'a.npy'}"


def test_timeout_stops_one_long_c_call_and_writes_nothing(tmp_path):
    model, data = _einsum_model(tmp_path)
    out = tmp_path / "out.npz"
    started = time.monotonic()
    # the einsum loops 1000**5 times: its plan refuses it unless max_elements is raised
    result = _command("run", model, "-i", data, "--backend", "scheduler", "--timeout", "3",
                      "--max-elements", str(10**16), "-o", str(out))
    _one_error_line(result, "took longer than 3 s", "--timeout", "nothing was written")
    assert time.monotonic() - started < 60  # the einsum alone takes many minutes
    assert not out.exists() and not list(tmp_path.glob(".out.npz.*"))


@pytest.mark.parametrize(
    "command", [["validate"], ["export", "-o", "out.onnx"], ["render", "-o", "out.svg"]])
def test_timeout_covers_loading_a_huge_file(tmp_path, command):
    path = tmp_path / "keys.yaml"
    with open(path, "w") as handle:
        handle.write("m:\n  graphs:\n    main:\n      nodes:\n        n:\n          metadata:\n")
        for k in range(1_000_000):
            handle.write(f"            k{k}: {k}\n")
    started = time.monotonic()
    result = _command(command[0], str(path), *command[1:], "--timeout", "2", cwd=tmp_path)
    _one_error_line(result, "took longer than 2 s")
    assert time.monotonic() - started < 60
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys.yaml"]  # nothing written


@pytest.mark.parametrize(
    "command, suffix", [("export", ".onnx"), pytest.param("render", ".svg", marks=needs_dot)])
def test_a_command_under_limits_writes_the_same_file(tmp_path, command, suffix):
    example = str(EXAMPLES / "elman_rnn.json")
    plain = _command(command, example, "-o", f"plain{suffix}", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    result = _command(command, example, "-o", f"limited{suffix}", "--timeout", "60",
                      "--max-memory", "4G", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / f"plain{suffix}").read_bytes() == (tmp_path / f"limited{suffix}").read_bytes()


def test_max_memory_caps_the_run_and_memory_stays_under_it(tmp_path):
    node = Node(id="n", input_ports=[InputPort(id="a")],
                output_ports=[OutputPort(id="out", value="numpy.outer(a, a)")])
    path = tmp_path / "outer.json"
    Model(id="m", graphs=[Graph(id="main", nodes=[node])]).to_json_file(str(path))
    import numpy as np

    np.save(tmp_path / "a.npy", np.ones(30000))  # the outer product: 7.2 GB
    out = tmp_path / "out.npz"
    # max_elements raised past the product's 9e8 elements, so that the size plan lets it
    # through and only the kernel's cap stops it
    result, peak = _peak_command("run", str(path), "-i", f"a={tmp_path / 'a.npy'}",
                                 "--backend", "scheduler", "--max-memory", "1G",
                                 "--max-elements", "2000000000", "-o", str(out))
    _one_error_line(result, "--max-memory")
    assert peak < 1024 and not out.exists()


def test_max_memory_must_be_a_size(tmp_path):
    result = _command("run", _counter_model(tmp_path / "c.json"), "--max-memory", "lots")
    assert result.returncode == 2 and "size" in result.stderr


def test_a_model_runs_normally_under_limits(tmp_path):
    model = _counter_model(tmp_path / "counter.json", "x < 5")
    out = tmp_path / "out.npz"
    result = _command("run", model, "-i", "start=0", "--timeout", "120", "--max-memory", "4G",
                      "-o", str(out))
    assert result.returncode == 0, result.stderr
    import numpy as np

    with np.load(out) as archive:
        assert float(archive["counter.final"]) == 5.0


@pytest.mark.parametrize("argv", [
    ["run", "{example}", "--backend", "scheduler"],
    ["validate", "{example}"],
    ["export", "{example}", "-o", "{tmp}/out.onnx"],
])
def test_commands_called_in_a_process_with_jax_loaded_run_limited_in_a_new_python(
        tmp_path, argv, capsys):
    """With JAX loaded the limited child is started afresh, not forked: the work of each
    command must travel pickled."""
    pytest.importorskip("jax")
    from mdf_loops.cli.commands import main

    example = str(EXAMPLES / "leaky_integrator.json")
    argv = [a.format(example=example, tmp=tmp_path) for a in argv]
    assert main([*argv, "--timeout", "120"]) == 0, capsys.readouterr().err
    limited = capsys.readouterr().out
    assert main(argv) == 0
    assert capsys.readouterr().out == limited


def test_the_fix_a_limit_error_suggests_works_on_the_command_that_hit_it(tmp_path):
    """Each command's message names its own option (also from the child --timeout
    starts, below), and running with that option gives the answer: the model's own count
    here, FitzHugh-Nagumo's Euler step in numpy for simulate."""
    counter = _counter_model(tmp_path / "counter.json", "x < 120")
    hit = _command("run", counter, "-i", "start=0", "--backend", "scheduler",
                   "--max-iterations", "50")
    _one_error_line(hit, "raise it with `mdf-loops run --max-iterations N`")
    fixed = _command("run", counter, "-i", "start=0", "--backend", "scheduler",
                     "--max-iterations", "500")
    assert fixed.returncode == 0 and "120" in fixed.stdout, fixed.stderr


@needs_input_port_fields  # time loops need modeci-mdf >= 0.4.14
def test_the_fix_a_limit_error_suggests_works_on_simulate(tmp_path):
    fn = str(EXAMPLES / "timeloops" / "fitzhugh_nagumo.json")
    out = tmp_path / "fn.npz"
    for extra in ([], ["--timeout", "120"]):
        hit = _command("simulate", fn, "--dt", "0.05", "--steps", "60", "--max-iterations", "50",
                       *extra)
        _one_error_line(hit, "raise it with `mdf-loops simulate --max-iterations N`")
    fixed = _command("simulate", fn, "--dt", "0.05", "--steps", "60", "--max-iterations", "60",
                     "-q", "-o", str(out))
    assert fixed.returncode == 0, fixed.stderr
    import numpy as np

    v, w, expected = -1.0, 1.0, [-1.0]
    for _ in range(59):
        v = v + (v - v**3 / 3 - w + 0.5) * 0.05  # modeci-mdf's order: W reads the new V
        w = w + (v + 0.7 - 0.8 * w) / 12.5 * 0.05
        expected.append(v)
    np.testing.assert_allclose(np.load(out)["fn.V_out"], expected, rtol=1e-12)


def test_a_limit_a_command_has_no_option_for_is_said_so(tmp_path):
    from mdf_loops.ops.common import command_line, how_to_raise

    with command_line("sweep", frozenset()):
        assert how_to_raise("max_iterations") == (
            "`mdf-loops sweep` has no option for it; raise it from Python with "
            "`with mdf_loops.safety.limits(max_iterations=N):` around the call "
            "(or mdf_loops.run(..., max_iterations=N))")
    assert how_to_raise("max_drawn_items") == (
        "raise it with `with mdf_loops.safety.limits(max_drawn_items=N):` around the call "
        "(or mdf_loops.render(..., max_drawn_items=N))")
    with command_line("render", frozenset({"max_drawn_items"})):
        assert how_to_raise("max_drawn_items") == "raise it with `mdf-loops render --max-drawn-items N`"
