"""Files from outside that are not model files: a sweep's resume file through the one
reader (mdf_loops/files.py), and ``validate`` on paths that are no readable file
(mdf_loops/cli/validate.py): one line, a non-zero exit, never a traceback or a hang."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import mdf_loops
from mdf_loops.errors import ModelError, SizeLimitError

_EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-m", "mdf_loops", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=cwd)


def test_a_resume_file_larger_than_the_reader_allows_is_refused_before_it_is_read(tmp_path):
    h5netcdf = pytest.importorskip("h5netcdf")
    pytest.importorskip("xarray")
    from mdf_loops.sweep.results import load_dataset

    path = tmp_path / "results.nc"
    with h5netcdf.File(path, "w") as f:  # two settings, and 200 kB of attribute text
        f.dimensions = {"setting": 2}
        f.create_variable("completed", ("setting",), "i1")
        f.create_variable("error", ("setting",), "i1")
        f.attrs["padding"] = "x" * 200_000
    assert load_dataset(path, 2)["completed"].size == 2  # within the limits: read
    with mdf_loops.safety.limits(max_elements=1000):  # 8,000 bytes
        with pytest.raises(SizeLimitError, match=r"results.nc: reading it means \d+ bytes, "
                                                 r"over the limit of 8000 bytes"):
            load_dataset(path, 2)


@pytest.fixture
def unreadable(tmp_path):
    """Model paths no reader may read: a FIFO, a link to /dev/zero, a folder, nothing."""
    os.mkfifo(tmp_path / "pipe.json")
    (tmp_path / "zero.yaml").symlink_to("/dev/zero")
    (tmp_path / "folder.json").mkdir()
    return {
        "pipe.json": "is a FIFO (named pipe), not a regular file",
        "zero.yaml": "is a character device, not a regular file",
        "folder.json": "is a directory, not a regular file",
        "missing.onnx": "no such file",
    }


@pytest.mark.parametrize("limited", [[], ["--timeout", "60", "--max-memory", "2G"]])
def test_validate_on_an_unreadable_path_is_one_line_and_a_non_zero_exit(tmp_path, unreadable,
                                                                        limited):
    for name, reason in unreadable.items():
        done = _cli("validate", *limited, name, cwd=tmp_path)
        assert done.returncode == 1, (name, done.stderr)
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"mdf-loops: error: {name}: {reason}")
        assert done.stdout == "" and "Traceback" not in done.stderr


def test_validate_through_the_api_raises_model_error_for_an_unreadable_path(tmp_path,
                                                                            unreadable):
    # docs/api.md: "An unreadable file raises ModelError" (the FIFO is in test_files.py,
    # in a child: a reader that blocked would hang this process)
    for name, reason in unreadable.items():
        if name == "pipe.json":
            continue
        with pytest.raises(ModelError, match=reason):
            mdf_loops.validate(tmp_path / name)


def test_validate_reports_a_malformed_document_and_never_raises():
    import json
    import random

    document = json.loads((_EXAMPLES / "nested_trials.json").read_text())
    weird = [None, 1, -1.5, "x", "", [], {}, [1], {"a": 1}, True, 10**400, float("nan"),
             "__import__('os')", [[[]]], {"graph_x": 5}]
    places = []

    def walk(node, path):
        places.append(path)
        items = node.items() if isinstance(node, dict) else enumerate(node) \
            if isinstance(node, list) else []
        for key, value in items:
            walk(value, (*path, key))

    walk(document, ())
    rng = random.Random(25)
    for _ in range(150):  # each a copy with one field replaced by a value of another kind
        changed = json.loads(json.dumps(document))
        path = rng.choice(places[1:])
        parent = changed
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = rng.choice(weird)
        problems = mdf_loops.validate(changed)  # a list, whatever the document holds
        assert isinstance(problems, list)
