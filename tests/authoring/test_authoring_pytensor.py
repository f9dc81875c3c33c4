"""PyTensor's API in the authoring layer: signatures, the ``pt`` namespace, ``function`` and ``shared``.

Expected values are numpy computed here; the signatures are PyTensor 3's, written out.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import mdf_loops
import mdf_loops.authoring as pytensor
import mdf_loops.authoring.tensor as pt
from mdf_loops.authoring import AuthoringError, ScanError

BACKENDS = ("scheduler", "onnxruntime")

PYTENSOR_SIGNATURES = {
    "scan": ["fn", "sequences", "outputs_info", "non_sequences", "n_steps", "truncate_gradient",
             "go_backwards", "mode", "name", "profile", "allow_gc", "strict", "return_list",
             "return_updates"],
    "map": ["fn", "sequences", "non_sequences", "truncate_gradient", "go_backwards", "mode",
            "name", "return_updates"],
    "reduce": ["fn", "sequences", "outputs_info", "non_sequences", "go_backwards", "mode",
               "name", "return_updates"],
    "foldl": ["fn", "sequences", "outputs_info", "non_sequences", "mode", "name",
              "return_updates"],
    "foldr": ["fn", "sequences", "outputs_info", "non_sequences", "mode", "name",
              "return_updates"],
}


@pytest.mark.parametrize("name", sorted(PYTENSOR_SIGNATURES))
def test_loop_functions_have_pytensors_parameters_in_order(name):
    top_level = (mdf_loops,) if name in mdf_loops.__all__ else ()  # scan; map etc. are in authoring
    for namespace in (pytensor, pt, *top_level):
        parameters = list(inspect.signature(getattr(namespace, name)).parameters)
        assert parameters == PYTENSOR_SIGNATURES[name]
    assert mdf_loops.pt is pt


def test_sixth_positional_argument_of_scan_is_truncate_gradient():
    u = pt.vector("u")
    forward, _ = pytensor.scan(lambda x: x * 2, u, None, None, None, -1)
    mapped, _ = pytensor.map(lambda x: x + 1, u, None, -1)
    f = pytensor.function([u], [forward, mapped])
    got_forward, got_mapped = f([1.0, 2.0, 3.0])
    assert got_forward.tolist() == [2.0, 4.0, 6.0]  # not reversed
    assert got_mapped.tolist() == [2.0, 3.0, 4.0]
    with pytest.raises(ScanError, match=r"truncate_gradient=5; only -1 .*6th positional"):
        pytensor.scan(lambda x: x * 2, u, None, None, None, 5)
    with pytest.raises(ScanError, match="truncate_gradient=True"):
        pytensor.map(lambda x: x, u, None, True)


def test_compilation_options_are_accepted_without_effect():
    u = pt.vector("u")
    out, updates = pytensor.scan(lambda x, acc: acc + x, sequences=u, outputs_info=pt.zeros(()),
                                 mode="FAST_RUN", profile=True, allow_gc=False, name="sum")
    assert updates == {}
    assert pytensor.function([u], out)([1.0, 2.0]).tolist() == [1.0, 3.0]
    with pytest.raises(ScanError, match="allow_gc must be None, True or False"):
        pytensor.scan(lambda x: x, sequences=u, allow_gc="yes")


def test_return_updates_false_returns_the_outputs_only():
    u = pt.vector("u")
    total = pytensor.scan(lambda x, acc: acc + x, sequences=u, outputs_info=pt.zeros(()),
                          return_updates=False)
    last = pytensor.reduce(lambda x, acc: acc + x, u, pt.zeros(()), return_updates=False)
    folded = pytensor.foldr(lambda x, acc: acc * 10 + x, u, pt.zeros(()), return_updates=False)
    f = pytensor.function([u], [total, last, folded])
    got = f([1.0, 2.0, 3.0])
    assert got[0].tolist() == [1.0, 3.0, 6.0] and float(got[1]) == 6.0 and float(got[2]) == 321.0
    a = pytensor.shared(np.float64(0), name="a")
    with pytest.raises(ScanError, match=r"return_updates=False, but fn updates \['a'\]"):
        pytensor.scan(lambda: {a: a + 1}, n_steps=3, return_updates=False)


# ---------------------------------------------------------------- constructors and floatX


def test_constructors_make_inputs_of_pytensors_types():
    assert pt.iscalar().dtype == np.int32 and pt.iscalar().ndim == 0
    assert pt.lscalar().dtype == np.int64
    assert pt.fvector().dtype == np.float32 and pt.dvector().dtype == np.float64
    assert pt.ivector().dtype == np.int32 and pt.imatrix().ndim == 2
    assert pt.tensor3().static_shape == (None, None, None)
    assert pt.vector("x").name == "x" and pt.scalar().static_shape == ()
    assert pt.tensor(dtype="float32", shape=(None, 3)).static_shape == (None, 3)
    assert pt.tensor("int64", shape=(2,)).dtype == np.int64  # Theano's tensor(dtype, ...)
    assert pt.tensor("weights", dtype="float32", shape=(None,)).name == "weights"
    with pytest.raises(AuthoringError, match="give its shape"):
        pt.tensor(dtype="float32")
    with pytest.raises(AuthoringError, match="must have 2 entries"):
        pt.matrix(shape=(3,))


def test_float_x_sets_the_type_of_float_constructors():
    assert pt.config is pytensor.config and pt.config.floatX == "float64"
    try:
        pt.config.floatX = "float32"
        x = pt.vector("x")
        assert x.dtype == np.float32 and pt.matrix().dtype == np.float32
        assert pt.dvector().dtype == np.float64
        assert pytensor.function([x], x * 2)([1.0, 2.0]).dtype == np.float32
    finally:
        pt.config.floatX = "float64"
    with pytest.raises(AuthoringError, match="floatX must be one of"):
        pt.config.floatX = "float128"


def test_unknown_dimensions_are_fixed_when_the_function_runs():
    m = pt.matrix("m")
    f = pytensor.function([m], m.sum(axis=0))
    assert f(np.ones((2, 3))).tolist() == [2.0, 2.0, 2.0]
    assert f(np.ones((4, 5))).shape == (5,)


# ---------------------------------------------------------------- the missing functions


def _both_backends(inputs, output, values):
    results = []
    for backend in BACKENDS:
        results.append(pytensor.function(inputs, output, backend=backend)(*values))
    return results


X = np.array([[1.5, -2.5, 0.5], [3.0, 2.5, -0.5]])
I = np.array([[6, 3, 5], [1, 12, 10]], np.int64)


@pytest.mark.parametrize("make, oracle", [
    (lambda x, i: pt.sqr(x), lambda x, i: x * x),
    (lambda x, i: pt.alloc(x[0], 4, 3), lambda x, i: np.broadcast_to(x[0], (4, 3))),
    (lambda x, i: pt.alloc(1.5, i.shape[0], 2), lambda x, i: np.full((2, 2), 1.5)),
    (lambda x, i: pt.shape_padleft(x), lambda x, i: x[None]),
    (lambda x, i: pt.shape_padleft(x, 2), lambda x, i: x[None, None]),
    (lambda x, i: pt.argmax(x), lambda x, i: np.argmax(x)),
    (lambda x, i: pt.argmax(x, axis=1), lambda x, i: np.argmax(x, axis=1)),
    (lambda x, i: pt.argmax(x, axis=0, keepdims=True), lambda x, i: np.argmax(x, 0, keepdims=True)),
    (lambda x, i: pt.cumsum(x), lambda x, i: np.cumsum(x)),
    (lambda x, i: pt.cumsum(i, axis=1), lambda x, i: np.cumsum(i, axis=1)),
    (lambda x, i: pt.cumprod(x), lambda x, i: np.cumprod(x)),
    (lambda x, i: pt.cumprod(x, axis=1), lambda x, i: np.cumprod(x, axis=1)),
    (lambda x, i: pt.cumprod(i, axis=0), lambda x, i: np.cumprod(i, axis=0)),
    (lambda x, i: pt.and_(i, 6), lambda x, i: i & 6),
    (lambda x, i: pt.or_(i, 3), lambda x, i: i | 3),
    (lambda x, i: pt.and_(x > 0, i > 4), lambda x, i: (x > 0) & (i > 4)),
    (lambda x, i: pt.or_(x > 0, i > 4), lambda x, i: (x > 0) | (i > 4)),
    (lambda x, i: pt.flatten(x), lambda x, i: x.reshape(-1)),
    (lambda x, i: pt.flatten(pt.shape_padleft(x), 2), lambda x, i: x.reshape(1, -1)),
    (lambda x, i: pt.roll(x, 2), lambda x, i: np.roll(x, 2)),
    (lambda x, i: pt.roll(x, -1, axis=1), lambda x, i: np.roll(x, -1, axis=1)),
    (lambda x, i: pt.roll(x, 5, axis=0), lambda x, i: np.roll(x, 5, axis=0)),
    (lambda x, i: pt.round(x), lambda x, i: np.round(x)),
    (lambda x, i: pt.round(x, "half_away_from_zero"),
     lambda x, i: np.sign(x) * np.floor(np.abs(x) + 0.5)),
])
def test_pytensor_functions_match_numpy(make, oracle):
    x, i = pt.matrix("x"), pt.lmatrix("i")
    expected = oracle(X, I)
    for got in _both_backends([x, i], make(x, i), (X, I)):
        assert got.shape == np.shape(expected)
        np.testing.assert_allclose(got, expected)


def test_roll_of_an_empty_axis_and_cumprod_in_a_scan():
    v = pt.vector("v")
    assert pytensor.function([v], pt.roll(v, 3))(np.zeros(0)).shape == (0,)
    rows = pt.matrix("rows")
    products, _ = pytensor.map(lambda row: pt.cumprod(row), rows)
    np.testing.assert_allclose(pytensor.function([rows], products)(X), np.cumprod(X, axis=1))


# ---------------------------------------------------------------- function and shared


def test_function_calls_by_position_and_keyword():
    x, y = pt.vector("x"), pt.scalar("y")
    f = pytensor.function([x, y], [x * y, (x + y).sum()])
    product, total = f([1.0, 2.0], y=3.0)
    assert product.tolist() == [3.0, 6.0] and float(total) == 9.0
    with pytest.raises(AuthoringError, match=r"missing values for inputs \['y'\]"):
        f([1.0])
    with pytest.raises(AuthoringError, match="takes 2"):
        f([1.0], 2.0, 3.0)
    with pytest.raises(AuthoringError, match="has 1 dimensions"):
        f([[1.0]], 2.0)
    with pytest.raises(AuthoringError, match="givens is not supported"):
        pytensor.function([x], x, givens={x: x})
    with pytest.raises(AuthoringError, match="inputs\\[0\\] must be made by vector"):
        pytensor.function([x * 2], x)


def test_shared_state_persists_between_calls_on_each_backend():
    for backend in BACKENDS:
        total = pytensor.shared(np.zeros(2), name="total")
        x = pt.vector("x")
        f = pytensor.function([x], total + x, updates={total: total + x}, backend=backend)
        assert f([1.0, 2.0]).tolist() == [1.0, 2.0]
        assert f([1.0, 2.0]).tolist() == [2.0, 4.0]
        assert total.get_value().tolist() == [2.0, 4.0]
        total.set_value([10.0, 10.0])
        assert f([0.0, 1.0]).tolist() == [10.0, 11.0]
        assert total.get_value().tolist() == [10.0, 11.0]


def test_scan_updates_of_shared_values_through_function():
    seed = pytensor.shared(np.int64(7), name="seed")

    def step(x):
        following = (seed * 1103515245 + 12345) % 2 ** 31
        return x + 1, {seed: following}

    values, updates = pytensor.scan(step, outputs_info=pt.zeros((), "int64"), n_steps=3)
    f = pytensor.function([], values, updates=updates)
    expected_seed = 7
    for _ in range(2):
        assert f().tolist() == [1, 2, 3]
        for _ in range(3):
            expected_seed = (expected_seed * 1103515245 + 12345) % 2 ** 31
        assert int(seed.get_value()) == expected_seed


def test_shared_values_check_their_type():
    a = pytensor.shared(np.zeros(3), name="a")
    assert a.get_value().dtype == np.float64 and pytensor.shared(1).dtype == np.int64
    with pytest.raises(AuthoringError, match=r"shared value 'a' has shape \(3,\)"):
        a.set_value(np.zeros(2))
    i = pytensor.shared(np.int32(1), name="i")
    with pytest.raises(AuthoringError, match="shared value 'i' is int32; a float64 value"):
        i.set_value(2.5)
    with pytest.raises(AuthoringError, match="an updates key must be a shared value"):
        pytensor.function([], [], updates={pt.constant(1.0): a.sum()})
    with pytest.raises(AuthoringError, match="must keep the type"):
        pytensor.function([], [], updates={i: pt.constant(1.0)})


def test_build_model_takes_the_current_value_of_a_shared_value():
    w = pytensor.shared(np.array([1.0, 2.0]), name="w")
    x = pt.vector("x")
    first = pytensor.build_model({"y": x * w}, name="first")
    w.set_value([3.0, 4.0])
    second = pytensor.build_model({"y": x * w}, name="second")
    ones = {"x": np.ones(2)}
    assert mdf_loops.run(first, ones)["y"].tolist() == [1.0, 2.0]
    assert mdf_loops.run(second, ones)["y"].tolist() == [3.0, 4.0]


def test_outputs_info_dict_may_say_inplace():
    u = pt.vector("u")
    sums = pytensor.scan(lambda x, acc: acc + x, sequences=u, return_updates=False,
                         outputs_info=dict(initial=pt.zeros(()), taps=[-1], inplace=u))
    assert pytensor.function([u], sums)([1.0, 2.0]).tolist() == [1.0, 3.0]
    with pytest.raises(ScanError, match=r"unknown keys \['init'\]"):
        pytensor.scan(lambda x: x, sequences=u, outputs_info=dict(init=pt.zeros(())))
