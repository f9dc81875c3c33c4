"""Models that ask for more than the limits allow, and models within them, for the limit
tests of every backend (tests/backends/*/test_*_limits.py): loops nested to count the run's
iterations together, operators asking for gigabytes, a carried value that doubles."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as oh

import mdf_loops
from conftest import BOOL, INT64, body_graph, onnx_model, value_info
from mdf_loops.errors import IterationLimitError

DOUBLE = TensorProto.DOUBLE
ONE = oh.make_tensor("one", DOUBLE, [], [1.0])


def counting_loop(trips: str, stop: bool) -> list:
    """Nodes of a Loop adding one to ``acc`` each iteration, ``trips`` times (or until it
    reaches ``stop`` when ``stop``), giving the count as ``count``."""
    nodes = [oh.make_node("Add", ["acc_in", "one"], ["acc_out"])]
    if stop:
        nodes.append(oh.make_node("Less", ["acc_out", "stop"], ["c_out"]))
    else:
        nodes.append(oh.make_node("Identity", ["c_in"], ["c_out"]))
    body = body_graph(nodes, [value_info("i", INT64, []), value_info("c_in", BOOL, []),
                              value_info("acc_in", DOUBLE, [])],
                      [value_info("c_out", BOOL, []), value_info("acc_out", DOUBLE, [])],
                      name="loop_body")
    body.initializer.append(ONE)
    return [oh.make_node("Loop", [trips, "go", "zero"], ["count"], body=body)]


def loop_in_scan(stop: bool, constant_trips: bool = False) -> mdf_loops.Model:
    """A Scan over ``xs`` running a counting Loop each step (``n`` trips, an input, or 4, a
    constant of the body); the Scan's state adds the counts."""
    trips = "four" if constant_trips else "n"
    scan_body = body_graph(
        counting_loop(trips, stop) + [oh.make_node("Add", ["s_in", "count"], ["s_out"]),
                                       oh.make_node("Identity", ["count"], ["y"])],
        [value_info("s_in", DOUBLE, []), value_info("x", DOUBLE, [])],
        [value_info("s_out", DOUBLE, []), value_info("y", DOUBLE, [])], name="scan_body")
    scan_body.initializer.extend([oh.make_tensor("zero", DOUBLE, [], [0.0]),
                                  oh.make_tensor("go", TensorProto.BOOL, [], [True]),
                                  oh.make_tensor("four", INT64, [], [4])])
    model = onnx_model(
        [oh.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=scan_body, num_scan_inputs=1)],
        [value_info("s0", DOUBLE, []), value_info("xs", DOUBLE, [None]),
         value_info("n", INT64, []), value_info("stop", DOUBLE, [])],
        [value_info("s", DOUBLE, []), value_info("ys", DOUBLE, [None])])
    return mdf_loops.onnx_to_mdf(model)


def loop_in_branch() -> mdf_loops.Model:
    """A Scan over ``xs`` whose step runs a counting Loop of ``n`` trips where its element is
    above 0 (an If decided at run time), and adds the counts."""
    then_branch = body_graph(counting_loop("n", False), [], [value_info("count", DOUBLE, [])],
                             name="then")
    then_branch.initializer.extend([oh.make_tensor("zero", DOUBLE, [], [0.0]),
                                    oh.make_tensor("go", TensorProto.BOOL, [], [True])])
    else_branch = body_graph([oh.make_node("Identity", ["none"], ["count_else"])], [],
                             [value_info("count_else", DOUBLE, [])], name="else")
    else_branch.initializer.append(oh.make_tensor("none", DOUBLE, [], [0.0]))
    scan_body = body_graph(
        [oh.make_node("Greater", ["x", "none"], ["positive"]),
         oh.make_node("If", ["positive"], ["k"], then_branch=then_branch,
                      else_branch=else_branch),
         oh.make_node("Add", ["s_in", "k"], ["s_out"])],
        [value_info("s_in", DOUBLE, []), value_info("x", DOUBLE, [])],
        [value_info("s_out", DOUBLE, [])], name="scan_body")
    scan_body.initializer.append(oh.make_tensor("none", DOUBLE, [], [0.0]))
    return mdf_loops.onnx_to_mdf(onnx_model(
        [oh.make_node("Scan", ["s0", "xs"], ["s"], body=scan_body, num_scan_inputs=1)],
        [value_info("s0", DOUBLE, []), value_info("xs", DOUBLE, [None]),
         value_info("n", INT64, [])],
        [value_info("s", DOUBLE, [])]))


def totals_inputs(steps: int, trips: int, stop: float = 1e300) -> dict:
    return {"s0": np.float64(0), "xs": np.zeros(steps), "n": np.int64(trips),
            "stop": np.float64(stop)}


def scan_in_while() -> mdf_loops.Model:
    """A Loop that runs while its sum is below ``limit`` (known only at run time), each
    iteration a Scan over ``xs`` (a loop counted at once, from a count only the run knows)."""
    scan_body = body_graph([oh.make_node("Add", ["a_in", "x"], ["a_out"])],
                           [value_info("a_in", DOUBLE, []), value_info("x", DOUBLE, [])],
                           [value_info("a_out", DOUBLE, [])], name="scan_body")
    loop_body = body_graph(
        [oh.make_node("Scan", ["acc_in", "xs"], ["acc_out"], body=scan_body, num_scan_inputs=1),
         oh.make_node("Less", ["acc_out", "limit"], ["c_out"])],
        [value_info("i", INT64, []), value_info("c_in", BOOL, []),
         value_info("acc_in", DOUBLE, [])],
        [value_info("c_out", BOOL, []), value_info("acc_out", DOUBLE, [])], name="loop_body")
    model = onnx_model(
        [oh.make_node("Loop", ["", "go", "a0"], ["a"], body=loop_body)],
        [value_info("go", BOOL, []), value_info("a0", DOUBLE, []),
         value_info("xs", DOUBLE, [None]), value_info("limit", DOUBLE, [])],
        [value_info("a", DOUBLE, [])])
    return mdf_loops.onnx_to_mdf(model)


def passes_at_the_count_and_fails_below(model, inputs, need: int, backends) -> dict:
    results = {}
    for backend in backends:
        with mdf_loops.safety.limits(max_total_iterations=need):
            results[backend] = mdf_loops.run(model, inputs, backend=backend)
        with pytest.raises(IterationLimitError, match="max_total_iterations"):
            with mdf_loops.safety.limits(max_total_iterations=need - 1):
                mdf_loops.run(model, inputs, backend=backend)
    return results


def one_operator(node, inputs) -> mdf_loops.Model:
    return mdf_loops.onnx_to_mdf(onnx_model([node], inputs, [value_info("y", shape=None)]))


HOSTILE = {  # operator, its inputs' types, values asking for 2.5e9 elements (10 GB)
    "Expand": (oh.make_node("Expand", ["a", "s"], ["y"]),
               [value_info("a", shape=[1]), value_info("s", INT64, [2])],
               {"a": np.ones(1, np.float32), "s": np.array([50_000, 50_000])}),
    "ConstantOfShape": (oh.make_node("ConstantOfShape", ["s"], ["y"]),
                        [value_info("s", INT64, [2])], {"s": np.array([50_000, 50_000])}),
    "Tile": (oh.make_node("Tile", ["a", "s"], ["y"]),
             [value_info("a", shape=[2, 2]), value_info("s", INT64, [2])],
             {"a": np.ones((2, 2), np.float32), "s": np.array([25_000, 25_000])}),
    "Mul": (oh.make_node("Mul", ["a", "b"], ["y"]),
            [value_info("a", shape=[None, 1]), value_info("b", shape=[1, None])],
            {"a": np.ones((50_000, 1), np.float32), "b": np.ones((1, 50_000), np.float32)}),
}


def doubling_loop() -> mdf_loops.Model:
    body = body_graph([oh.make_node("Concat", ["x_in", "x_in"], ["x_out"], axis=0),
                       oh.make_node("Identity", ["c_in"], ["c_out"])],
                      [value_info("i", INT64, []), value_info("c_in", BOOL, []),
                       value_info("x_in", shape=[None])],
                      [value_info("c_out", BOOL, []), value_info("x_out", shape=[None])])
    return mdf_loops.onnx_to_mdf(onnx_model(
        [oh.make_node("Loop", ["n", "", "x0"], ["x"], body=body)],
        [value_info("n", INT64, []), value_info("x0", shape=[None])],
        [value_info("x", shape=[None])]))


def growing_scan_output() -> mdf_loops.Model:
    """A Loop whose scan output is a 100-element row each iteration (no operator grows)."""
    body = body_graph([oh.make_node("Identity", ["c_in"], ["c_out"]),
                       oh.make_node("Identity", ["row"], ["y"])],
                      [value_info("i", INT64, []), value_info("c_in", BOOL, [])],
                      [value_info("c_out", BOOL, []), value_info("y", shape=[100])])
    return mdf_loops.onnx_to_mdf(onnx_model(
        [oh.make_node("Loop", ["n", ""], ["ys"], body=body)],
        [value_info("n", INT64, []), value_info("row", shape=[100])],
        [value_info("ys", shape=[None, 100])]))
