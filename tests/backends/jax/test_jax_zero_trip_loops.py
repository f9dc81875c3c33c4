"""Loops with a constant trip count of 0 whose stop is decided at run time (a body condition
or a ``cond`` input) on the jax backend (mdf_loops/backends/jax/while_loop.py), checked
against onnxruntime on the same ONNX model; many random forms close the class."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as oh

jax = pytest.importorskip("jax")

import mdf_loops  # noqa: E402
from conftest import BOOL, INT64, assert_same, body_graph, onnx_model, ort_run, value_info  # noqa: E402

SHAPES = ([], [2], [2, 3])
DTYPES = {TensorProto.FLOAT: np.float32, TensorProto.DOUBLE: np.float64}


@dataclass(frozen=True)
class Form:
    """One random zero-trip Loop: what controls it and what it carries and scans."""

    trip_as: str  # "initializer" or "constant node"
    cond_as: str  # "input", "initializer" or "absent"
    body_condition: str  # "data" (computed from a carried value) or "passed through"
    carried: tuple[tuple[int, tuple[int, ...]], ...]  # (elem type, shape) per carried value
    scanned: tuple[int, ...]  # the carried value each scan output doubles

    @staticmethod
    def draw(rng: np.random.Generator) -> Form:
        carried = tuple(
            (int(rng.choice(list(DTYPES))), tuple(SHAPES[rng.integers(3)]))
            for _ in range(rng.integers(1, 3))
        )
        return Form(
            trip_as=str(rng.choice(["initializer", "constant node"])),
            cond_as=str(rng.choice(["input", "initializer", "absent"])),
            body_condition=str(rng.choice(["data", "passed through"])),
            carried=carried,
            scanned=tuple(int(rng.integers(len(carried))) for _ in range(rng.integers(0, 3))),
        )


def _body(form: Form):
    inputs = [value_info("i", INT64, []), value_info("c", BOOL, [])]
    nodes, outputs, scan_outputs = [], [], []
    for k, (elem, shape) in enumerate(form.carried):
        inputs.append(value_info(f"x{k}", elem, list(shape)))
        nodes.append(oh.make_node("Add", [f"x{k}", f"one{k}"], [f"x{k}_next"]))
        outputs.append(value_info(f"x{k}_next", elem, list(shape)))
    for j, k in enumerate(form.scanned):
        elem, shape = form.carried[k]
        nodes.append(oh.make_node("Add", [f"x{k}_next", f"x{k}"], [f"y{j}"]))
        scan_outputs.append(value_info(f"y{j}", elem, list(shape)))
    if form.body_condition == "data":
        nodes += [oh.make_node("ReduceSum", ["x0_next"], ["total"], keepdims=0),
                  oh.make_node("Less", ["total", "limit"], ["go"])]
    else:
        nodes.append(oh.make_node("Identity", ["c"], ["go"]))
    return body_graph(nodes, inputs, [value_info("go", BOOL, [])] + outputs + scan_outputs)


def zero_trip_loop(form: Form):
    initializers = [oh.make_tensor("limit", form.carried[0][0], [], [100.0])]
    initializers += [oh.make_tensor(f"one{k}", elem, [], [1.0])
                     for k, (elem, _) in enumerate(form.carried)]
    nodes, inputs = [], [value_info(f"x{k}_0", elem, list(shape))
                         for k, (elem, shape) in enumerate(form.carried)]
    zero = oh.make_tensor("M", INT64, [], [0])
    if form.trip_as == "initializer":
        initializers.append(zero)
    else:
        nodes.append(oh.make_node("Constant", [], ["M"], value=zero))
    cond = {"absent": ""}.get(form.cond_as, "cond")
    if form.cond_as == "input":
        inputs.append(value_info("cond", BOOL, []))
    elif form.cond_as == "initializer":
        initializers.append(oh.make_tensor("cond", BOOL, [], [True]))
    finals = [f"x{k}_final" for k in range(len(form.carried))]
    scans = [f"ys{j}" for j in range(len(form.scanned))]
    nodes.append(oh.make_node("Loop", ["M", cond] + [f"x{k}_0" for k in range(len(form.carried))],
                              finals + scans, body=_body(form)))
    outputs = [value_info(n, elem, list(shape)) for n, (elem, shape) in zip(finals, form.carried)]
    outputs += [value_info(n, form.carried[k][0], None) for n, k in zip(scans, form.scanned)]
    return onnx_model(nodes, inputs, outputs, initializers=initializers)


def _feeds(form: Form, rng: np.random.Generator) -> dict:
    feeds = {f"x{k}_0": rng.normal(size=shape).astype(DTYPES[elem])
             for k, (elem, shape) in enumerate(form.carried)}
    if form.cond_as == "input":
        feeds["cond"] = np.array(bool(rng.integers(2)))
    return feeds


FORMS = [Form.draw(np.random.default_rng(seed)) for seed in range(16)]


def test_the_random_forms_cover_every_control():
    assert {f.trip_as for f in FORMS} == {"initializer", "constant node"}
    assert {f.cond_as for f in FORMS} == {"input", "initializer", "absent"}
    assert {f.body_condition for f in FORMS} == {"data", "passed through"}
    assert any(f.scanned for f in FORMS) and any(not f.scanned for f in FORMS)


@pytest.mark.parametrize("seed", range(len(FORMS)))
def test_a_zero_trip_loop_runs_on_jax_as_in_onnxruntime(seed):
    form, rng = FORMS[seed], np.random.default_rng(100 + seed)
    onnx_loop = zero_trip_loop(form)
    feeds = _feeds(form, rng)
    expected = ort_run(onnx_loop, feeds)
    actual = mdf_loops.run(mdf_loops.onnx_to_mdf(onnx_loop), feeds, backend="jax")
    assert set(actual) == set(expected)
    for name, value in expected.items():
        assert_same(actual[name], value)
        assert np.shape(actual[name]) == value.shape


@pytest.mark.parametrize("seed", [s for s, f in enumerate(FORMS) if f.carried[0][0] == TensorProto.DOUBLE][:4])
def test_the_gradient_through_a_zero_trip_loop_matches_finite_differences(seed):
    form, rng = FORMS[seed], np.random.default_rng(100 + seed)
    onnx_loop = zero_trip_loop(form)
    feeds = _feeds(form, rng)
    weights = rng.normal(size=form.carried[0][1])

    def loss(x0):  # onnxruntime's value of the objective
        return float(np.sum(ort_run(onnx_loop, {**feeds, "x0_0": np.asarray(x0)})["x0_final"] * weights))

    grads = mdf_loops.grad(mdf_loops.onnx_to_mdf(onnx_loop),
                           lambda out: (out["x0_final"] * weights).sum(), "x0_0", feeds)
    x0, h = feeds["x0_0"], 1e-6
    for k in np.ndindex(x0.shape):
        step = np.zeros_like(x0)
        step[k] = h
        fd = (loss(x0 + step) - loss(x0 - step)) / (2 * h)
        np.testing.assert_allclose(grads["x0_0"][k], fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("seed", [s for s, f in enumerate(FORMS) if f.scanned][:3])
def test_a_batch_through_a_zero_trip_loop_matches_onnxruntime_row_by_row(seed):
    form, rng = FORMS[seed], np.random.default_rng(100 + seed)
    onnx_loop = zero_trip_loop(form)
    feeds = _feeds(form, rng)
    rows = np.stack([feeds["x0_0"], feeds["x0_0"] + 1])
    shared = {k: v for k, v in feeds.items() if k != "x0_0"}
    batch = mdf_loops.run_batch(mdf_loops.onnx_to_mdf(onnx_loop), shared, {"x0_0": rows})
    for k in range(2):
        expected = ort_run(onnx_loop, {**feeds, "x0_0": np.asarray(rows[k])})
        for name, value in expected.items():
            assert_same(np.asarray(batch[name][k]), value)
            assert np.shape(batch[name][k]) == value.shape
