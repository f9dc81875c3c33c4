"""Every code block of the README and docs/ runs as pasted, in order.

* ```python blocks run in one namespace per document, from the repository root.
* ```bash blocks run with bash (``-e -o pipefail``) and ```console blocks run each
  ``$ `` command and compare what it prints with the lines that follow it, in a
  folder of the document's own that holds a copy of what a clone has (examples/,
  benchmarks/, schemas/, docs/), with this interpreter's environment on PATH, as a
  user who entered it (``source .venv/bin/activate``) would have. Blocks of one
  document share that folder, so a block may use a file an earlier one wrote.
* A block that installs (a virtual environment, a built wheel) is marked
  ``<!-- docs-test: run by .ci/run -->`` on the line before it; such a block must
  appear verbatim in ``.ci/run``, which runs it on a bare machine.
* A block that takes minutes (a full benchmark) is marked ``<!-- docs-test: slow -->``;
  it runs when ``MDF_LOOPS_DOCS_SLOW=1`` (``.ci/run`` sets it for one of its runs).
"""

from __future__ import annotations

import linecache
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from mdf_loops.model.compat import INPUT_DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
BLOCK = re.compile(r"^(?:<!-- docs-test: (?P<mark>[^>]*?) -->\n)?```(?P<lang>\w+)\n(?P<body>.*?)^```",
                   re.S | re.M)
RUN_BY_CI = "run by .ci/run"
SLOW = "slow"
MARKS = {RUN_BY_CI, SLOW}
# what a clone has that the documents' commands use
CLONE_FOLDERS = ("examples", "benchmarks", "schemas", "docs")
COMMAND_TIMEOUT_S = 600
NO_DOT = shutil.which("dot") is None and os.environ.get("MDF_LOOPS_REQUIRE_DOT") != "1"


@dataclass(frozen=True)
class Block:
    document: str
    number: int
    lang: str
    body: str
    mark: str | None

    @property
    def name(self) -> str:
        return f"{self.document}, {self.lang} block {self.number}"


def _blocks(path: Path) -> list[Block]:
    return [Block(path.name, number, m["lang"], m["body"], m["mark"])
            for number, m in enumerate(BLOCK.finditer(path.read_text()), 1)]


def _python_blocks(path: Path) -> list[Block]:
    return [b for b in _blocks(path) if b.lang == "python"]


def _shell_blocks(path: Path) -> list[Block]:
    return [b for b in _blocks(path) if b.lang in ("bash", "console")]


@pytest.mark.parametrize("path", DOCUMENTS, ids=[p.name for p in DOCUMENTS])
def test_python_blocks_run(path, tmp_path, monkeypatch):
    blocks = _python_blocks(path)
    if path.name in ("jax.md",):
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
    for block in blocks:
        # the source, where tracebacks and inspect.getsource look (torch.jit.script does)
        linecache.cache[block.name] = (len(block.body), None, block.body.splitlines(True),
                                       block.name)
        try:
            exec(compile(block.body, block.name, "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{block.name} failed: {type(exc).__name__}: {exc}") from exc


def _clone_copy(folder: Path) -> None:
    for name in CLONE_FOLDERS:
        shutil.copytree(ROOT / name, folder / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _environment(folder: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["VIRTUAL_ENV"] = sys.prefix
    env["HOME"] = str(folder / "home")  # nothing lands in the user's home
    env["MPLBACKEND"] = "Agg"
    return env


def _run(command: str, folder: Path, block: Block) -> subprocess.CompletedProcess:
    if NO_DOT and "mdf-loops render" in command:
        pytest.skip("Graphviz's dot is not installed (CI sets MDF_LOOPS_REQUIRE_DOT=1)")
    try:
        return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=folder,
                              env=_environment(folder), capture_output=True, text=True,
                              timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"{block.name}: `{command}` ran past {COMMAND_TIMEOUT_S} s") from exc


def _console_sessions(body: str) -> list[tuple[str, list[str]]]:
    """``$ command`` lines with the lines they print (a trailing ``\\`` continues a command)."""
    sessions: list[tuple[str, list[str]]] = []
    lines = body.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if not line.startswith("$ "):
            if not sessions:
                raise AssertionError(f"console block starts with {line!r}, not a '$ ' command")
            sessions[-1][1].append(line)
            index += 1
            continue
        command = line[2:]
        while command.endswith("\\") and index + 1 < len(lines):
            index += 1
            command = command[:-1] + "\n" + lines[index]
        sessions.append((command, []))
        index += 1
    return sessions


def _printed(result: subprocess.CompletedProcess) -> list[str]:
    return [line.rstrip() for line in (result.stdout + result.stderr).splitlines()]


def _check_console(block: Block, folder: Path) -> None:
    for command, expected in _console_sessions(block.body):
        result = _run(command, folder, block)
        printed = _printed(result)
        wanted = [line.rstrip() for line in expected]
        assert printed == wanted, (f"{block.name}: `{command}` printed\n" + "\n".join(printed)
                                   + "\n\nthe document says\n" + "\n".join(wanted))
        # the command line's errors are 'mdf-loops: error: ...' or validate's count of
        # problems ('mdf-loops: FILE: 2 problems'); any other run must succeed
        fails = any(re.match(r"mdf-loops: (error: |.*: \d+ problems?$)", line) for line in wanted)
        assert (result.returncode != 0) == fails, (
            f"{block.name}: `{command}` exited {result.returncode}")


def _check_bash(block: Block, folder: Path) -> None:
    result = _run(block.body, folder, block)
    assert result.returncode == 0, (f"{block.name} exited {result.returncode}:\n"
                                    + (result.stdout + result.stderr)[-3000:])


@pytest.mark.parametrize("path", DOCUMENTS, ids=[p.name for p in DOCUMENTS])
def test_shell_blocks_run(path, tmp_path):
    blocks = [b for b in _shell_blocks(path) if b.mark != RUN_BY_CI]
    if path.name == "timeloops.md" and not INPUT_DEFAULTS:
        pytest.skip("time loops need modeci-mdf >= 0.4.14 (InputPort.default_value, reduce)")
    if not blocks:
        pytest.skip(f"{path.name} has no shell block that this test runs")
    slow = os.environ.get("MDF_LOOPS_DOCS_SLOW") == "1"
    _clone_copy(tmp_path)
    (tmp_path / "home").mkdir()
    for block in blocks:
        if block.mark == SLOW and not slow:
            continue
        (_check_console if block.lang == "console" else _check_bash)(block, tmp_path)


def test_blocks_marked_as_installs_are_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    marked = [b for p in DOCUMENTS for b in _blocks(p) if b.mark == RUN_BY_CI]
    assert marked, "the README's install commands are marked as run by .ci/run"
    for block in marked:
        for line in block.body.strip().splitlines():
            assert line.strip() in ci, f"{block.name}: `{line.strip()}` is not in .ci/run"


def test_marks_are_known():
    for path in DOCUMENTS:
        for block in _blocks(path):
            assert block.mark is None or block.mark in MARKS, f"{block.name}: mark {block.mark!r}"


def test_console_sessions_parse():
    sessions = _console_sessions("$ a \\\n  b\nout 1\nout 2\n$ c\n")
    assert sessions == [("a \n  b", ["out 1", "out 2"]), ("c", [])]
    with pytest.raises(AssertionError, match="not a '\\$ ' command"):
        _console_sessions("text\n$ a\n")


def test_the_documents_have_runnable_code():
    assert sum(len(_python_blocks(p)) for p in DOCUMENTS) >= 10
    assert sum(len(_shell_blocks(p)) for p in DOCUMENTS) >= 10
