"""The benchmark runs and checks mdf-loops' outputs (it asserts no time)."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import loops as bench  # noqa: E402  (benchmarks/ is outside the package)
from mdf_loops.workloads import running_sum, while_loop


def test_measure_checks_every_mdf_loops_mode_against_numpy():
    rows = bench.measure(running_sum(50), runs=1, slow_runs=1, memory=False)
    runners = {r.runner for r in rows}
    assert {"onnxruntime", "onnx.reference", "numpy loop", "mdf_loops auto",
            "mdf_loops scheduler", "mdf_loops onnxruntime", bench.STOCK_ENGINE} <= runners
    assert all(r.correct for r in rows if r.runner.startswith("mdf_loops"))
    assert next(r for r in rows if r.runner == bench.STOCK_ENGINE).correct
    assert next(r for r in rows if r.runner == "onnxruntime").ratio_to_onnxruntime == 1.0
    assert next(r for r in rows if r.runner == "onnx.reference").ratio_to_reference == 1.0
    scheduler = next(r for r in rows if r.runner == "mdf_loops scheduler")
    reference = next(r for r in rows if r.runner == "onnx.reference")
    assert scheduler.ratio_to_reference == scheduler.median_ms / reference.median_ms


def test_the_command_writes_its_table_as_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench.main(["--quick", "--runs", "1", "--no-memory", "--memory-steps", "0",
                       "--json", str(out)]) == 0
    table = json.loads(out.read_text())["timings"]
    assert {row["workload"] for row in table} >= {while_loop(50).name}
    printed = capsys.readouterr().out
    assert "x ORT" in printed and "x ref" in printed


def test_peak_memory_is_reported():
    rows = bench.measure(running_sum(20), runs=1, slow_runs=1, memory=True,
                         skip=("onnx.reference", "mdf_loops scheduler"))
    assert all(r.peak_python_mb is not None and r.peak_python_mb >= 0 for r in rows)


def test_memory_probe_reports_growth_against_the_data_size():
    probe = bench.memory_growth(2000, "auto")
    assert probe["steps"] == 2000 and probe["inputs_outputs_mb"] > 0
    assert probe["growth_mb"] >= 0


def test_the_jax_gradient_benchmark_checks_ours_against_the_hand_written_jax(capsys):
    import pytest

    pytest.importorskip("jax")
    import jax_grad

    rows = jax_grad.measure(steps=5, runs=1)
    assert {row for _, row, *_ in rows} >= {"value_and_grad wrt h0", "grad wrt Wx, Wh, b", "run"}
    assert all(same for *_, same in rows)


def test_the_torch_benchmark_checks_both_loops_and_reports_their_ratio():
    import pytest

    pytest.importorskip("torch")
    import torch_rnn

    rows = torch_rnn.measure(steps=12, runs=1)  # asserts both loops against numpy first
    assert [r["pass"] for r in rows] == ["forward", "forward+backward"]
    for r in rows:
        assert r["ratio"] == r["to_pytorch_ms"] / r["hand_written_ms"] > 0


def test_the_lstm_benchmark_checks_the_import_against_the_module_and_reports_ratios():
    import pytest

    pytest.importorskip("torch")
    import torch_lstm

    row = torch_lstm.measure(steps=8, runs=1, n_in=3, n_hidden=4)  # asserts the values first
    for clock in ("wall", "cpu"):
        assert row[f"ratio_{clock}"] == row[f"ours_{clock}_ms"] / row[f"torch_{clock}_ms"]
