"""The time-loop benchmark runs, checks simulate against its numpy loops, and reports ratios."""

import importlib.util
from pathlib import Path

import pytest
from conftest import needs_input_port_fields

pytestmark = needs_input_port_fields  # time loops build ports with default_value/reduce

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "timeloops.py"


def test_the_benchmark_reports_every_runner(tmp_path):
    spec = importlib.util.spec_from_file_location("timeloops_bench", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    table = bench.run([10, 20], stock_max=10, scheduler_max=10, memory_steps=50, runs=1)
    runners = {(r["model"], r["steps"], r["runner"]) for r in table["timings"]}
    for model in ("fitzhugh_nagumo", "iaf_network"):
        for runner in ("stock modeci-mdf", "numpy loop", "simulate auto", "simulate python",
                       "simulate onnxruntime", "simulate scheduler"):
            assert (model, 20, runner) in runners
    extrapolated = [r for r in table["timings"] if not r["measured"]]
    assert {r["runner"] for r in extrapolated} == {"stock modeci-mdf", "simulate scheduler"}
    assert all(r["peak_python_mb"] >= 0 for r in table["memory"])


def test_runs_past_the_scheduler_limit_and_prints_the_deciding_rows(capsys):
    """Steps beyond --scheduler-max and --stock-max with no smaller run measured: both are
    measured once at their limit and extrapolated (this used to fail on a missing
    per-step time); the deciding rows carry the first call's ratio to stock with a spread."""
    spec = importlib.util.spec_from_file_location("timeloops_bench", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.FIRST_CALL_FROM, bench.NUMPY_FROM = 20, 20  # the rows of 2,000 and 10^4 steps, shorter
    stock_steps = []  # stock's subprocess is the other test's: here 1 ms a step, and its calls

    def stock_seconds(path, dt, steps, record):
        stock_steps.append(steps)
        return 1e-3 * steps

    bench.stock_seconds = stock_seconds
    table = bench.run([20], stock_max=5, scheduler_max=5, memory_steps=0, runs=1, repeat=2)
    assert stock_steps and set(stock_steps) == {5}  # never the 20 steps past --stock-max
    stock = [r for r in table["timings"] if r["runner"] == "stock modeci-mdf"]
    assert [(r["seconds"], r["measured"]) for r in stock] == [(pytest.approx(0.02), False)] * 2
    scheduler = [r for r in table["timings"] if r["runner"] == "simulate scheduler"]
    assert [r["measured"] for r in scheduler] == [False, False]
    assert all(r["seconds"] > 0 for r in scheduler)
    deciding = {(r["model"], r["steps"]): r for r in table["deciding"]}
    assert set(deciding) == {("fitzhugh_nagumo", 20), ("iaf_network", 20)}
    first_calls = [r for r in table["deciding"] if "x_faster_than_stock" in r]
    assert len(first_calls) == 2
    for row in first_calls:
        ratio = row["x_faster_than_stock"]
        assert ratio["n"] == 2 and ratio["min"] <= ratio["median"] <= ratio["max"]
        assert not row["stock_measured"]
        waited = row["first_call_after_wait_seconds"]  # the warm-up, a first call too
        assert waited["n"] == 2 and waited["min"] > 0
    bench._print(table)
    out = capsys.readouterr().out
    assert "DECIDING ROWS" in out
    assert out.count("first call vs stock") == 2
    assert out.count("the call right after stock's run") == 2
    assert out.count("auto / numpy loop") == 2
