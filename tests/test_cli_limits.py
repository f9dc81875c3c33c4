"""The command's safety options: --trusted, the work limits and --timeout (real subprocesses)."""

from __future__ import annotations

import subprocess
import sys
import time

from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter

import mdf_loops


def _command(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mdf_loops", *args], capture_output=True,
                          text=True, timeout=timeout)


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
    mdf_loops.set_body_signature(body, ["i", "cond", "x"], ["step.go", "step.x_next"])
    loop = Node(id="counter", input_ports=[InputPort(id="start")], parameters=[
        Parameter(id="body", value=mdf_loops.wrap_body(body)),
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
