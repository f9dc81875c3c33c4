"""Every ```python block of the README and docs/ runs (blocks of one file share a namespace)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mdf_loops.model.compat import INPUT_DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks(path: Path) -> list[str]:
    return BLOCK.findall(path.read_text())


@pytest.mark.parametrize("path", DOCUMENTS, ids=[p.name for p in DOCUMENTS])
def test_python_blocks_run(path, tmp_path, monkeypatch):
    blocks = _blocks(path)
    if path.name == "jax.md":
        pytest.importorskip("jax")  # the optional extra mdf-loops[jax]
    if path.name == "pytorch.md":
        pytest.importorskip("torch")  # the optional extra mdf-loops[torch]
    if path.name == "timeloops.md" and not INPUT_DEFAULTS:
        pytest.skip("time loops need modeci-mdf >= 0.4.14 (InputPort.default_value, reduce)")
    if not blocks:
        pytest.skip(f"{path.name} has no python block")
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("MDF_LOOPS_DOCS_TMP", str(tmp_path))
    namespace: dict = {"__name__": f"docs_{path.stem}"}
    for number, source in enumerate(blocks, 1):
        try:
            exec(compile(source, f"{path.name} block {number}", "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{path.name}, python block {number} failed: "
                                 f"{type(exc).__name__}: {exc}") from exc


def test_the_documents_have_runnable_code():
    assert sum(len(_blocks(p)) for p in DOCUMENTS) >= 10
