"""The floors of docs/architecture.md, checked on the source: a folder imports nothing of
a higher floor (nor of its own floor's other rooms), at module level or inside a
function, except the climbing imports that page lists with their reasons."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "mdf_loops"

#: (importing module, imported room): the climbing imports docs/architecture.md gives a
#: reason for, under "A few imports still climb"
CLIMBING = {
    ("mdf_loops/model/interface.py", "safety"),
    ("mdf_loops/model/interface.py", "onnx"),
    ("mdf_loops/onnx/import_.py", "safety"),
    ("mdf_loops/safety/sandbox.py", "run.py"),
    ("mdf_loops/safety/evaluation.py", "backends"),
    ("mdf_loops/backends/jax/batch.py", "run.py"),
    ("mdf_loops/sweep/worker.py", "__init__.py"),
}


def _floors() -> dict[str, int]:
    """Room -> floor, as the page lists them from the ground up."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = text.split("from the ground up:", 1)[1].split(". A lower floor", 1)[0]
    floors = {}
    for number, group in enumerate(listed.split(";")):
        for name in re.findall(r"`([^`]+)`", group):
            floors[name.rstrip("/")] = number
        if "the package's `__init__`" in group:
            floors["__init__.py"] = number
    return floors


def _room(parts: tuple[str, ...]) -> str:
    """The room of module ``mdf_loops.<parts>``: its folder, or its file at the top."""
    if not parts:
        return "__init__.py"
    if (PACKAGE / parts[0]).is_dir():
        return parts[0]
    return parts[0] + ".py"


def _here(path: Path) -> str:
    """The room of the file at ``path``."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return "__init__.py" if parts == ("__init__",) else _room(parts)


def _imports(path: Path):
    rel = path.relative_to(ROOT).with_suffix("").parts  # ("mdf_loops", ..., "name")
    package = rel[:-1] if rel[-1] != "__init__" else rel[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = (*base, *(node.module or "").split(".")) if node.module else base
            if module == ("mdf_loops",):  # from mdf_loops import x: the room of x
                for alias in node.names:
                    yield ("mdf_loops", alias.name)
            else:
                yield tuple(m for m in module if m)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield tuple(alias.name.split("."))


def test_the_floors_are_listed_and_cover_every_room():
    floors = _floors()
    rooms = {_here(p) for p in PACKAGE.rglob("*.py")}
    assert rooms - {"__main__.py"} <= set(floors), sorted(rooms - set(floors))


def test_no_import_climbs_but_the_documented_ones():
    floors = _floors()
    climbing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = _here(path)
        if here not in floors:
            continue
        name = str(path.relative_to(ROOT))
        for module in _imports(path):
            if module[:1] != ("mdf_loops",):
                continue
            there = _room(module[1:])
            if there == here or there not in floors:
                continue
            if floors[there] >= floors[here] and (name, there) not in CLIMBING:
                climbing.append(f"{name} imports {'.'.join(module)} ({there}, floor "
                                f"{floors[there]}; {here} is on floor {floors[here]})")
    assert not climbing, "imports that climb (docs/architecture.md, Floors):\n" + "\n".join(climbing)


def test_every_documented_climb_is_still_there():
    found = set()
    for name, room in CLIMBING:
        modules = list(_imports(ROOT / name))
        found |= {(name, room) for m in modules if m[:1] == ("mdf_loops",) and _room(m[1:]) == room}
    assert found == CLIMBING, sorted(CLIMBING - found)
