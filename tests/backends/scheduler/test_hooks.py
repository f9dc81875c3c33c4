"""The hooks into modeci-mdf and graph-scheduler: exactly the documented list, checked at install.

Also where ONNX semantics apply: in loop bodies, in graphs mdf-loops imported
(marked, with their opset) and in ``mdf_loops.run``; stock behaviour elsewhere.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from modeci_mdf.execution_engine import EvaluableGraph
from modeci_mdf.mdf import Model
from onnx import TensorProto
from onnx import helper as oh

import mdf_loops
from mdf_loops.backends.scheduler import hooks
from mdf_loops.backends.scheduler.hooks import HOOKS, Hook
from mdf_loops.model.semantics import MARKER_KEY, onnx_semantics_of
from conftest import control_flow_cases, expression_node, loop_node, mdf_body, mdf_model

ROOT = Path(__file__).resolve().parents[3]

_SNAPSHOT = r"""
import importlib, json, sys
MODULES = ["modeci_mdf.execution_engine", "modeci_mdf.functions.standard", "modeci_mdf.mdf",
           "graph_scheduler.condition", "graph_scheduler.scheduler"]

def names():
    found = {}
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name, value in vars(module).items():
            found[f"{module_name}.{name}"] = id(value)
            if isinstance(value, type) and value.__module__ == module_name:
                for attr, member in vars(value).items():
                    found[f"{module_name}.{name}.{attr}"] = id(member)
    return found

def functions():
    from modeci_mdf.functions.standard import mdf_functions
    return {key: [id(entry), repr(sorted(entry.items(), key=str))]
            for key, entry in mdf_functions.items()}

before, before_functions = names(), functions()
import mdf_loops
from mdf_loops.backends.scheduler import hooks
after, after_functions = names(), functions()
json.dump({
    "changed": sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k)),
    "installed": sorted(f"{h.target}.{h.name}" for h in hooks.HOOKS if h.key in hooks._TARGETS),
    "functions_before": before_functions,
    "functions_after": after_functions,
}, sys.stdout)
"""


@pytest.fixture(scope="module")
def import_effects() -> dict:
    done = subprocess.run([sys.executable, "-c", _SNAPSHOT], capture_output=True, text=True,
                          timeout=300, check=True)
    return json.loads(done.stdout)


def test_import_changes_exactly_the_documented_names(import_effects):
    documented = {f"{hook.target}.{hook.name}" for hook in HOOKS}
    required = {f"{hook.target}.{hook.name}" for hook in HOOKS if hook.required}
    changed = set(import_effects["changed"])
    assert changed == set(import_effects["installed"])
    assert required <= changed <= documented


def test_import_only_adds_onnx_functions_stock_lacks(import_effects):
    import onnx

    from mdf_loops.onnx.domains import DOMAINS

    before, after = import_effects["functions_before"], import_effects["functions_after"]
    assert {key: after[key] for key in before} == before  # no stock entry replaced or changed
    added = set(after) - set(before)
    assert {"onnx::Scan", "onnx::Loop", "onnx::If"} <= added
    schemas = {domain.function(s.name) for domain in DOMAINS
               for s in onnx.defs.get_all_schemas_with_history() if s.domain == domain.name}
    assert added <= schemas  # each an operator of a supported domain, as <prefix>::<Op>


def test_docs_table_mirrors_the_hooks():
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Hooks into modeci-mdf and graph-scheduler", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", section, re.MULTILINE)
    assert rows == [(hook.key, f"{hook.target}.{hook.name}") for hook in HOOKS]


def test_a_missing_required_target_fails_loudly(monkeypatch):
    missing = Hook("missing", "modeci_mdf.execution_engine", "no_such_function", "why", "nothing")
    monkeypatch.setattr(hooks, "HOOKS", HOOKS + (missing,))
    with pytest.raises(mdf_loops.MdfLoopsError,
                       match=r"'missing'.*execution_engine\.no_such_function.*supports modeci-mdf"):
        hooks._targets()
    optional = Hook("optional", "graph_scheduler.no_such_module", "f", "why", "nothing", False)
    monkeypatch.setattr(hooks, "HOOKS", HOOKS + (optional,))
    assert "optional" not in hooks._targets()


def test_an_unsupported_version_fails_loudly(monkeypatch):
    monkeypatch.setitem(hooks.SUPPORTED_VERSIONS, "modeci-mdf", ("0.1", "0.2"))
    with pytest.raises(mdf_loops.MdfLoopsError, match=r"modeci-mdf >=0\.1,<0\.2.*is installed"):
        hooks.check_versions()


def test_submodules_have_no_import_side_effects():
    script = r"""
import importlib, pkgutil
import mdf_loops
from modeci_mdf.functions.standard import mdf_functions
from mdf_loops.backends.scheduler import hooks
mdf_loops.unregister()
targets = [(hooks._resolve(h.target), h.name) for h in hooks.HOOKS if h.key in hooks._TARGETS]
stock = [vars(target).get(name) for target, name in targets]
functions = dict(mdf_functions)
for info in pkgutil.walk_packages(mdf_loops.__path__, "mdf_loops."):
    if info.name.endswith("__main__"):
        continue
    importlib.reload(importlib.import_module(info.name))
    assert [vars(t).get(n) for t, n in targets] == stock, info.name
    assert mdf_functions == functions, info.name
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=300)


# ---------------------------------------------------------------- where ONNX semantics apply


def _add_model(marked: bool) -> Model:
    graph = oh.make_graph(
        [oh.make_node("Add", ["a", "b"], ["c"])], "add",
        [oh.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in ("a", "b")],
        [oh.make_tensor_value_info("c", TensorProto.FLOAT, [3])])
    model = mdf_loops.onnx_to_mdf(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)]))
    if not marked:
        model.graphs[0].metadata.pop(MARKER_KEY)
    return model


def test_the_importer_marks_its_graphs_with_their_opset(tmp_path):
    model = _add_model(marked=True)
    assert onnx_semantics_of(model.graphs[0]).opset == 13
    path = tmp_path / "add.json"
    model.to_json_file(str(path))
    loaded = mdf_loops.load_model(str(path))
    assert onnx_semantics_of(loaded.graphs[0]).opset == 13


@pytest.mark.parametrize("marked", [True, False])
def test_a_marked_graph_keeps_onnx_dtypes_on_the_stock_engine(marked, rng):
    a, b = (rng.standard_normal(3).astype(np.float32) for _ in range(2))
    result = mdf_loops.model.stock_evaluate(_add_model(marked).graphs[0], {"a": a, "b": b})["c"]
    np.testing.assert_allclose(result, a + b, rtol=1e-6)
    # modeci-mdf's own onnx:: evaluation returns float64; ONNX's Add keeps float32
    assert result.dtype == (np.float32 if marked else np.float64)


def test_run_gives_onnx_semantics_to_an_unmarked_graph(rng):
    a, b = (rng.standard_normal(3).astype(np.float32) for _ in range(2))
    result = mdf_loops.run(_add_model(marked=False), {"a": a, "b": b}, backend="scheduler")["c"]
    assert result.dtype == np.float32


def test_the_opset_8_scan_cases_pass_on_the_stock_engine():
    cases = {name: case for name, case in control_flow_cases().items()
             if name.startswith("test_scan") and not name.endswith("_expanded")}
    assert "test_scan_sum" in cases  # the opset-8 case
    for name, case in cases.items():
        graph = mdf_loops.onnx_to_mdf(case.model).graphs[0]
        names = [i.name for i in case.model.graph.input]
        for inputs, expected in case.data_sets:
            outputs = mdf_loops.model.stock_evaluate(graph, dict(zip(names, inputs)))
            for actual, wanted in zip(outputs.values(), expected, strict=True):
                np.testing.assert_allclose(actual, wanted, rtol=1e-6, err_msg=name)


def _unmarked_scan_with_failing_body() -> Model:
    step = expression_node("step", ["h", "x"], {"h_next": "h + x[5]", "seen": "h"})
    body = mdf_body("step_body", [step], ["h", "x"], ["step.h_next", "step.seen"])
    return mdf_model(loop_node("scan", "Scan", {"initial_state_and_scan_inputs": "[h0, xs]"},
                               {"body": body}, ["h0", "xs"], 2, {"num_scan_inputs": 1},
                               ["h_final", "history"]))


def test_loop_bodies_get_onnx_semantics_in_an_unmarked_model(capsys):
    graph = _unmarked_scan_with_failing_body().graphs[0]
    engine = EvaluableGraph(graph)
    assert "Init graph" in capsys.readouterr().out  # the outer graph prints as stock does
    with pytest.raises(mdf_loops.errors.EvaluationError, match=r"node 'scan' > .*node 'step'.*x\[5\]"):
        engine.evaluate(initializer={"h0": np.array(0.0), "xs": np.ones(3)})
    assert "step_body" not in capsys.readouterr().out  # the body's prints go to the log


def test_pyproject_states_the_supported_versions():
    """pip installs only versions the hooks were written for (hooks.SUPPORTED_VERSIONS)."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    stated = {}
    for requirement in project["dependencies"]:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([\d.]+),<([\d.]+)", requirement.replace(" ", ""))
        if match:
            stated[match.group(1)] = (match.group(2), match.group(3))
    for name, bounds in hooks.SUPPORTED_VERSIONS.items():
        assert stated.get(name) == bounds, name
