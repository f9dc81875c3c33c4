"""mdf_loops.authoring.scan and its views: every argument, against numpy loops written here.

Each model is built with ``build_model`` and run by ``mdf_loops.run`` on the
scheduler backend (modeci-mdf's ``EvaluableGraph``, every loop iteration in the
MDF engine).
"""

from __future__ import annotations

import numpy as np
import pytest

import mdf_loops
from mdf_loops import authoring as A
from mdf_loops.authoring import AuthoringError, ScanError


def evaluate(outputs: dict, inputs: dict | None = None) -> dict:
    model = A.build_model(outputs, name="under_test")
    return mdf_loops.run(model, inputs or {}, backend="scheduler")


def loops_of(outputs: dict) -> list:
    """The loop nodes (function, body metadata) of the top graph of the model built from outputs."""
    graph = A.build_model(outputs, name="under_test").graphs[0]
    found = []
    for node in graph.nodes:
        for p in node.parameters:
            if p.function in ("onnx::Scan", "onnx::Loop"):
                body = next(q.value for q in node.parameters if q.id == "body")
                found.append((p.function, mdf_loops.model.body_graph(body).metadata))
    return found


U = np.arange(1.0, 9.0)  # 8 steps


# ---------------------------------------------------------------- sequences and taps


def test_map_over_one_sequence():
    u = A.input("u", (None,))
    doubled, updates = A.scan(lambda x: x * 2, sequences=u)
    assert updates == {}
    np.testing.assert_array_equal(evaluate({"y": doubled}, {"u": U})["y"], U * 2)


def test_past_and_future_taps_are_shifted_slices():
    u = A.input("u", (None,))
    out, _ = A.scan(lambda u_tm2, u_tp1: u_tm2 * 10 + u_tp1,
                    sequences=dict(input=u, taps=[-2, 1]))
    expected = [U[t - 2] * 10 + U[t + 1] for t in range(2, len(U) - 1)]
    np.testing.assert_array_equal(evaluate({"y": out}, {"u": U})["y"], expected)
    ((function, body),) = loops_of({"y": out})
    assert function == "onnx::Scan" and len(body["formal_inputs"]) == 2


def test_only_negative_taps_start_where_they_are_valid():
    u = A.input("u", (None,))
    out, _ = A.scan(lambda a, b: a - b, sequences=dict(input=u, taps=[-3, -1]))
    expected = [U[t - 3] - U[t - 1] for t in range(3, len(U))]
    np.testing.assert_array_equal(evaluate({"y": out}, {"u": U})["y"], expected)


def test_only_positive_taps_end_where_they_are_valid():
    u = A.input("u", (None,))
    out, _ = A.scan(lambda a, b: a * 100 + b, sequences=dict(input=u, taps=[2, 1]))
    expected = [U[t + 2] * 100 + U[t + 1] for t in range(0, len(U) - 2)]
    np.testing.assert_array_equal(evaluate({"y": out}, {"u": U})["y"], expected)


def test_a_single_int_tap_and_default_taps():
    u = A.input("u", (None,))
    out, _ = A.scan(lambda a, b: a + b * 1000,
                    sequences=[dict(input=u, taps=1), dict(input=u)])
    expected = [U[t + 1] + U[t] * 1000 for t in range(len(U) - 1)]
    np.testing.assert_array_equal(evaluate({"y": out}, {"u": U})["y"], expected)


@pytest.mark.parametrize("static", [True, False])
def test_sequences_of_different_lengths_truncate_to_the_shortest(static):
    u = A.input("u", (8,) if static else (None,))
    v = A.input("v", (5,) if static else (None,))
    out, _ = A.scan(lambda a, b: a * b, sequences=[u, v])
    V = np.arange(5.0) + 0.5
    np.testing.assert_array_equal(evaluate({"y": out}, {"u": U, "v": V})["y"], U[:5] * V)


def test_go_backwards_reads_from_the_end():
    u = A.input("u", (None,))
    v = A.input("v", (None,))
    out, _ = A.scan(lambda a, b, acc: acc * 10 + a + b, sequences=[u, v],
                    outputs_info=np.float64(0), go_backwards=True)
    V = np.array([1.0, 2.0, 3.0])
    acc, expected = 0.0, []
    for a, b in zip(U[::-1], V[::-1]):  # reversed first, then truncated to the shortest
        acc = acc * 10 + a + b
        expected.append(acc)
    np.testing.assert_array_equal(evaluate({"y": out}, {"u": U, "v": V})["y"], expected)


def test_go_backwards_with_taps():
    u = A.input("u", (None,))
    out, _ = A.scan(lambda a, b: a * 10 + b, sequences=dict(input=u, taps=[-1, 0]),
                    go_backwards=True)
    expected = [U[t - 1] * 10 + U[t] for t in range(len(U) - 1, 0, -1)]
    np.testing.assert_array_equal(evaluate({"y": out}, {"u": U})["y"], expected)


def test_a_tap_beyond_the_sequence_is_an_error():
    u = A.input("u", (4,))
    with pytest.raises(ScanError, match=r"sequences\[0\] has 4 entries, but its taps \[-4, 0\]"):
        A.scan(lambda a, b: a + b, sequences=dict(input=u, taps=[-4, 0]), name="rnn")


def test_bad_sequences_are_errors():
    u = A.input("u", (None,))
    with pytest.raises(ScanError, match=r"scan 's': sequences\[0\] is a scalar"):
        A.scan(lambda a: a, sequences=A.input("s", ()), name="s")
    with pytest.raises(ScanError, match=r"sequences\[0\] must be a value or dict"):
        A.scan(lambda a: a, sequences=dict(seq=u), name="s")
    with pytest.raises(ScanError, match=r"taps must be a non-empty list of integers"):
        A.scan(lambda a: a, sequences=dict(input=u, taps=[0.5]), name="s")


# ---------------------------------------------------------------- outputs_info


def test_default_tap_is_minus_one():
    u = A.input("u", (None,))
    acc, _ = A.scan(lambda x, prev: prev + x, sequences=u, outputs_info=np.float64(0))
    also, _ = A.scan(lambda x, prev: prev + x, sequences=u,
                     outputs_info=dict(initial=A.constant(0.0)))
    result = evaluate({"acc": acc, "also": also}, {"u": U})
    np.testing.assert_array_equal(result["acc"], np.cumsum(U))
    np.testing.assert_array_equal(result["also"], np.cumsum(U))


def test_output_taps_carry_a_window_of_past_values():
    init = A.input("init", (2,))
    fib, _ = A.scan(lambda f_tm2, f_tm1: f_tm2 + f_tm1,
                    outputs_info=dict(initial=init, taps=[-2, -1]), n_steps=10)
    f = [0.0, 1.0]
    for t in range(2, 12):
        f.append(f[t - 2] + f[t - 1])
    np.testing.assert_array_equal(evaluate({"fib": fib}, {"init": [0.0, 1.0]})["fib"], f[2:])


def test_output_taps_in_the_given_order_reach_the_oldest_row():
    init = A.input("init", (3, 2))
    out, _ = A.scan(lambda x_tm1, x_tm3: x_tm1 * 2 - x_tm3,
                    outputs_info=dict(initial=init, taps=[-1, -3]), n_steps=6)
    X0 = np.array([[1.0, 2.0], [3.0, 5.0], [7.0, 11.0]])
    x = {-3: X0[0], -2: X0[1], -1: X0[2]}
    for t in range(6):
        x[t] = x[t - 1] * 2 - x[t - 3]
    np.testing.assert_array_equal(evaluate({"x": out}, {"init": X0})["x"],
                                  [x[t] for t in range(6)])


def test_none_outputs_are_not_fed_back():
    u = A.input("u", (None,))
    outs, _ = A.scan(lambda x, prev: (x * 3, prev + x), sequences=u,
                     outputs_info=[None, np.float64(1)])
    also, _ = A.scan(lambda x: (x + 1, x - 1), sequences=u,
                     outputs_info=[dict(), dict(initial=A.constant(0.0), taps=None)])
    result = evaluate({"mapped": outs[0], "acc": outs[1], "a": also[0], "b": also[1]},
                      {"u": U})
    np.testing.assert_array_equal(result["mapped"], U * 3)
    np.testing.assert_array_equal(result["acc"], 1 + np.cumsum(U))
    np.testing.assert_array_equal(result["a"], U + 1)
    np.testing.assert_array_equal(result["b"], U - 1)


def test_partial_outputs_info_is_an_error():
    u = A.input("u", (None,))
    with pytest.raises(ScanError, match="fn returns 2 outputs but outputs_info describes 1"):
        A.scan(lambda x, prev: (prev + x, x * 2), sequences=u, outputs_info=[np.float64(0)],
               name="partial")


def test_mismatched_initial_state_is_an_error():
    u = A.input("u", (None, 3))
    with pytest.raises(ScanError, match=r"scan 'acc': outputs_info\[0\] is float64\[2\] but fn "
                                        r"returns float64\[3\] for output 0"):
        A.scan(lambda x, prev: x * 2, sequences=u, outputs_info=np.zeros(2), name="acc")
    with pytest.raises(ScanError, match=r"outputs_info\[0\] is int64\[\] but fn returns "
                                        r"float64\[\]"):
        A.scan(lambda x, prev: prev + x, sequences=A.input("v", (None,)), outputs_info=0)
    window = A.input("window", (2, 3))
    with pytest.raises(ScanError, match=r"for taps \[-3, -1\] the initial state must be "
                                        r"float64\[3, 3\].*got float64\[2, 3\]"):
        A.scan(lambda x, a, b: a + b + x, sequences=u,
               outputs_info=dict(initial=window, taps=[-3, -1]))


def test_bad_outputs_info_entries_are_errors():
    with pytest.raises(ScanError, match=r"output taps must be negative.*\[1\]"):
        A.scan(lambda a: a, outputs_info=dict(initial=A.constant(0.0), taps=[1]), n_steps=2)
    with pytest.raises(ScanError, match=r"taps \[-1\] need an initial state"):
        A.scan(lambda a: a, outputs_info=dict(taps=[-1]), n_steps=2)
    with pytest.raises(ScanError, match=r"unknown keys \['return_steps'\]"):
        A.scan(lambda a: a, outputs_info=dict(initial=A.constant(0.0), return_steps=1),
               n_steps=2)


# ---------------------------------------------------------------- non_sequences and strict


def test_non_sequences_come_last_and_are_read_from_the_enclosing_graph():
    u = A.input("u", (None,))
    w = A.input("w", ())
    out, _ = A.scan(lambda x, prev, w, c: prev * w + x + c, sequences=u,
                    outputs_info=np.float64(0), non_sequences=[w, 0.5])
    acc, expected = 0.0, []
    for x in U:
        acc = acc * 0.9 + x + 0.5
        expected.append(acc)
    np.testing.assert_allclose(evaluate({"y": out}, {"u": U, "w": 0.9})["y"], expected,
                               rtol=1e-14)
    ((_, body),) = loops_of({"y": out})
    assert body["outer_scope_inputs"]  # w is read from the enclosing graph


def test_values_not_passed_are_found_unless_strict():
    u = A.input("u", (None,))
    w = A.input("w", ())
    w2 = w * w
    out, _ = A.scan(lambda x: x * w2, sequences=u)  # not strict: w2 is found
    np.testing.assert_array_equal(evaluate({"y": out}, {"u": U, "w": 3.0})["y"], U * 9)
    # strict=True, as in PyTensor, is about shared values only: other values are found
    strict, _ = A.scan(lambda x: x * w2, sequences=u, strict=True, name="mul")
    np.testing.assert_array_equal(evaluate({"y": strict}, {"u": U, "w": 3.0})["y"], U * 9)
    s = A.shared(np.float64(2.0), "s")
    with pytest.raises(ScanError, match=r"scan 'mul': strict=True, but fn uses shared value "
                                        r"'s'.*not passed in non_sequences"):
        A.scan(lambda x: x * s, sequences=u, strict=True, name="mul")
    passed, _ = A.scan(lambda x, s: x * s, sequences=u, non_sequences=s, strict=True)
    np.testing.assert_array_equal(evaluate({"y": passed}, {"u": U})["y"], U * 2)


def test_strict_accepts_non_sequences_sequences_and_constants():
    u = A.input("u", (None,))
    w = A.input("w", ())
    c = A.constant(2.0)
    out, _ = A.scan(lambda x, w: x * w + c + u[0], sequences=u, non_sequences=w, strict=True)
    np.testing.assert_array_equal(evaluate({"y": out}, {"u": U, "w": 3.0})["y"],
                                  U * 3 + 2 + U[0])


# ---------------------------------------------------------------- n_steps


def test_n_steps_as_a_number_truncates_sequences():
    u = A.input("u", (None,))
    out, _ = A.scan(lambda x: x + 1, sequences=u, n_steps=3)
    np.testing.assert_array_equal(evaluate({"y": out}, {"u": U})["y"], U[:3] + 1)


def test_n_steps_as_a_symbolic_scalar():
    k = A.input("k", (), "int32")
    u = A.input("u", (None,))
    counted, _ = A.scan(lambda prev: prev + 1, outputs_info=np.int64(0), n_steps=k)
    summed, _ = A.scan(lambda x, prev: prev + x, sequences=u, outputs_info=np.float64(0),
                       n_steps=k)
    result = evaluate({"counted": counted, "summed": summed}, {"k": np.int32(5), "u": U})
    np.testing.assert_array_equal(result["counted"], [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(result["summed"], np.cumsum(U)[:5])


def test_zero_steps_give_empty_outputs():
    k = A.input("k", (), "int64")
    u = A.input("u", (None, 2))
    by_k, _ = A.scan(lambda x, prev: prev + x, sequences=u, outputs_info=np.zeros(2),
                     n_steps=k)
    static, _ = A.scan(lambda prev: prev * 2, outputs_info=np.ones(3), n_steps=0)
    result = evaluate({"by_k": by_k, "static": static},
                      {"k": np.int64(0), "u": np.ones((4, 2))})
    assert result["by_k"].shape == (0, 2)
    assert result["static"].shape == (0, 3)


def test_empty_sequences_give_empty_outputs():
    up_to = A.input("up_to", (), "int32")
    seq = A.arange(up_to)
    acc, _ = A.scan(lambda n, total: total + n, sequences=seq,
                    outputs_info=A.constant(np.int32(0)))
    result = evaluate({"acc": acc}, {"up_to": np.int32(0)})
    assert result["acc"].shape == (0,) and result["acc"].dtype == np.int32


def test_bad_n_steps_are_errors():
    u = A.input("u", (4,))
    with pytest.raises(ScanError, match=r"sequences\[0\] gives 4 steps.*fewer than n_steps = 6"):
        A.scan(lambda x: x, sequences=u, n_steps=6)
    with pytest.raises(ScanError, match=r"n_steps = -2; negative n_steps are not supported"):
        A.scan(lambda x: x, sequences=u, n_steps=-2)
    with pytest.raises(ScanError, match=r"n_steps must be an integer"):
        A.scan(lambda x: x, sequences=u, n_steps=2.5)
    with pytest.raises(ScanError, match=r"n_steps must be an integer scalar"):
        A.scan(lambda x: x, sequences=u, n_steps=A.input("f", ()))
    with pytest.raises(ScanError, match=r"with no sequences, n_steps .* is needed"):
        A.scan(lambda prev: prev + 1, outputs_info=np.float64(0))


# ---------------------------------------------------------------- until


def test_until_with_sequences_stops_after_the_step_where_it_holds():
    u = A.input("u", (None,))
    out, _ = A.scan(lambda x, acc: (acc + x, A.until(acc + x > 10)), sequences=u,
                    outputs_info=np.float64(0))
    np.testing.assert_array_equal(evaluate({"y": out}, {"u": U})["y"], [1, 3, 6, 10, 15])
    ((function, _),) = loops_of({"y": out})
    assert function == "onnx::Loop"


def test_until_without_a_step_limit_is_a_while_loop():
    out, _ = A.scan(lambda prev: (prev * 3, A.until(prev * 3 > 100)),
                    outputs_info=np.int64(1))
    np.testing.assert_array_equal(evaluate({"y": out})["y"], [3, 9, 27, 81, 243])


def test_bad_until_is_an_error():
    with pytest.raises(ScanError, match=r"until\(\.\.\.\) needs one boolean"):
        A.scan(lambda prev: (prev, A.until(prev > 0)), outputs_info=np.zeros(2), n_steps=3)
    with pytest.raises(ScanError, match="more than one until"):
        A.scan(lambda prev: (prev, A.until(prev > 0), A.until(prev < 0)),
               outputs_info=np.float64(0), n_steps=3)


# ---------------------------------------------------------------- results and updates


def test_return_list_and_several_outputs():
    u = A.input("u", (None,))
    single, _ = A.scan(lambda x: x, sequences=u, return_list=True)
    assert isinstance(single, list) and len(single) == 1
    pair, _ = A.scan(lambda x: [x, -x], sequences=u)
    assert isinstance(pair, list) and len(pair) == 2
    result = evaluate({"a": single[0], "b": pair[1]}, {"u": U})
    np.testing.assert_array_equal(result["b"], -U)


def test_updates_carry_a_shared_value_across_steps():
    """The reference docs' example: b = a + 1 is 2, c = updates[a] + 1 is 12."""
    a = A.shared(np.int64(1), "a")
    values, updates = A.scan(lambda: {a: a + 1}, n_steps=10)
    assert values is None and list(updates) == [a]
    b = a + 1
    c = updates[a] + 1
    result = evaluate({"b": b, "c": c})
    assert result["b"] == 2 and result["c"] == 12


def test_updates_read_inside_fn_see_the_current_value():
    counter = A.shared(np.float64(0), "counter")
    values, updates = A.scan(lambda prev: ([prev + counter], {counter: counter + 1}),
                             outputs_info=np.float64(0), n_steps=4)
    result = evaluate({"values": values, "counter": updates[counter]})
    np.testing.assert_array_equal(result["values"], [0, 1, 3, 6])
    assert result["counter"] == 4


def test_updates_in_a_scan_over_sequences():
    u = A.input("u", (None,))
    total = A.shared(np.float64(0), "total")
    doubled, updates = A.scan(lambda x: (x * 2, {total: total + x}), sequences=u)
    result = evaluate({"doubled": doubled, "total": updates[total]}, {"u": U})
    np.testing.assert_array_equal(result["doubled"], U * 2)
    assert result["total"] == U.sum()


def test_until_with_go_backwards():
    u = A.input("u", (None,))
    out, _ = A.scan(lambda x, acc: (acc + x, A.until(acc + x > 10)), sequences=u,
                    outputs_info=np.float64(0), go_backwards=True)
    np.testing.assert_array_equal(evaluate({"y": out}, {"u": U})["y"], [8, 15])


def test_bad_updates_are_errors():
    with pytest.raises(ScanError, match="an updates key must be a value made outside fn"):
        A.scan(lambda prev: (prev, {prev: prev}), outputs_info=np.float64(0), n_steps=2)
    a = A.shared(np.float64(0), "a")
    with pytest.raises(ScanError, match=r"the update of shared value 'a', float64\[\] is float64\[2\]"):
        A.scan(lambda: {a: A.zeros((2,))}, n_steps=2)


# ---------------------------------------------------------------- keeping only the last step


def test_last_step_only_keeps_a_state():
    u = A.input("u", (None,))
    acc, _ = A.scan(lambda x, prev: prev + x, sequences=u, outputs_info=np.float64(0))
    mapped, _ = A.scan(lambda x: x * 2, sequences=u)
    window, _ = A.scan(lambda a, b: a + b, outputs_info=dict(initial=np.array([1.0, 1.0]),
                                                            taps=[-2, -1]), n_steps=5)
    outputs = {"total": acc[-1], "last_mapped": mapped[-1], "fib": window[-1]}
    loops = loops_of(outputs)
    assert len(loops) == 3
    for function, body in loops:  # nothing stacked: Scan returns states, Loop cond + states
        assert len(body["formal_outputs"]) == (1 if function == "onnx::Scan" else 2)
    result = evaluate(outputs, {"u": U})
    assert result["total"] == U.sum() and result["fib"] == 13
    assert result["last_mapped"] == U[-1] * 2  # a map-like output of known shape: a new state


def test_last_step_of_a_map_like_output_of_unknown_shape_stays_stacked():
    m = A.input("m", (None, None))
    rows, _ = A.scan(lambda row: row * 2, sequences=m)
    ((_, body),) = loops_of({"last": rows[-1]})
    assert len(body["formal_outputs"]) == 1  # the stacked rows
    M = np.arange(6.0).reshape(3, 2)
    np.testing.assert_array_equal(evaluate({"last": rows[-1]}, {"m": M})["last"], M[-1] * 2)


def test_all_steps_are_kept_when_more_than_the_last_is_used():
    u = A.input("u", (None,))
    acc, _ = A.scan(lambda x, prev: prev + x, sequences=u, outputs_info=np.float64(0))
    outputs = {"total": acc[-1], "first": acc[0]}
    ((_, body),) = loops_of(outputs)
    assert len(body["formal_outputs"]) == 2
    result = evaluate(outputs, {"u": U})
    assert result["total"] == U.sum() and result["first"] == U[0]
    # the same traced values build a model that needs every step: the rewrite copied the graph
    np.testing.assert_array_equal(evaluate({"all": acc}, {"u": U})["all"], np.cumsum(U))


def test_unused_outputs_are_not_stacked():
    u = A.input("u", (3,))
    outs, _ = A.scan(lambda x: (x * 2, x * 3), sequences=u)
    ((_, body),) = loops_of({"b": outs[1]})
    assert len(body["formal_outputs"]) == 1


# ---------------------------------------------------------------- views


def test_views():
    digits = A.input("digits", (None,), "int64")
    mapped, _ = A.map(lambda d, k: d * k, digits, non_sequences=3)
    back, _ = A.map(lambda d: d, digits, go_backwards=True)
    total, _ = A.reduce(lambda d, acc: acc + d, digits, np.int64(0))
    left, _ = A.foldl(lambda d, acc: acc * 10 + d, digits, np.int64(0))
    right, _ = A.foldr(lambda d, acc: acc * 10 + d, digits, np.int64(0))
    result = evaluate({"mapped": mapped, "back": back, "total": total, "left": left,
                       "right": right}, {"digits": np.array([1, 2, 3])})
    np.testing.assert_array_equal(result["mapped"], [3, 6, 9])
    np.testing.assert_array_equal(result["back"], [3, 2, 1])
    assert result["total"] == 6 and result["left"] == 123 and result["right"] == 321


# ---------------------------------------------------------------- nesting and scopes


def test_nested_scans_pass_outer_values_level_by_level():
    m = A.input("m", (None, None))
    s = A.input("s", ())

    def row_step(row):
        partial, _ = A.scan(lambda x, acc: acc + x * s, sequences=row,
                            outputs_info=A.constant(0.0))
        return partial

    rows, _ = A.scan(row_step, sequences=m)
    M = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(evaluate({"rows": rows}, {"m": M, "s": 2.0})["rows"],
                                  np.cumsum(M * 2, axis=1))


def test_a_value_made_inside_fn_cannot_be_used_outside():
    u = A.input("u", (None,))
    leaked = []

    def fn(x):
        leaked.append(x * 2)
        return x

    A.scan(fn, sequences=u, name="leaky")
    with pytest.raises(AuthoringError, match=r"made inside the fn of scan 'leaky'"):
        leaked[0] + 1
