"""mdf_loops/backends/jax/precision.py: 64-bit types on only where a traced program has them.

Oracles: the dtypes JAX itself gives each traced program, and numpy loops written here.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from onnx import helper as oh

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402

import mdf_loops  # noqa: E402
from mdf_loops.backends.jax.compiled import cached_compile  # noqa: E402
from mdf_loops.backends.jax.precision import uses_64_bits, x64  # noqa: E402
from mdf_loops.workloads import elman_rnn, while_loop  # noqa: E402
from conftest import FLOAT, body_graph, onnx_model, value_info  # noqa: E402


def _traced(fn, *args):
    with x64():
        return jax.make_jaxpr(fn)(*args)


def _scan_with(step):
    return lambda xs: jax.lax.scan(lambda c, x: (c, step(x)), np.float32(0), xs)[1]


PROGRAMS = {  # name: (function, its argument, whether it holds a 64-bit value)
    "float32 arithmetic": (lambda x: x * 2 + 1, np.ones(3, np.float32), False),
    "a float64 input": (lambda x: x * 2, np.ones(3), True),
    "an int64 only inside a scan body": (
        _scan_with(lambda x: (x.astype(jnp.int64) * 3).astype(jnp.float32)),
        np.ones(4, np.float32),
        True,
    ),
    "a float32 scan": (_scan_with(lambda x: jnp.tanh(x)), np.ones(4, np.float32), False),
    "a float64 constant in one branch of a cond": (
        lambda x: jax.lax.cond(
            x[0] > 0, lambda v: v, lambda v: (v * np.float64(2)).astype(jnp.float32), x
        ),
        np.ones(2, np.float32),
        True,
    ),
    "a while loop on an int32 counter": (
        lambda x: jax.lax.while_loop(lambda s: s[0] < 5, lambda s: (s[0] + 1, s[1] * 2), (0, x))[1],
        np.ones(2, np.float32),
        True,  # a Python 0 under 64-bit types is an int64 counter
    ),
    "a while loop on an explicit int32 counter": (
        lambda x: jax.lax.while_loop(
            lambda s: s[0] < 5, lambda s: (s[0] + 1, s[1] * 2), (np.int32(0), x)
        )[1],
        np.ones(2, np.float32),
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_64_bit_value_is_found_anywhere_in_a_program(name):
    fn, argument, expected = PROGRAMS[name]
    assert uses_64_bits(_traced(fn, argument)) is expected


def _int64_inside_a_scan_body():
    """Each x_t (float32) is cast to int64, times 2**33, divided again, cast back: exact in
    64 bits, wrapped to other numbers in 32."""
    big = oh.make_tensor("big", TensorProto.INT64, [], [2**33])
    body = body_graph(
        [
            oh.make_node("Cast", ["x_t"], ["n"], to=TensorProto.INT64),
            oh.make_node("Constant", [], ["k"], value=big),
            oh.make_node("Mul", ["n", "k"], ["scaled"]),
            oh.make_node("Div", ["scaled", "k"], ["back"]),
            oh.make_node("Cast", ["back"], ["y_t"], to=TensorProto.FLOAT),
            oh.make_node("Add", ["s", "y_t"], ["s_next"]),
        ],
        [value_info("s", FLOAT, []), value_info("x_t", FLOAT, [])],
        [value_info("s_next", FLOAT, []), value_info("y_t", FLOAT, [])],
    )
    node = oh.make_node("Scan", ["s0", "x"], ["total", "ys"], body=body, num_scan_inputs=1)
    return onnx_model(
        [node],
        [value_info("s0", FLOAT, []), value_info("x", FLOAT, [5])],
        [value_info("total", FLOAT, []), value_info("ys", FLOAT, [5])],
    )


def test_a_model_with_64_bit_values_only_in_a_loop_body_runs_them_in_64_bits():
    model = mdf_loops.onnx_to_mdf(_int64_inside_a_scan_body())
    inputs = {"s0": np.array(0.0, np.float32), "x": np.array([1, 2, 3, -4, 7], np.float32)}
    outputs = mdf_loops.run(model, inputs, backend="jax")
    whole = inputs["x"].astype(np.int64) * 2**33 // 2**33  # numpy: exact in int64
    np.testing.assert_array_equal(outputs["ys"], whole.astype(np.float32))
    assert outputs["total"] == np.float32(whole.sum())
    assert cached_compile(model, inputs, limits=mdf_loops.safety.Limits()).needs_x64
    assert not jax.config.jax_enable_x64


@pytest.mark.parametrize("work, needs", [(elman_rnn(6, 4, 5), False), (while_loop(7), True)])
def test_32_bit_models_run_without_64_bit_types_and_agree_with_numpy(work, needs):
    model = mdf_loops.onnx_to_mdf(work.model)
    outputs = mdf_loops.run(model, work.inputs, backend="jax")
    for got, want in zip(outputs.values(), work.numpy_loop(work.inputs), strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    compiled = cached_compile(model, work.inputs, limits=mdf_loops.safety.Limits())
    assert compiled.needs_x64 is needs  # the while loop: ONNX's int64 iteration counter
    assert not jax.config.jax_enable_x64


def _gemm_model():
    gemm = oh.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, beta=2.0, transB=1)
    return onnx_model([gemm], [value_info("a", FLOAT, [3, 4]), value_info("b", FLOAT, [2, 4]),
                               value_info("c", FLOAT, [2])], [value_info("y", FLOAT, [3, 2])])


def _dot_precisions(compiled, inputs) -> list:
    """The ``precision`` of every matrix product in the program the backend traces for
    ``inputs``, in loop bodies too."""
    from mdf_loops.backends.jax.compiled import _probe
    from mdf_loops.backends.jax.precision import _programs_in

    stack, found = [_probe(compiled, *compiled.split(compiled.feed(inputs)))], []
    while stack:
        jaxpr = getattr(stack[-1], "jaxpr", stack[-1])
        stack.pop()
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "dot_general":
                found.append(eqn.params["precision"])
            stack.extend(_programs_in(eqn.params.values()))
    return found


GEMM_INPUTS = {"a": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
               "b": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4),
               "c": np.array([0.25, -3.0], np.float32)}


@pytest.mark.parametrize("model, inputs", [
    (elman_rnn(6, 4, 5).model, elman_rnn(6, 4, 5).inputs),  # MatMul inside a Scan body
    (_gemm_model(), GEMM_INPUTS),
], ids=["MatMul in a Scan body", "Gemm"])
def test_matrix_products_ask_for_full_float32_precision(model, inputs):
    """JAX's default precision lets a GPU compute float32 matrix products in TF32 (10-bit
    mantissa), which differ from onnxruntime's in the fourth digit; the backend asks for
    the highest precision in every product. On a CPU the values are the same either
    way, so the oracle here is the traced program itself, and numpy for the values."""
    mdf = mdf_loops.onnx_to_mdf(model)
    compiled = cached_compile(mdf, inputs, limits=mdf_loops.safety.Limits())
    precisions = _dot_precisions(compiled, inputs)
    assert precisions, "no matrix product traced"
    highest = jax.lax.Precision.HIGHEST
    assert all(p == (highest, highest) for p in precisions), precisions
    if "a" in inputs:
        out = mdf_loops.run(mdf, inputs, backend="jax")
        a, b, c = (inputs[k].astype(np.float64) for k in "abc")
        np.testing.assert_allclose(out["y"], 0.5 * a @ b.T + 2.0 * c, rtol=1e-6)
