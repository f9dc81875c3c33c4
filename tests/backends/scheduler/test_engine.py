"""modeci-mdf's stock EvaluableGraph runs loop nodes after ``import mdf_loops``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.functions.standard import mdf_functions
from modeci_mdf.utils import load_mdf
from onnx import helper as oh

import mdf_loops
from conftest import (
    FLOAT,
    body_graph,
    expression_node,
    loop_node,
    mdf_body,
    mdf_model,
    onnx_model,
    run_mdf,
    value_info,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _output(engine: EvaluableGraph, node: str, port: str):
    return engine.enodes[node].evaluable_outputs[port].curr_value


def _decay_scan_model(decay: float = 0.8):
    step = expression_node("step", ["h", "x"], {"h_next": "h * decay + x", "seen": "h"},
                           {"decay": decay})
    body = mdf_body("decay_step", [step], ["h", "x"], ["step.h_next", "step.seen"])
    return mdf_model(loop_node("decay", "Scan", {"initial_state_and_scan_inputs": "[h0, xs]"},
                               {"body": body}, ["h0", "xs"], 2, {"num_scan_inputs": 1},
                               ["h_final", "history"]))


def _decay_numpy(h0, xs, decay=0.8):
    h, history = h0, []
    for x in xs:
        history.append(h)
        h = h * decay + x
    return h, np.array(history)


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_stock_engine_runs_a_loaded_loop_node(suffix, tmp_path, rng):
    path = tmp_path / f"decay.{suffix}"
    model = _decay_scan_model()
    (model.to_json_file if suffix == "json" else model.to_yaml_file)(str(path))
    graph = load_mdf(str(path)).graphs[0]
    xs = rng.standard_normal(20)
    engine = EvaluableGraph(graph)
    engine.evaluate(initializer={"h0": np.array(0.5), "xs": xs})
    h, history = _decay_numpy(0.5, xs)
    np.testing.assert_allclose(_output(engine, "decay", "h_final"), h)
    np.testing.assert_allclose(_output(engine, "decay", "history"), history)


def test_stock_engine_runs_an_imported_onnx_scan(rng):
    body = body_graph([oh.make_node("Add", ["s", "x"], ["s_next"]),
                       oh.make_node("Mul", ["s_next", "s_next"], ["y"])],
                      [value_info("s", FLOAT, [2]), value_info("x", FLOAT, [2])],
                      [value_info("s_next", FLOAT, [2]), value_info("y", FLOAT, [2])])
    onnx_scan = onnx_model([oh.make_node("Scan", ["s0", "xs"], ["s_final", "ys"], name="scan",
                                         body=body, num_scan_inputs=1)],
                           [value_info("s0", FLOAT, [2]), value_info("xs", FLOAT, [5, 2])],
                           [value_info("s_final", FLOAT, None), value_info("ys", FLOAT, None)])
    graph = mdf_loops.onnx_to_mdf(onnx_scan).graphs[0]
    xs = rng.standard_normal((5, 2)).astype(np.float32)
    engine = EvaluableGraph(graph)
    engine.evaluate(initializer={"s0": np.zeros(2, np.float32), "xs": xs})
    partial = np.cumsum(xs, axis=0)
    node = graph.nodes[-1]
    final_port, trace_port = (p.id for p in node.output_ports)
    np.testing.assert_allclose(_output(engine, node.id, final_port), partial[-1], rtol=1e-6)
    np.testing.assert_allclose(_output(engine, node.id, trace_port), partial ** 2, rtol=1e-5)


def test_register_is_idempotent(rng):
    before = dict(mdf_functions)
    mdf_loops.register()
    mdf_loops.register()
    assert set(mdf_functions) == set(before)
    for name in ("onnx::Scan", "onnx::Loop", "onnx::If"):
        assert name in mdf_functions
    xs = rng.standard_normal(5)
    engine = EvaluableGraph(_decay_scan_model().graphs[0])
    engine.evaluate(initializer={"h0": np.array(0.0), "xs": xs})
    np.testing.assert_allclose(_output(engine, "decay", "h_final"), _decay_numpy(0.0, xs)[0])


def test_unregister_then_register_restores_loops():
    try:
        mdf_loops.unregister()
        assert "onnx::Scan" not in mdf_functions
    finally:
        mdf_loops.register()
    assert "onnx::Scan" in mdf_functions
    results = run_mdf(_decay_scan_model(), {"h0": 1.0, "xs": np.zeros(3)})
    np.testing.assert_allclose(results["decay.h_final"], 0.8 ** 3)


class _ConstructionCounter:
    def __init__(self, monkeypatch):
        self.graphs: list[str] = []
        original = EvaluableGraph.__init__
        counter = self

        def counting_init(engine, graph, *args, **kwargs):
            counter.graphs.append(graph.id)
            original(engine, graph, *args, **kwargs)

        monkeypatch.setattr(EvaluableGraph, "__init__", counting_init)


def test_body_engine_is_built_once_per_loop_node(monkeypatch, rng):
    counter = _ConstructionCounter(monkeypatch)
    graph = _decay_scan_model().graphs[0]
    xs = rng.standard_normal(100)
    engine = EvaluableGraph(graph)
    engine.evaluate(initializer={"h0": np.array(0.0), "xs": xs})
    assert counter.graphs == ["main", "decay_step"]
    engine.evaluate(initializer={"h0": np.array(1.0), "xs": xs})  # a second evaluation reuses it
    assert counter.graphs == ["main", "decay_step"]
    np.testing.assert_allclose(_output(engine, "decay", "h_final"), _decay_numpy(1.0, xs)[0])


def test_nested_body_engines_are_built_once(monkeypatch, rng):
    """A Loop of 10 iterations whose body runs a 10-step Scan: three engines in all."""
    inner = _decay_scan_model().graphs[0].nodes[0]
    inner.input_ports[0].id, inner.input_ports[1].id = "v", "xs"
    inner.get_parameter("decay").args = {"initial_state_and_scan_inputs": "[v, xs]"}
    passthrough = expression_node("pass", ["i", "c"], {"c_out": "c"})
    body = mdf_body("outer_step", [inner, passthrough], ["i", "c", "v"],
                    ["pass.c_out", "decay.h_final"], outer_scope_inputs=["xs"])
    model = mdf_model(loop_node("repeat", "Loop", {"M": "M", "v_initial": "[v0]"}, {"body": body},
                                ["M", "v0", "xs"], 1, output_ids=["v_final"]))
    counter = _ConstructionCounter(monkeypatch)
    xs = rng.standard_normal(10)
    results = run_mdf(model, {"M": np.array(10), "v0": np.array(0.5), "xs": xs})
    assert sorted(counter.graphs) == sorted(["main", "outer_step", "decay_step"])
    v = 0.5
    for _ in range(10):
        v = _decay_numpy(v, xs)[0]
    np.testing.assert_allclose(results["repeat.v_final"], v)


@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_leaky_integrator_example_runs_on_stock_engine(suffix):
    graph = load_mdf(str(EXAMPLES / f"leaky_integrator.{suffix}")).graphs[0]
    current = np.where(np.arange(50) < 25, 1.0, 0.0)
    engine = EvaluableGraph(graph)
    engine.evaluate(initializer={"x0": np.array(0.0), "I": current})
    dt, tau, x, trace = 0.1, 2.0, 0.0, []
    for i_t in current:
        x = x + dt * (-x + i_t) / tau
        trace.append(x)
    np.testing.assert_allclose(_output(engine, "integrate", "trace"), trace)
    np.testing.assert_allclose(_output(engine, "integrate", "x_final"), x)
