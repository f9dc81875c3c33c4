"""The public API: a small typed top level, documented namespaces, deprecated aliases.

docs/api.md is the reference these tests hold the package to.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import re
import subprocess
import sys
import typing
import warnings
from pathlib import Path

import pytest

import mdf_loops

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mdf_loops"
API_DOC = (ROOT / "docs" / "api.md").read_text()

NAMESPACES = ["errors", "authoring", "model", "safety", "backends"]

#: old top-level name -> the namespace it moved to (docs/api.md, "Names that moved")
MOVED = {
    **dict.fromkeys(["map", "reduce", "foldl", "foldr"], "authoring"),
    **dict.fromkeys(
        ["ModelError", "EvaluationError", "LoopError", "LimitError", "IterationLimitError",
         "DepthLimitError", "SizeLimitError", "CompileError", "UnsafeExpressionError",
         "ResourceLimitError", "SweepError"],
        "errors",
    ),
    **dict.fromkeys(
        ["BodySignature", "body_graph", "body_signature", "set_body_signature", "wrap_body",
         "port_type", "graph_interface", "set_input_defaults", "stock_evaluate",
         "mark_onnx_semantics"],
        "model",
    ),
    **dict.fromkeys(["Limits", "limits", "onnx_file_access", "run_limited"], "safety"),
}

#: authoring's core: the loops and what builds models; its tensor functions mirror
#: PyTensor's, whose documentation they follow (docs/authoring.md)
AUTHORING_CORE = ["scan", "until", "map", "reduce", "foldl", "foldr", "input", "constant",
                  "shared", "build_model", "build_onnx", "function"]


def _namespace(name: str):
    return importlib.import_module(f"mdf_loops.{name}")


def _public(module) -> list[tuple[str, object]]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # __all__ never names a moved name
        return [(name, getattr(module, name)) for name in module.__all__]


# --- every exported name resolves ------------------------------------------------------


def test_the_top_level_is_small_and_resolves():
    assert len(mdf_loops.__all__) == len(set(mdf_loops.__all__)) <= 30
    resolved = dict(_public(mdf_loops))
    assert resolved["run"] is importlib.import_module("mdf_loops.run").run
    assert resolved["pt"] is importlib.import_module("mdf_loops.authoring.tensor")
    assert resolved["__version__"] == mdf_loops.__version__
    assert callable(resolved["render"]) and callable(resolved["sweep"])  # not the submodules


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_every_namespace_has_a_docstring_and_its_names_resolve(namespace):
    module = _namespace(namespace)
    assert module.__doc__ and len(module.__doc__.split()) > 10, namespace
    assert len(module.__all__) == len(set(module.__all__))
    assert all(value is not None for _, value in _public(module))


def test_the_top_level_names_outside_the_core_live_in_no_namespace_twice():
    """Only the names of ``mdf_loops.__all__`` are both at the top level and in a namespace;
    the moved names are in exactly one namespace."""
    for name, home in MOVED.items():
        assert name not in mdf_loops.__all__
        assert name in _namespace(home).__all__, (name, home)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        mdf_loops.no_such_name  # noqa: B018


# --- import * ------------------------------------------------------------------------


def test_import_star_binds_the_api_and_no_builtin():
    namespace: dict = {}
    exec("from mdf_loops import *", namespace)
    bound = set(namespace) - {"__builtins__"}
    assert bound == set(mdf_loops.__all__)
    assert not bound & set(dir(builtins))


def test_dir_lists_the_api_and_not_the_moved_names():
    listed = set(dir(mdf_loops))
    assert set(mdf_loops.__all__) <= listed
    assert not set(MOVED) & listed


# --- deprecated aliases --------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_name_warns_and_is_the_same_object(name):
    home = MOVED[name]
    with pytest.warns(DeprecationWarning) as caught:
        old = getattr(mdf_loops, name)
    message = str(caught[0].message)
    assert f"mdf_loops.{name} moved to mdf_loops.{home}.{name}" in message
    assert caught[0].filename == __file__  # points at the caller, not at mdf_loops
    assert old is getattr(_namespace(home), name)


def test_a_moved_name_warns_on_every_access_and_through_from_import():
    for _ in range(2):  # not cached in the package's namespace after the first access
        with pytest.warns(DeprecationWarning, match="mdf_loops.wrap_body moved"):
            mdf_loops.wrap_body  # noqa: B018
    with pytest.warns(DeprecationWarning, match="mdf_loops.limits moved to mdf_loops.safety"):
        from mdf_loops import limits
    assert limits is mdf_loops.safety.limits


# --- errors: one hierarchy, one place --------------------------------------------------


def _error_classes_defined_outside_errors_py() -> list[str]:
    """Public classes deriving from an error of mdf_loops.errors, defined in another module."""
    errors = set(mdf_loops.errors.__all__)
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in
                         node.bases}
                if bases & errors:
                    found.append(f"{path.relative_to(ROOT)}:{node.name}")
    return found


def test_every_error_class_is_defined_in_mdf_loops_errors():
    assert _error_classes_defined_outside_errors_py() == []
    for name, value in _public(mdf_loops.errors):
        assert isinstance(value, type) and issubclass(value, mdf_loops.MdfLoopsError), name
        assert value.__module__ == "mdf_loops.errors", name


@pytest.mark.parametrize("module, name", [
    ("mdf_loops.backends.onnxruntime.compiled", "CompileError"),
    ("mdf_loops.safety.checks", "UnsafeExpressionError"),
    ("mdf_loops.safety.sandbox", "ResourceLimitError"),
    ("mdf_loops.sweep", "SweepError"),
    ("mdf_loops.authoring", "AuthoringError"),
    ("mdf_loops.authoring", "ScanError"),
    ("mdf_loops.model.inputs", "InputError"),
    ("mdf_loops.onnx.expressions", "ExpressionError"),
    ("mdf_loops.onnx.export_graph", "UntypedInputError"),
    ("mdf_loops.timeloop.conditions", "ConditionError"),
    ("mdf_loops.backends.python.errors", "NotCompilable"),
])
def test_the_old_homes_of_the_errors_still_import_them(module, name):
    assert getattr(importlib.import_module(module), name) is getattr(mdf_loops.errors, name)


def test_an_error_raised_by_a_moved_home_is_caught_by_its_new_name():
    """A real refusal: an unsafe expression is refused before anything runs."""
    from modeci_mdf.mdf import Graph, Model, Node, OutputPort

    node = Node(id="n", output_ports=[OutputPort(id="y", value="__import__('os')")])
    with pytest.raises(mdf_loops.errors.UnsafeExpressionError) as info:
        mdf_loops.run(Model(id="m", graphs=[Graph(id="g", nodes=[node])]))
    assert "graphs.g.nodes.n" in str(info.value) and info.value.problems


# --- documented and typed ----------------------------------------------------------------


def _functions_and_classes() -> list[tuple[str, object]]:
    public = [(f"mdf_loops.{n}", v) for n, v in _public(mdf_loops)]
    for namespace in NAMESPACES:
        module = _namespace(namespace)
        names = AUTHORING_CORE if namespace == "authoring" else module.__all__
        public += [(f"mdf_loops.{namespace}.{n}", getattr(module, n)) for n in names]
    return [(n, v) for n, v in public if inspect.isfunction(v) or inspect.isclass(v)]


@pytest.mark.parametrize("name, value", [pytest.param(n, v, id=n) for n, v in
                                          _functions_and_classes()])
def test_every_public_function_is_documented_and_annotated(name, value):
    assert value.__doc__ and value.__doc__.strip(), f"{name} has no docstring"
    if inspect.isclass(value):
        return
    signature = inspect.signature(value)
    unannotated = [p for p, v in signature.parameters.items() if v.annotation is inspect._empty]
    assert not unannotated, f"{name}: parameters {unannotated} have no annotation"
    assert signature.return_annotation is not inspect._empty, f"{name}: no return annotation"


def test_backend_parameters_are_typed_as_the_literal_of_backend_names():
    from mdf_loops.backends import BACKENDS, SIMULATE_BACKENDS, Backend, SimulateBackend

    assert typing.get_type_hints(mdf_loops.run)["backend"] == Backend
    assert typing.get_args(typing.get_type_hints(mdf_loops.run)["backend"]) == BACKENDS
    assert typing.get_type_hints(mdf_loops.run_batch)["backend"] == Backend
    assert typing.get_type_hints(mdf_loops.authoring.function)["backend"] == Backend
    assert typing.get_type_hints(mdf_loops.simulate)["backend"] == SimulateBackend
    assert "python" in SIMULATE_BACKENDS and "python" not in BACKENDS
    # sweep's hints name xarray only for type checkers: read its annotation as written
    assert inspect.signature(mdf_loops.sweep).parameters["backend"].annotation == "Backend"


def test_a_type_checker_sees_the_top_level_types(tmp_path):
    """mypy, run on a user's script, finds a wrong backend name."""
    pytest.importorskip("mypy")
    script = tmp_path / "user.py"
    script.write_text("import mdf_loops\n"
                      "mdf_loops.run('model.json', backend='onnxruntime')\n"
                      "mdf_loops.run('model.json', backend='gpu')\n")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--follow-imports=silent",
         "--ignore-missing-imports", str(script)],
        capture_output=True, text=True, cwd=ROOT, timeout=600)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "user.py:3:" in errors[0] and '"backend"' in errors[0], \
        result.stdout


# --- docs name every public name, and nothing uses a moved name ------------------------


def _api_names() -> list[str]:
    names = list(mdf_loops.__all__)
    for namespace in NAMESPACES:
        names += _namespace(namespace).__all__
    return sorted(set(names))


def test_docs_api_names_every_public_name():
    missing = [name for name in _api_names() if f"`{name}" not in API_DOC]
    assert not missing, f"docs/api.md does not name {missing}"
    for namespace in NAMESPACES:
        assert f"`mdf_loops.{namespace}`" in API_DOC
    for name, home in MOVED.items():  # the table of moved names
        assert re.search(rf"\|[^\n]*`{name}`[^\n]*\| `mdf_loops\.{home}` \|", API_DOC), name


def test_docs_examples_and_benchmarks_use_the_new_homes():
    moved = re.compile(rf"\bmdf_loops\.({'|'.join(MOVED)})\b(?!`? moved to)")
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "examples").glob("*.py"),
             *(ROOT / "benchmarks").glob("*.py")]
    uses = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
            for path in files
            for number, line in enumerate(path.read_text().splitlines(), 1)
            if moved.search(line) and "mdf_loops.<name>" not in line]
    assert not uses, "\n".join(uses)


def _attribute_uses_of_moved_names(path: Path) -> list[str]:
    uses = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "mdf_loops" and node.attr in MOVED):
            uses.append(f"{path.relative_to(ROOT)}:{node.lineno}: mdf_loops.{node.attr}")
        elif (isinstance(node, ast.ImportFrom) and node.module == "mdf_loops"
              and any(alias.name in MOVED for alias in node.names)):
            uses.append(f"{path.relative_to(ROOT)}:{node.lineno}: from mdf_loops import ...")
    return uses


def test_no_code_uses_a_moved_name():
    """The package, its examples, benchmarks and tests reach every name at its new home
    (this file excepted: it checks the old names)."""
    files = [*PACKAGE.rglob("*.py"), *(ROOT / "examples").rglob("*.py"),
             *(ROOT / "benchmarks").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    uses = [use for path in files if path != Path(__file__)
            for use in _attribute_uses_of_moved_names(path)]
    assert not uses, "\n".join(uses)


def test_what_type_checkers_see_is_what_runs():
    """The ``TYPE_CHECKING`` imports of ``mdf_loops/__init__.py`` name, for every name of
    ``__all__``, the object the lazy import returns."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and "TYPE_CHECKING" in ast.unparse(node.test))
    seen = {}
    for statement in block.body:
        assert isinstance(statement, ast.ImportFrom) and statement.module
        module = importlib.import_module(statement.module)
        for alias in statement.names:
            value = getattr(module, alias.name, None)
            if value is None:  # a submodule: from package import module
                value = importlib.import_module(f"{statement.module}.{alias.name}")
            seen[alias.asname or alias.name] = value
    assert set(seen) == set(mdf_loops.__all__) - {"MdfLoopsError", "__version__"}
    for name, value in seen.items():
        assert getattr(mdf_loops, name) is value, name
