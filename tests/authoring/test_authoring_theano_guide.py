"""The examples of Theano's scan guide, as written there: only the import lines differ.

Each example's code is the guide's (``print`` became an assertion); the expected
values are the outputs the guide prints, and numpy loops written here.
"""

from __future__ import annotations

import numpy
import numpy as np
import pytest

import mdf_loops.authoring as theano  # was: import theano
import mdf_loops.authoring.tensor as T  # was: import theano.tensor as T
from mdf_loops.authoring import AuthoringError, ScanError


def test_power_a_to_the_k():
    k = T.iscalar("k")
    A = T.vector("A")

    # Symbolic description of the result
    result, updates = theano.scan(fn=lambda prior_result, A: prior_result * A,
                                  outputs_info=T.ones_like(A),
                                  non_sequences=A,
                                  n_steps=k)

    # We only care about A**k, but scan has provided us with A**1 through A**k.
    final_result = result[-1]

    # compiled function that returns A**k
    power = theano.function(inputs=[A, k], outputs=final_result, updates=updates)

    np.testing.assert_allclose(power(range(10), 2), [0., 1., 4., 9., 16., 25., 36., 49., 64., 81.])
    np.testing.assert_allclose(power(range(10), 4), np.arange(10.0) ** 4)
    np.testing.assert_allclose(power(range(10), 0), np.ones(10))  # zero steps: the initial value


def test_polynomial():
    coefficients = theano.tensor.vector("coefficients")
    x = T.scalar("x")

    max_coefficients_supported = 10000

    # Generate the components of the polynomial
    components, updates = theano.scan(fn=lambda coefficient, power, free_variable: coefficient * (free_variable ** power),
                                      outputs_info=None,
                                      sequences=[coefficients, theano.tensor.arange(max_coefficients_supported)],
                                      non_sequences=x)
    # Sum them up
    polynomial = components.sum()

    # Compile a function
    calculate_polynomial = theano.function(inputs=[coefficients, x], outputs=polynomial)

    # Test
    test_coefficients = numpy.asarray([1, 0, 2], dtype=numpy.float32)
    test_value = 3
    assert calculate_polynomial(test_coefficients, test_value) == pytest.approx(19.0)
    assert 1.0 * (3 ** 0) + 0.0 * (3 ** 1) + 2.0 * (3 ** 2) == 19.0


def test_accumulation_into_a_scalar():
    up_to = T.iscalar("up_to")

    # define a named function, rather than using lambda
    def accumulate_by_adding(arange_val, sum_to_date):
        return sum_to_date + arange_val
    seq = T.arange(up_to)

    outputs_info = T.as_tensor_variable(np.asarray(0, seq.dtype))
    scan_result, scan_updates = theano.scan(fn=accumulate_by_adding,
                                            outputs_info=outputs_info,
                                            sequences=seq)
    triangular_sequence = theano.function(inputs=[up_to], outputs=scan_result)

    # test
    some_num = 15
    expected = [n * (n + 1) // 2 for n in range(some_num)]
    assert triangular_sequence(some_num).tolist() == expected
    assert triangular_sequence(0).tolist() == []


def test_set_value_at_position():
    location = T.imatrix("location")
    values = T.vector("values")
    output_model = T.matrix("output_model")

    def set_value_at_position(a_location, a_value, output_model):
        zeros = T.zeros_like(output_model)
        zeros_subtensor = zeros[a_location[0], a_location[1]]
        return T.set_subtensor(zeros_subtensor, a_value)

    result, updates = theano.scan(fn=set_value_at_position,
                                  outputs_info=None,
                                  sequences=[location, values],
                                  non_sequences=output_model)

    assign_values_at_positions = theano.function(inputs=[location, values, output_model], outputs=result)

    # test
    test_locations = numpy.asarray([[1, 1], [2, 3]], dtype=numpy.int32)
    test_values = numpy.asarray([42, 50], dtype=numpy.float32)
    test_output_model = numpy.zeros((5, 5), dtype=numpy.float32)
    expected = numpy.zeros((2, 5, 5))
    expected[0, 1, 1], expected[1, 2, 3] = 42, 50
    np.testing.assert_array_equal(
        assign_values_at_positions(test_locations, test_values, test_output_model), expected)


def test_shared_variable_updates():
    a = theano.shared(1)
    values, updates = theano.scan(lambda: {a: a+1}, n_steps=10)

    b = a + 1
    c = updates[a] + 1
    f = theano.function([], [b, c], updates=updates)

    # "b will be 2, c will be 12, while a.value is 11. If we call the function
    # again, b will become 12, c will be 22 and a.value 21."
    assert [int(v) for v in f()] == [2, 12]
    assert a.get_value() == 11
    assert [int(v) for v in f()] == [12, 22]
    assert a.get_value() == 21
    # "If we do not pass the updates dictionary to the function, then a.value will
    # always remain 1, b will always be 2 and c will always be 12."
    a.set_value(1)
    g = theano.function([], [b, c])
    assert [int(v) for v in g()] == [2, 12] and [int(v) for v in g()] == [2, 12]
    assert a.get_value() == 1


def _rnn_oracle(u, x0, y0, W, W_in_1, W_in_2, W_feedback, W_out):
    xs, ys = [x0[0], x0[1], x0[2]], [y0]
    for t in range(4, len(u)):
        x_t = np.tanh(xs[-1] @ W + u[t] @ W_in_1 + u[t - 4] @ W_in_2 + ys[-1] @ W_feedback)
        y_t = xs[-3] @ W_out
        xs.append(x_t)
        ys.append(y_t)
    return np.array(xs[3:]), np.array(ys[1:])


def test_recurrent_neural_network_with_taps():
    def oneStep(u_tm4, u_t, x_tm3, x_tm1, y_tm1, W, W_in_1, W_in_2,  W_feedback, W_out):

        x_t = T.tanh(theano.dot(x_tm1, W) + \
                     theano.dot(u_t,   W_in_1) + \
                     theano.dot(u_tm4, W_in_2) + \
                     theano.dot(y_tm1, W_feedback))
        y_t = theano.dot(x_tm3, W_out)

        return [x_t, y_t]

    W = T.matrix()
    W_in_1 = T.matrix()
    W_in_2 = T.matrix()
    W_feedback = T.matrix()
    W_out = T.matrix()

    u = T.matrix() # it is a sequence of vectors
    x0 = T.matrix() # initial state of x has to be a matrix, since
                    # it has to cover x[-3]
    y0 = T.vector() # y0 is just a vector since scan has only to provide
                    # y[-1]

    ([x_vals, y_vals], updates) = theano.scan(fn=oneStep,
                                              sequences=dict(input=u, taps=[-4,-0]),
                                              outputs_info=[dict(initial=x0, taps=[-3,-1]), y0],
                                              non_sequences=[W, W_in_1, W_in_2, W_feedback, W_out],
                                              strict=True)
    f = theano.function([u, x0, y0, W, W_in_1, W_in_2, W_feedback, W_out], [x_vals, y_vals])

    rng = np.random.default_rng(0)
    n_in, n_hid, n_out = 2, 3, 2
    values = dict(u=rng.normal(size=(9, n_in)), x0=rng.normal(size=(3, n_hid)),
                  y0=rng.normal(size=n_out), W=rng.normal(size=(n_hid, n_hid)) * 0.5,
                  W_in_1=rng.normal(size=(n_in, n_hid)), W_in_2=rng.normal(size=(n_in, n_hid)),
                  W_feedback=rng.normal(size=(n_out, n_hid)), W_out=rng.normal(size=(n_hid, n_out)))
    x_got, y_got = f(*values.values())
    x_expected, y_expected = _rnn_oracle(**values)
    assert x_got.shape == (5, n_hid)  # uvals[4:] are scanned
    np.testing.assert_allclose(x_got, x_expected, rtol=1e-12)
    np.testing.assert_allclose(y_got, y_expected, rtol=1e-12)


def test_conditional_ending_of_scan():
    def power_of_2(previous_power, max_value):
        return previous_power*2, theano.scan_module.until(previous_power*2 > max_value)

    max_value = T.scalar()
    values, _ = theano.scan(power_of_2,
                            outputs_info = T.constant(1.),
                            non_sequences = max_value,
                            n_steps = 1024)

    f = theano.function([max_value], values)

    np.testing.assert_array_equal(f(45), [2., 4., 8., 16., 32., 64.])


def test_strict_flag_needs_shared_values_in_non_sequences():
    W = theano.shared(np.eye(3), name="W")
    bvis = theano.shared(np.zeros(3), name="bvis")

    def OneStep(vsample, W, bvis):
        return T.nnet.sigmoid(theano.dot(vsample, W) + bvis)

    sample = theano.tensor.vector()
    values, updates = theano.scan(fn=OneStep, outputs_info=sample, non_sequences=[W, bvis],
                                  n_steps=10, strict=True)
    step = theano.function([sample], values[-1], updates=updates)
    expected = np.array([0.5, -1.0, 2.0])
    for _ in range(10):
        expected = 1 / (1 + np.exp(-expected))
    np.testing.assert_allclose(step([0.5, -1.0, 2.0]), expected)

    def OneStepForgetting(vsample, W):
        return T.nnet.sigmoid(theano.dot(vsample, W) + bvis)

    with pytest.raises(ScanError, match="strict=True, but fn uses shared value 'bvis'"):
        theano.scan(fn=OneStepForgetting, outputs_info=sample, non_sequences=[W], n_steps=10,
                    strict=True)


def test_float_inputs_refuse_lossy_arrays():
    w = T.fvector("w")
    f = theano.function([w], w * 2)
    assert f(np.array([1.0, 2.0], np.float32)).dtype == np.float32
    assert f([1.0, 2.5]).tolist() == [2.0, 5.0]  # Python values convert
    with pytest.raises(AuthoringError, match="input 'w' is float32; a float64 array would lose"):
        f(np.array([1.0, 2.0]))


# ---------------------------------------------------------------- Gibbs sampling


def _uniforms(state, count):
    """The documented generator of mdf_loops.authoring.random, in numpy."""
    k = np.arange(count, dtype=np.int64)
    x = (state * 1103515245 + k * 2654435761 % 2 ** 31) % 2 ** 31
    for _ in range(3):
        x = (x * 1103515245 + 12345) % 2 ** 31
        x = x ^ (x // 2 ** 16)
    return x / 2.0 ** 31, state * 48271 % (2 ** 31 - 1)


def _gibbs_oracle(sample, W, bvis, bhid, seed, steps, calls):
    states = [(seed * 7919 + site * 104729) % (2 ** 31 - 1) + 1 for site in range(2)]
    results = []
    for _ in range(calls):
        v = np.asarray(sample, np.float64)
        for _ in range(steps):
            hmean = 1 / (1 + np.exp(-(v @ W + bhid)))
            u, states[0] = _uniforms(states[0], hmean.size)
            hsample = (u < hmean).astype(np.int64)
            vmean = 1 / (1 + np.exp(-(hsample @ W.T + bvis)))
            u, states[1] = _uniforms(states[1], v.size)
            v = (u < vmean).astype(np.float64)
        results.append(v)
    return results


@pytest.mark.parametrize("explicit", [False, True])
def test_gibbs_sampling_with_shared_variables(explicit):
    rng = np.random.default_rng(5)
    W_values = rng.normal(size=(6, 4))
    bvis_values = rng.normal(size=6)
    bhid_values = rng.normal(size=4)

    W = theano.shared(W_values) # we assume that ``W_values`` contains the
                                # initial values of your weight matrix

    bvis = theano.shared(bvis_values)
    bhid = theano.shared(bhid_values)

    trng = T.shared_randomstreams.RandomStreams(1234)

    def OneStep(vsample) :
        hmean = T.nnet.sigmoid(theano.dot(vsample, W) + bhid)
        hsample = trng.binomial(size=hmean.shape, n=1, p=hmean)
        vmean = T.nnet.sigmoid(theano.dot(hsample, W.T) + bvis)
        return trng.binomial(size=vsample.shape, n=1, p=vmean,
                             dtype=theano.config.floatX)

    sample = theano.tensor.vector()

    if not explicit:
        values, updates = theano.scan(OneStep, outputs_info=sample, n_steps=10)
    else:
        # OneStep, with explicit use of the shared variables (W, bvis, bhid)
        def OneStep(vsample, W, bvis, bhid):
            hmean = T.nnet.sigmoid(theano.dot(vsample, W) + bhid)
            hsample = trng.binomial(size=hmean.shape, n=1, p=hmean)
            vmean = T.nnet.sigmoid(theano.dot(hsample, W.T) + bvis)
            return trng.binomial(size=vsample.shape, n=1, p=vmean,
                             dtype=theano.config.floatX)

        # The new scan, using strict=True
        values, updates = theano.scan(fn=OneStep,
                                      outputs_info=sample,
                                      non_sequences=[W, bvis, bhid],
                                      n_steps=10,
                                      strict=True)

    gibbs10 = theano.function([sample], values[-1], updates=updates)

    start = (rng.random(6) < 0.5).astype(np.float64)
    expected = _gibbs_oracle(start, W_values, bvis_values, bhid_values, 1234, 10, calls=2)
    first, second = gibbs10(start), gibbs10(start)
    np.testing.assert_array_equal(first, expected[0])
    np.testing.assert_array_equal(second, expected[1])  # the updates moved the streams on
    frozen = theano.function([sample], values[-1])  # without the updates: the same numbers
    np.testing.assert_array_equal(frozen(start), frozen(start))


def test_random_streams_are_uniform_and_binomial():
    trng = T.shared_randomstreams.RandomStreams(7)
    u = trng.uniform(size=(2000,))
    b = trng.binomial(size=(2000,), n=3, p=0.25)
    z = trng.normal(size=(2000,), avg=1.0, std=2.0)
    draw = theano.function([], [u, b, z])
    u1, b1, z1 = draw()
    u2, _, _ = draw()  # top-level draws advance on their own (default updates)
    assert 0 <= u1.min() and u1.max() < 1 and abs(u1.mean() - 0.5) < 0.03
    assert not np.array_equal(u1, u2)
    assert set(np.unique(b1)) <= {0, 1, 2, 3} and abs(b1.mean() - 0.75) < 0.08
    assert abs(z1.mean() - 1.0) < 0.15 and abs(z1.std() - 2.0) < 0.15
    expected_u, _ = _uniforms((7 * 7919) % (2 ** 31 - 1) + 1, 2000)
    np.testing.assert_allclose(u1, expected_u)


def test_random_streams_in_a_scan_agree_on_both_backends():
    trng = T.shared_randomstreams.RandomStreams(3)
    steps, updates = theano.scan(lambda: trng.uniform(size=(4,)), n_steps=5)
    state = trng.state_updates[0]
    results = []
    for backend in ("scheduler", "onnxruntime"):
        state.set_value(state.get_value() * 0 + 11)
        f = theano.function([], steps, updates=updates, backend=backend)
        results.append([f(), f()])
    expected, s = [], 11
    for _ in range(2):
        rows = []
        for _ in range(5):
            u, s = _uniforms(s, 4)
            rows.append(u)
        expected.append(np.array(rows))
    for got in results:
        np.testing.assert_allclose(got[0], expected[0])
        np.testing.assert_allclose(got[1], expected[1])
