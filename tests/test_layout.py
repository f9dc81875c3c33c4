"""The package's size rules (docs/architecture.md: a module under 400 lines, a function
under 60), checked on the source so that a change that breaks them fails here."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "mdf_loops"
MODULES = sorted(PACKAGE.rglob("*.py"))


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_the_package_is_found():
    assert len(MODULES) > 50 and (PACKAGE / "__init__.py") in MODULES


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_and_functions_stay_short(path):
    source = path.read_text(encoding="utf-8")
    lines = source.count("\n")
    assert lines <= 400, f"{path.name} has {lines} lines; split it by concern (docs/architecture.md)"
    long = [
        f"{f.name} ({f.end_lineno - f.lineno + 1} lines, line {f.lineno})"
        for f in _functions(ast.parse(source))
        if f.end_lineno - f.lineno + 1 > 60
    ]
    assert not long, f"{path.name}: functions over 60 lines: {long}"
