"""mdf_loops/backends/onnxruntime/memory.py: the capped arena of untrusted sessions.

The arena belongs to the process, so each case runs in a fresh interpreter.
"""

import subprocess
import sys

import pytest

_RUN = """
import logging, sys, numpy as np, mdf_loops
from onnx import helper as oh, TensorProto as T
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="LOG %(message)s")
def model(n):
    F = lambda name, s: oh.make_tensor_value_info(name, T.FLOAT, s)
    node = oh.make_node("Mul", ["a", "b"], ["y"])
    graph = oh.make_graph([node], "g", [F("a", [n, 1]), F("b", [1, n])], [F("y", None)])
    return mdf_loops.onnx_to_mdf(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)]))
def run(n, **options):
    feeds = dict(a=np.ones((n, 1), np.float32), b=np.ones((1, n), np.float32))
    try:
        out = mdf_loops.run(model(n), feeds, backend="onnxruntime", **options)
        print("RESULT", float(out["y"].sum()))
    except mdf_loops.MdfLoopsError as exc:
        print("RESULT", type(exc).__name__)
"""


def _child(steps: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _RUN + steps], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_arena_refuses_what_does_not_fit_and_serves_what_does():
    # max_elements=10**6: an arena of 16 MB. 1000 x 1000 float32 is 4 MB: it fits;
    # 3000 x 3000 is 36 MB: refused inside onnxruntime
    lines = _child("run(1000, max_elements=10**6)\nrun(3000, max_elements=10**6)")
    results = [line for line in lines if line.startswith("RESULT")]
    assert results == ["RESULT 1000000.0", "RESULT SizeLimitError"]
    assert not any("runs without it" in line for line in lines)


def test_a_session_needing_more_than_the_arena_runs_without_it_and_says_so():
    lines = _child("run(10, max_elements=10**4)\nrun(2000, max_elements=10**8)")
    results = [line for line in lines if line.startswith("RESULT")]
    assert results == ["RESULT 100.0", "RESULT 4000000.0"]
    assert any("made for max_elements=10000" in line for line in lines), lines


def test_trusted_sessions_do_not_use_the_arena():
    lines = _child("run(10, max_elements=10**4)\nrun(2000, trusted=True)")
    assert [line for line in lines if line.startswith("RESULT")] == [
        "RESULT 100.0", "RESULT 4000000.0"]
    assert not any("runs without it" in line for line in lines)


@pytest.mark.parametrize("text, refused", [
    ("Available memory of 16 is smaller than requested bytes of 36000000", True),
    ("Non-zero status code returned while running Mul node", False),
])
def test_only_the_arenas_refusal_is_a_size_error(text, refused):
    from mdf_loops.backends.onnxruntime.memory import refused_by_cap

    assert refused_by_cap(RuntimeError(text)) is refused
