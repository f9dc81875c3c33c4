"""Differential test: generated Scan and Loop models, three ways.

hypothesis builds ONNX models with ``onnx.helper``: a top-level Scan or Loop with
1 to 3 states (scalars or vectors), 0 to 3 scan inputs (Scan: at least 1) and
scan outputs, random scan axes (negative ones too) and directions, every
trip-count / condition mode of Loop, bodies of Add/Sub/Mul/Tanh/Identity/MatMul
that read top-level values from the outer scope, a Scan or Loop nested inside a
body up to depth 2, and sequences of length zero. Each model runs

* in onnxruntime (the oracle),
* through ``onnx_to_mdf`` + ``mdf_loops.run`` on modeci-mdf's scheduler,
* through ``onnx_to_mdf`` + ``mdf_to_onnx`` + onnxruntime,
* through ``onnx_to_mdf`` + ``mdf_loops.run(backend="torch")`` (when torch is installed),

and the three must agree. A Loop with neither trip count nor condition never
stops: it is exported and checked, and the scheduler must stop it at the
iteration limit. ``MDF_LOOPS_DIFF_EXAMPLES`` sets the number of generated
models (default 200, spread over the five modes, derandomized so CI is reproducible;
setting the variable gives a random run).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from onnx import helper as oh

import mdf_loops
from mdf_loops.onnx.ort_safe import make_safe
from conftest import BOOL, FLOAT, INT64, assert_same, onnx_model, ort_run, run_mdf, value_info
from mdf_loops.onnx.export import mdf_to_onnx

#: the top-level operator and, for Loop, which of trip count M and condition are given
MODES = ["scan", "loop_M_cond", "loop_M", "loop_cond", "loop_infinite"]
TOTAL_EXAMPLES = int(os.environ.get("MDF_LOOPS_DIFF_EXAMPLES", "200"))
#: float32 tolerance
RTOL, ATOL = 1e-5, 1e-6
_ELEMENTWISE = ["Add", "Sub", "Mul", "Tanh", "Identity", "MatMul"]
_INFINITE_LIMIT = 7

#: whether the torch backend runs each model too
_TORCH = importlib.util.find_spec("torch") is not None

#: models run, by mode (read by the last test of this file)
RAN: dict[str, int] = {mode: 0 for mode in MODES}


@dataclass
class _Value:
    name: str
    rank: int  # every tensor is float32 with dimensions of size D, or a sequence axis


@dataclass
class _Case:
    model: onnx.ModelProto
    feeds: dict
    infinite: bool
    description: list[str] = field(default_factory=list)
    #: a Scan over zero-length inputs: (initial-state names, (rank, axis) of each scan output)
    empty_scan: tuple | None = None


class _Generator:
    """Draws one model; names are unique across the model and all its bodies."""

    def __init__(self, draw, size: int):
        self.draw, self.size, self.count = draw, size, 0
        self.description: list[str] = []

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def emit(self, nodes: list, op: str, inputs: list[str], **attributes) -> str:
        (name,) = self.emit_many(nodes, op, inputs, 1, **attributes)
        return name

    def emit_many(self, nodes: list, op: str, inputs: list[str], n: int, **attributes) -> list[str]:
        outputs = [self.fresh(op.lower()) for _ in range(n)]
        nodes.append(oh.make_node(op, inputs, outputs, **attributes))
        return outputs

    def constant(self, nodes: list, value: float) -> str:
        name = self.fresh("const")
        nodes.append(oh.make_node("Constant", [], [name], value=oh.make_tensor(name, FLOAT, [], [value])))
        return name

    def dims(self, rank: int, sized: bool = True) -> list:
        """Dimensions of a value of ``rank``: all of size D, or unknown."""
        return [self.size] * rank if sized else [None] * rank

    # ------------------------------------------------------------ values in a body
    def bounded(self, nodes: list, pool: list[_Value], rank: int) -> str:
        """A value of ``rank`` from 1 to 3 operations on the pool, squashed by Tanh."""
        draw = self.draw
        value = draw(st.sampled_from([v.name for v in pool if v.rank == rank]))
        for _ in range(draw(st.integers(1, 3))):
            op = draw(st.sampled_from(_ELEMENTWISE))
            if op in ("Add", "Sub", "Mul"):
                other = draw(st.sampled_from([v.name for v in pool if v.rank <= rank]))
                pair = [value, other] if draw(st.booleans()) else [other, value]
                value = self.emit(nodes, op, pair)
            elif op == "MatMul" and rank == 1:
                value = self.emit(nodes, "MatMul", ["W", value])
            else:
                value = self.emit(nodes, "Tanh" if op == "MatMul" else op, [value])
        return self.emit(nodes, "Tanh", [value])

    def scan_outputs(self, nodes: list, pool: list[_Value], stacked: list[_Value]) -> list[_Value]:
        """0 to 3 scan-output elements: new values, or values of a nested loop."""
        outputs = []
        for _ in range(self.draw(st.integers(0, 3))):
            if stacked and self.draw(st.booleans()):
                chosen = self.draw(st.sampled_from(stacked))
                outputs.append(_Value(self.emit(nodes, "Identity", [chosen.name]), chosen.rank))
            else:
                rank = self.draw(st.integers(0, 1))
                outputs.append(_Value(self.bounded(nodes, pool, rank), rank))
        return outputs

    def body(self, kind: str, states: list[_Value], elements: list[_Value], outer: list[_Value],
             depth: int, condition_mode: str | None):
        """A Scan or Loop body: its GraphProto and its scan-output elements."""
        nodes: list = []
        formal_states = [_Value(self.fresh("s"), s.rank) for s in states]
        formal_elements = [_Value(self.fresh("e"), e.rank) for e in elements]
        pool = formal_states + formal_elements + outer
        inputs = []
        if kind == "Loop":
            i, cond = self.fresh("i"), self.fresh("cond")
            inputs += [value_info(i, INT64, []), value_info(cond, BOOL, [])]
            counter = self.emit(nodes, "Cast", [i], to=FLOAT)
            pool.append(_Value(counter, 0))
        inputs += [value_info(v.name, FLOAT, self.dims(v.rank))
                   for v in formal_states + formal_elements]
        stacked: list[_Value] = []
        if depth < 2 and self.draw(st.integers(0, 2)) == 0:
            finals, stacked = self.nested(nodes, pool, depth + 1)
            pool = pool + finals
        new_states = [_Value(self.bounded(nodes, pool, s.rank), s.rank) for s in formal_states]
        scanned = self.scan_outputs(nodes, pool, stacked)
        outputs = []
        if kind == "Loop":
            if condition_mode == "count":  # go on while i < K
                limit = self.constant(nodes, float(self.draw(st.integers(0, 3))))
                cond_out = self.emit(nodes, "Less", [counter, limit])
            else:  # the condition does not matter (or never stops the loop)
                cond_out = self.emit(nodes, "Identity", [cond])
            outputs.append(value_info(cond_out, BOOL, []))
        # body outputs are distinct values computed in the body
        for v in new_states + scanned:
            if any(v.name == o.name for o in outputs) or v.name in {x.name for x in formal_states}:
                v.name = self.emit(nodes, "Identity", [v.name])
            outputs.append(value_info(v.name, FLOAT, self.dims(v.rank, sized=False)))
        graph = oh.make_graph(nodes, self.fresh(f"{kind.lower()}_body"), inputs, outputs)
        return graph, scanned

    def nested(self, nodes: list, pool: list[_Value], depth: int):
        """A Scan or Loop inside a body; returns its final states and stacked outputs."""
        draw = self.draw
        kind = draw(st.sampled_from(["Scan", "Loop"]))
        states = [draw(st.sampled_from([v for v in pool if v.rank <= 1]))
                  for _ in range(draw(st.integers(1, 2)))]
        if kind == "Scan":
            axis, direction = draw(st.sampled_from([0, -2])), draw(st.integers(0, 1))
            body, scanned = self.body("Scan", states, [_Value("seq_element", 1)], pool, depth, None)
            outputs = self.emit_many(nodes, "Scan", [s.name for s in states] + ["seq"],
                                     len(states) + len(scanned), body=body, num_scan_inputs=1,
                                     scan_input_axes=[axis], scan_input_directions=[direction])
            self.description.append(f"depth {depth}: Scan over seq axis {axis} dir {direction}")
        else:
            mode = draw(st.sampled_from(["M_cond", "M", "cond"]))
            stops = mode == "cond" or (mode == "M" and draw(st.booleans()))
            body, scanned = self.body("Loop", states, [], pool, depth,
                                      "count" if stops else None)
            m = "m_inner" if "M" in mode else ""
            c = "c_inner" if "cond" in mode else ""
            outputs = self.emit_many(nodes, "Loop", [m, c] + [s.name for s in states],
                                     len(states) + len(scanned), body=body)
            self.description.append(f"depth {depth}: Loop {mode}")
        finals = [_Value(name, s.rank) for name, s in zip(outputs, states)]
        stacked = [_Value(name, v.rank + 1) for name, v in zip(outputs[len(states):], scanned)]
        return finals, stacked


@st.composite
def _models(draw, mode: str) -> _Case:
    size = draw(st.integers(1, 3))
    gen = _Generator(draw, size)
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    opset = draw(st.sampled_from([11, 13, 16, 17]))
    length = draw(st.integers(0, 4))

    def tensor(shape):
        return rng.uniform(-1, 1, shape).astype(np.float32)

    feeds = {"W": tensor((size, size)), "bias": tensor((size,)), "gain": tensor(()),
             "seq": tensor((draw(st.integers(1, 3)), size)),
             "m_inner": np.array(draw(st.integers(0, 3)), np.int64), "c_inner": np.array(True)}
    inputs = [value_info("W", FLOAT, [size, size]), value_info("bias", FLOAT, [size]),
              value_info("gain", FLOAT, []), value_info("seq", FLOAT, [None, size]),
              value_info("m_inner", INT64, []), value_info("c_inner", BOOL, [])]
    outer = [_Value("bias", 1), _Value("gain", 0)]
    states = []
    for k in range(draw(st.integers(1, 3))):
        rank = draw(st.integers(0, 1))
        states.append(_Value(f"state{k}", rank))
        feeds[f"state{k}"] = tensor((size,) * rank)
        inputs.append(value_info(f"state{k}", FLOAT, [size] * rank))
    if mode == "scan":
        elements, scan_inputs, axes = [], [], []
        for k in range(draw(st.integers(1, 3))):
            rank = draw(st.integers(0, 1))
            axis = draw(st.integers(-(rank + 1), rank))
            shape = [size] * rank
            shape.insert(axis % (rank + 1), length)
            elements.append(_Value(f"x{k}", rank))
            scan_inputs.append(f"x{k}")
            axes.append(axis)
            feeds[f"x{k}"] = tensor(shape)
            inputs.append(value_info(f"x{k}", FLOAT, [None if d == length else d for d in shape]))
        body, scanned = gen.body("Scan", states, elements, outer, 0, None)
        attributes = {"num_scan_inputs": len(elements), "scan_input_axes": axes,
                      "scan_input_directions": [draw(st.integers(0, 1)) for _ in elements]}
        if scanned:
            attributes["scan_output_axes"] = [draw(st.integers(-(v.rank + 1), v.rank)) for v in scanned]
            attributes["scan_output_directions"] = [draw(st.integers(0, 1)) for _ in scanned]
        node_inputs = [s.name for s in states] + scan_inputs
        gen.description.insert(0, f"Scan {attributes}, length {length}")
    else:
        given = {"loop_M_cond": ("M", "cond"), "loop_M": ("M", ""), "loop_cond": ("", "cond"),
                 "loop_infinite": ("", "")}[mode]
        if given[0]:
            feeds["M"] = np.array(length, np.int64)
            inputs.append(value_info("M", INT64, []))
        if given[1]:
            feeds["cond"] = np.array(draw(st.booleans()))
            inputs.append(value_info("cond", BOOL, []))
        # a trip-count-only Loop may stop early on its body's condition too (docs/semantics.md)
        stops = given == ("", "cond") or (given == ("M", "") and draw(st.booleans()))
        body, scanned = gen.body("Loop", states, [], outer, 0, "count" if stops else None)
        attributes = {}
        node_inputs = list(given) + [s.name for s in states]
        gen.description.insert(0, f"Loop {given}, M {length}")
    op = "Scan" if mode == "scan" else "Loop"
    outputs = [f"final{k}" for k in range(len(states))] + [f"scanned{k}" for k in range(len(scanned))]
    ranks = [s.rank for s in states] + [v.rank + 1 for v in scanned]
    node = oh.make_node(op, node_inputs, outputs, body=body, **attributes)
    output_infos = [value_info(name, FLOAT, [None] * rank) for name, rank in zip(outputs, ranks)]
    # only inputs something reads: MDF keeps no type for an input no port reads
    used = _names_read(node)
    inputs = [i for i in inputs if i.name in used]
    feeds = {k: v for k, v in feeds.items() if k in used}
    model = onnx_model([node], inputs, output_infos, opset=opset)
    onnx.checker.check_model(model, full_check=True)
    empty_scan = None
    if mode == "scan" and length == 0:
        axes = attributes.get("scan_output_axes", [])
        empty_scan = ([s.name for s in states], [(v.rank + 1, a) for v, a in zip(scanned, axes)])
    return _Case(model, feeds, mode == "loop_infinite", gen.description + [f"opset {opset}"],
                 empty_scan)


def _names_read(node: onnx.NodeProto) -> set[str]:
    names = set(node.input)
    for attribute in node.attribute:
        if attribute.type == onnx.AttributeProto.GRAPH:
            for inner in attribute.g.node:
                names |= _names_read(inner)
    return names


def _check(case: _Case) -> None:
    imported = mdf_loops.onnx_to_mdf(case.model)
    exported = mdf_to_onnx(imported)
    onnx.checker.check_model(exported, full_check=True)
    if case.infinite:
        with pytest.raises(mdf_loops.errors.IterationLimitError, match="node '.*'"):
            run_mdf(imported, case.feeds, max_iterations=_INFINITE_LIMIT)
        if _TORCH:
            with pytest.raises(mdf_loops.errors.IterationLimitError, match="max_iterations"):
                mdf_loops.run(imported, case.feeds, backend="torch",
                              max_iterations=_INFINITE_LIMIT)
        return
    runs = [run_mdf(imported, case.feeds)]
    if _TORCH:
        runs.append(mdf_loops.run(imported, case.feeds, backend="torch"))
    if case.empty_scan:
        # onnxruntime fails (or crashes) on a Scan over zero-length inputs: the oracle is
        # the definition, final states = initial states and empty scan outputs
        states, outputs = case.empty_scan
        for run in runs:
            for k, name in enumerate(states):
                assert_same(run[f"final{k}"], case.feeds[name])
            for k, (rank, axis) in enumerate(outputs):
                value = run[f"scanned{k}"]
                assert value.ndim == rank and value.shape[axis] == 0, (value.shape, axis)
        return
    # onnxruntime dies of SIGFPE moving a scan axis of an empty value (an inner Loop of zero
    # iterations can make one): it runs the models with their scan axes moved out
    # (mdf_loops.onnx.ort_safe, checked against numpy in test_ort_safe.py)
    expected = ort_run(make_safe(case.model), case.feeds)
    reexported = ort_run(make_safe(exported), case.feeds)
    for name, value in expected.items():
        for run in runs:
            _assert_agree(run[name], value)
        _assert_agree(reexported[name], value)


def _assert_agree(actual, expected) -> None:
    """Same values; for an empty scan output only the element type, the rank and emptiness:
    after zero iterations onnxruntime gives the element dimensions no shape inference knows
    as 0, the scheduler as they would have been."""
    if isinstance(expected, np.ndarray) and expected.size == 0:
        assert isinstance(actual, np.ndarray) and actual.size == 0, actual
        assert (actual.dtype, actual.ndim) == (expected.dtype, expected.ndim), (actual, expected)
        return
    assert_same(actual, expected, RTOL, ATOL)


@pytest.mark.parametrize("mode", MODES)
def test_generated_models_agree(mode, record_property):
    ran = 0

    @settings(max_examples=max(1, TOTAL_EXAMPLES // len(MODES)), deadline=None, database=None,
              derandomize="MDF_LOOPS_DIFF_EXAMPLES" not in os.environ,  # CI reproducible
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(case=_models(mode))
    def check(case: _Case) -> None:
        nonlocal ran
        for line in case.description:  # shown by --hypothesis-show-statistics
            event(line.split(":")[0] if line.startswith("depth") else line.split(" {")[0].split(",")[0])
        try:
            _check(case)
        except Exception as exc:
            exc.add_note("generated: " + "; ".join(case.description))
            raise
        ran += 1

    check()
    RAN[mode] += ran
    record_property("generated_models", ran)
    assert ran >= 1


def test_every_mode_ran():
    """Runs after the generated models (file order): every mode saw models."""
    if not all(RAN.values()):
        pytest.skip("run together with test_generated_models_agree")
    assert sum(RAN.values()) >= len(MODES)
