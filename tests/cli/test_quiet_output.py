"""mdf_loops/cli/output.py: what a person reads on the terminal from ``mdf-loops``.

Every command is run as a real program on shipped examples; without ``-v`` each line
on stderr is one of ours (it starts ``mdf-loops: ``), and ``-v`` shows more. A
library that warns and logs (a module written here, outside the package) is held
back by default and shown with ``-v``; our own warnings are sentences.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from mdf_loops.model.compat import INPUT_DEFAULTS

import mdf_loops.validation.report as report
from mdf_loops.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PREFIX = "mdf-loops: "

#: name -> the command lines run one after the other in a fresh folder
CHAINS: dict[str, list[list[str]]] = {
    "run": [["run", str(EXAMPLES / "elman_rnn.json")]],
    "run -v": [["run", str(EXAMPLES / "elman_rnn.json"), "-v"]],
    "export, import": [
        ["export", str(EXAMPLES / "nested_trials.json"), "-o", "nested.onnx"],
        ["import", "nested.onnx", "-o", "nested.json"],
    ],
    "validate": [["validate", str(EXAMPLES / "hopfield.yaml")]],
    "render": [["render", str(EXAMPLES / "nested_trials.json"), "-o", "nested.svg"]],
    "simulate": [
        ["simulate", str(EXAMPLES / "timeloops" / "fitzhugh_nagumo.json"), "--dt", "0.05", "--steps", "50"],
    ],
}


def run_chain(commands: list[list[str]], folder: Path) -> list[subprocess.CompletedProcess]:
    folder.mkdir()
    return [
        subprocess.run([sys.executable, "-m", "mdf_loops", *args], cwd=folder, capture_output=True, text=True,
                       timeout=300)
        for args in commands
    ]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, list[subprocess.CompletedProcess]]:
    base = tmp_path_factory.mktemp("quiet")
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(run_chain, chain, base / name.replace(" ", "_").replace(",", ""))
                   for name, chain in CHAINS.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("name", [n for n in CHAINS if "-v" not in n])
def test_stderr_holds_only_our_lines(name, results):
    if name == "simulate" and not INPUT_DEFAULTS:
        pytest.skip("time loops need modeci-mdf >= 0.4.14 (InputPort.default_value, reduce)")
    for args, result in zip(CHAINS[name], results[name], strict=True):
        if name == "render" and result.returncode and "Graphviz" in result.stderr:
            pytest.skip("Graphviz's dot program is not installed")
        assert result.returncode == 0, (args, result.stderr)
        lines = result.stderr.splitlines()
        assert [line for line in lines if not line.startswith(PREFIX)] == [], args
        assert result.stdout or lines, args  # each command says something


def test_notes_are_ours_and_name_what_was_written(results):
    export, imported = results["export, import"]
    assert export.stderr == f"{PREFIX}wrote nested.onnx\n"
    assert imported.stderr == f"{PREFIX}wrote nested.json\n"
    if not INPUT_DEFAULTS:
        return  # time loops need modeci-mdf >= 0.4.14 (InputPort.default_value, reduce)
    assert results["simulate"][0].stderr == f"{PREFIX}50 steps to t=2.45 on python\n"


def test_verbose_shows_more(results):
    (quiet,), (verbose,) = results["run"], results["run -v"]
    assert quiet.stdout == verbose.stdout  # the same results
    assert quiet.stderr == ""
    assert f"{PREFIX}info: mdf_loops.cli.run: ran " in verbose.stderr


# ---------------------------------------------------------------- a library's lines


NOISY_LIBRARY = '''
import logging
import warnings


def noisy():
    warnings.warn("noisylib: this call is deprecated", FutureWarning)
    logging.getLogger("noisylib").warning("noisylib: a log line")
'''


@pytest.fixture
def noisy_validate(tmp_path, monkeypatch):
    """``validate`` calling a library (a module outside the package) that warns and logs,
    then a warning of ours."""
    (tmp_path / "noisylib.py").write_text(NOISY_LIBRARY)
    monkeypatch.syspath_prepend(str(tmp_path))
    import noisylib

    real = report.validate

    def validate(*args, **kwargs):
        noisylib.noisy()
        logging.getLogger("mdf_loops.validation").warning("The model uses an old format; it was read anyway.")
        return real(*args, **kwargs)

    monkeypatch.setattr(report, "validate", validate)
    yield
    sys.modules.pop("noisylib", None)


def test_a_librarys_warnings_and_logs_are_held_back(noisy_validate, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(["validate", str(EXAMPLES / "hopfield.json")]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"{EXAMPLES / 'hopfield.json'}: valid\n"
    assert captured.err == f"{PREFIX}warning: The model uses an old format; it was read anyway.\n"


def test_verbose_shows_a_librarys_lines(noisy_validate, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(["validate", str(EXAMPLES / "hopfield.json"), "-v"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert any("FutureWarning: noisylib: this call is deprecated" in line for line in lines)
    assert "[noisylib] WARNING: noisylib: a log line" in lines
    assert f"{PREFIX}warning: mdf_loops.validation: The model uses an old format; it was read anyway." in lines


def test_quiet_holds_back_our_warnings_too(noisy_validate, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert main(["validate", str(EXAMPLES / "hopfield.json"), "-q"]) == 0
    assert capsys.readouterr().err == ""


def test_the_callers_logging_and_warnings_are_restored(noisy_validate, capsys):
    root = logging.getLogger()
    before = (root.handlers[:], root.level, warnings.showwarning)
    main(["validate", str(EXAMPLES / "hopfield.json")])
    assert (root.handlers, root.level, warnings.showwarning) == before


def test_a_warning_raised_in_the_package_is_a_sentence_of_ours(monkeypatch, capsys):
    """A Python warning whose origin is a file of mdf_loops is shown as our line, without -v."""
    import mdf_loops.cli.validate as validate_command

    real = validate_command._problems

    def problems(path: str) -> list[str]:
        warnings.warn_explicit("The model was written by an older mdf-loops; it was read anyway.",
                               UserWarning, validate_command.__file__, 1)
        return real(path)

    monkeypatch.setattr(validate_command, "_problems", problems)
    assert main(["validate", str(EXAMPLES / "hopfield.json")]) == 0
    assert capsys.readouterr().err == (
        f"{PREFIX}warning: The model was written by an older mdf-loops; it was read anyway.\n")
