"""Shared helpers: build ONNX models and MDF loop nodes by hand, run onnxruntime, compare values."""

from __future__ import annotations

import functools
import os
import shutil
import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import onnx
import onnxruntime
import pytest
from modeci_mdf.mdf import Graph, InputPort, Model, Node, OutputPort, Parameter
from onnx import AttributeProto, TensorProto
from onnx import helper as oh

import mdf_loops
from mdf_loops.model.compat import INPUT_DEFAULTS, set_input_default

#: tests that draw pictures need Graphviz's dot; CI sets MDF_LOOPS_REQUIRE_DOT=1, and
#: there a missing dot fails instead of skipping
needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None and not os.environ.get("MDF_LOOPS_REQUIRE_DOT"),
    reason="Graphviz's dot program is not installed (apt-get install graphviz)",
)

#: tests of what needs InputPort.default_value and reduce as fields (modeci-mdf >= 0.4.14):
#: time loops, and files written by a script (0.4.13 writes defaults as port metadata)
needs_input_port_fields = pytest.mark.skipif(
    not INPUT_DEFAULTS, reason="modeci-mdf < 0.4.14: InputPort has no default_value/reduce")


def input_port(port_id: str, default: Any = None, **fields: Any) -> InputPort:
    """An InputPort with a default value, on every supported modeci-mdf (model/compat.py)."""
    port = InputPort(id=port_id, **fields)
    if default is not None:
        set_input_default(port, default)
    return port


FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
BOOL = TensorProto.BOOL


# ---------------------------------------------------------------- ONNX models


def value_info(name: str, elem_type: int = FLOAT, shape: Sequence | None = None):
    """A tensor ValueInfoProto; ``shape=None`` leaves the shape unknown."""
    return oh.make_tensor_value_info(name, elem_type, shape)


def make_model(graph: onnx.GraphProto, **kwargs: Any) -> onnx.ModelProto:
    """``onnx.helper.make_model`` at the lowest IR version its opsets need, not the newest
    the installed onnx knows: an onnxruntime older than that onnx refuses the newest
    (onnx 1.23 writes IR 14, onnxruntime 1.30 reads up to 13)."""
    model = oh.make_model(graph, **kwargs)
    model.ir_version = oh.find_min_ir_version_for(list(model.opset_import))
    return model


def onnx_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[onnx.ValueInfoProto],
    outputs: Sequence[onnx.ValueInfoProto],
    *,
    initializers: Sequence[onnx.TensorProto] = (),
    opset: int = 17,
    functions: Sequence[onnx.FunctionProto] = (),
    extra_opsets: Mapping[str, int] | None = None,
) -> onnx.ModelProto:
    """A ModelProto of one graph (opset 17 by default: onnxruntime runs it)."""
    graph = oh.make_graph(list(nodes), "main", list(inputs), list(outputs),
                          initializer=list(initializers))
    opsets = [oh.make_opsetid("", opset)]
    opsets += [oh.make_opsetid(d, v) for d, v in (extra_opsets or {}).items()]
    model = oh.make_model(graph, opset_imports=opsets, functions=list(functions))
    model.ir_version = 8
    return model


def body_graph(nodes, inputs, outputs, name: str = "body") -> onnx.GraphProto:
    return oh.make_graph(list(nodes), name, list(inputs), list(outputs))


def ort_run(model: onnx.ModelProto, feeds: Mapping[str, Any]) -> dict[str, Any]:
    """Outputs of ``model`` by name, computed by onnxruntime with one thread."""
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, dict(feeds))))


def run_mdf(model, inputs: Mapping[str, Any] | None = None, **kwargs) -> dict[str, Any]:
    """``mdf_loops.run`` on modeci-mdf's scheduler: every iteration through ``EvaluableGraph``."""
    return mdf_loops.run(model, dict(inputs or {}), backend="scheduler", **kwargs)


def run_imported(model: onnx.ModelProto, feeds: Mapping[str, Any], **kwargs) -> dict[str, Any]:
    """:func:`run_mdf` on the MDF import of ``model``."""
    return run_mdf(mdf_loops.onnx_to_mdf(model), feeds, **kwargs)


# ---------------------------------------------------------------- ONNX backend cases

CONTROL_FLOW_OPS = {"Loop", "Scan", "If"}


def _subgraphs(node: onnx.NodeProto):
    for attr in node.attribute:
        if attr.type == AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == AttributeProto.GRAPHS:
            yield from attr.graphs


def has_control_flow(graph: onnx.GraphProto) -> bool:
    """True when ``graph`` or any of its subgraphs has a Loop, Scan or If node."""
    return any(
        node.op_type in CONTROL_FLOW_OPS or any(has_control_flow(g) for g in _subgraphs(node))
        for node in graph.node
    )


@functools.lru_cache(maxsize=1)
def control_flow_cases() -> dict:
    """The ONNX backend node test cases with control flow, by name (collected once)."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the case generators overflow casts on purpose
        cases = collect_testcases(None)
    return {case.name: case for case in cases if has_control_flow(case.model.graph)}


@functools.lru_cache(maxsize=None)
def onnxruntime_runs_case(name: str) -> bool:
    """True when the installed onnxruntime loads case ``name``'s original model and
    reproduces its expected outputs (float32 tolerance).

    Which cases qualify depends on the onnxruntime version (newer opsets, dtypes such
    as bfloat16 it loads but cannot feed): tests decide per case, never by a count.
    """
    case = control_flow_cases()[name]
    names = [i.name for i in case.model.graph.input]
    try:
        for inputs, expected in case.data_sets:
            feeds = {k: v if isinstance(v, list) else np.asarray(v) for k, v in zip(names, inputs)}
            actual = list(ort_run(case.model, feeds).values())
            for a, e in zip(actual, expected, strict=True):
                if isinstance(e, list):
                    if len(a) != len(e) or not all(
                            np.allclose(np.asarray(x, np.float64), np.asarray(y, np.float64),
                                        rtol=1e-5, atol=1e-6) for x, y in zip(a, e)):
                        return False
                elif not np.allclose(np.asarray(a).astype(np.float64),
                                     np.asarray(e).astype(np.float64), rtol=1e-5, atol=1e-6):
                    return False
    except Exception:  # noqa: BLE001 - any refusal: not a case onnxruntime can be compared on
        return False
    return True


# ---------------------------------------------------------------- MDF loop nodes


def mdf_body(graph_id: str, nodes: Sequence[Node], formal_inputs, formal_outputs,
             outer_scope_inputs=(), edges=()) -> Graph:
    """A body graph with its ordered signature written in its metadata."""
    graph = Graph(id=graph_id)
    graph.nodes.extend(nodes)
    graph.edges.extend(edges)
    return mdf_loops.model.set_body_signature(graph, list(formal_inputs), list(formal_outputs),
                                        list(outer_scope_inputs))


def expression_node(node_id: str, inputs: Sequence[str], outputs: Mapping[str, str],
                    parameters: Mapping[str, Any] | None = None) -> Node:
    """A node whose output ports are MDF value expressions over its input ports."""
    node = Node(id=node_id)
    node.input_ports.extend(InputPort(id=p) for p in inputs)
    node.parameters.extend(Parameter(id=k, value=v) for k, v in (parameters or {}).items())
    node.output_ports.extend(OutputPort(id=k, value=v) for k, v in outputs.items())
    return node


def loop_node(node_id: str, op: str, args: Mapping[str, str], bodies: Mapping[str, Graph],
              inputs: Sequence[str], n_outputs: int, attributes: Mapping[str, Any] | None = None,
              output_ids: Sequence[str] | None = None) -> Node:
    """An ``onnx::<op>`` node with bodies, attributes, input ports and ``out<i>`` output ports."""
    node = Node(id=node_id)
    node.input_ports.extend(InputPort(id=p) for p in inputs)
    for attr, body in bodies.items():
        node.parameters.append(Parameter(id=attr, value=mdf_loops.model.wrap_body(body)))
    for attr, value in (attributes or {}).items():
        node.parameters.append(Parameter(id=attr, value=value))
    node.parameters.append(Parameter(id=node_id, function=f"onnx::{op}", args=dict(args)))
    ids = list(output_ids or [f"out{i}" for i in range(n_outputs)])
    node.output_ports.extend(OutputPort(id=p, value=f"{node_id}[{i}]") for i, p in enumerate(ids))
    return node


def mdf_model(*nodes: Node, edges=(), model_id: str = "model") -> Model:
    return Model(id=model_id, graphs=[Graph(id="main", nodes=list(nodes), edges=list(edges))])


# ---------------------------------------------------------------- comparison


def assert_same(actual: Any, expected: Any, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Same value, element type and shape; lists element by element; None for None."""
    if expected is None:
        assert actual is None, f"expected None (empty optional), got {actual!r}"
        return
    if isinstance(expected, list):
        assert isinstance(actual, list), f"expected a list (sequence), got {type(actual).__name__}"
        assert len(actual) == len(expected), f"sequence length {len(actual)} != {len(expected)}"
        for a, e in zip(actual, expected):
            assert_same(a, e, rtol, atol)
        return
    expected = np.asarray(expected)
    assert isinstance(actual, np.ndarray), f"expected an array, got {type(actual).__name__}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    if expected.dtype.kind in "fc" or expected.dtype.name in ("bfloat16", "float16"):
        np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                                   rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240611)


# ---------------------------------------------------------------- memory


def child_peak(code: str, *args: str, limit_mb: int = 1500) -> tuple[str, int]:
    """Run ``code`` in a fresh Python under an address-space cap; (its one-line result,
    its peak resident memory in MB, measured by the child itself: VmHWM, Linux)."""
    import subprocess
    import sys

    wrapper = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({limit_mb} * 2**20, resource.RLIM_INFINITY))\n"
        "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) +
        "    result = 'ok'\n"
        "except Exception as exc:\n"
        "    result = f'{type(exc).__name__}: {exc}'\n"
        # the child's own high-water mark: ru_maxrss would include the peak of the
        # process that started it (Linux keeps it across exec)
        "import re\n"
        "status = open('/proc/self/status').read()\n"
        "peak = int(re.search(r'VmHWM:\\s+(\\d+)', status).group(1)) // 1024\n"
        "print(repr(result)); print(peak)\n")
    done = subprocess.run([sys.executable, "-c", wrapper, *args], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result, peak = done.stdout.strip().splitlines()[-2:]
    return eval(result), int(peak)  # noqa: S307 - our own child's repr of a string
