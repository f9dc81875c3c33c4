"""mdf_loops/files.py: the one reader of files from outside (regular files only, sizes
declared or on disk checked before reading) and its users."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_input_port_fields

import mdf_loops
from mdf_loops.errors import InputError, ModelError, SizeLimitError
from mdf_loops.files import read_file, read_npy, read_npz

MODEL = Path(__file__).parent.parent / "examples" / "leaky_integrator.json"


def _cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-m", "mdf_loops", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.fixture
def specials(tmp_path):
    """Model paths that are a FIFO and links to /dev/zero."""
    paths = []
    for name in ("pipe.json", "pipe.onnx"):
        os.mkfifo(tmp_path / name)
        paths.append(tmp_path / name)
    for name in ("zero.yaml", "zero.onnx"):
        (tmp_path / name).symlink_to("/dev/zero")
        paths.append(tmp_path / name)
    return paths


def test_a_fifo_or_a_device_is_refused_before_reading(specials):
    # in a child with a timeout: reading a FIFO would block for ever
    code = ("import sys, mdf_loops\n"
            "for path in sys.argv[1:]:\n"
            "    for call in (mdf_loops.run, mdf_loops.validate, mdf_loops.load_model):\n"
            "        try:\n"
            "            call(path)\n"
            "        except mdf_loops.ModelError as exc:\n"
            "            print(type(exc).__name__, exc)\n")
    done = subprocess.run([sys.executable, "-c", code, *map(str, specials)], timeout=120,
                          capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == 3 * len(specials), done.stderr
    assert all("not a regular file" in line for line in lines), lines
    done = _cli("run", str(specials[0]))
    assert done.returncode == 1 and "FIFO (named pipe), not a regular file" in done.stderr


def test_read_file_reads_a_slice_and_refuses_more_than_the_limit(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(100)))
    assert read_file(path, start=10, length=5) == bytes(range(10, 15))
    assert read_file(path) == bytes(range(100))
    with mdf_loops.safety.limits(max_elements=10):  # 80 bytes
        with pytest.raises(SizeLimitError, match="100 bytes, over the limit of 80"):
            read_file(path)
    with pytest.raises(InputError, match="no such file"):
        read_file(tmp_path / "missing", InputError)
    with pytest.raises(ModelError, match="is a directory"):
        read_file(tmp_path)


def _npy_header_only(path: Path, shape: tuple) -> Path:
    """A .npy file whose header declares ``shape`` float64 values, and no data."""
    with open(path, "wb") as handle:
        np.lib.format.write_array_header_1_0(
            handle, {"descr": "<f8", "fortran_order": False, "shape": shape})
    return path


def test_an_array_file_declaring_10_to_the_11_elements_reads_nothing(tmp_path):
    npy = _npy_header_only(tmp_path / "x.npy", (10**11,))
    with pytest.raises(SizeLimitError, match="declares 100000000000 elements"):
        read_npy(npy)
    archive = tmp_path / "x.npz"
    import zipfile

    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(npy, "x.npy")
    with pytest.raises(SizeLimitError, match="x.npz: x.npy: declares 100000000000"):
        read_npz(archive)
    done = _cli("run", str(MODEL), "-i", f"I={npy}")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "declares 100000000000 elements" in done.stderr


def test_array_files_give_their_arrays_and_refuse_object_arrays(tmp_path):
    values = np.arange(6.0).reshape(2, 3)
    np.save(tmp_path / "a.npy", values)
    np.savez(tmp_path / "b.npz", a=values, b=values[0])
    np.testing.assert_array_equal(read_npy(tmp_path / "a.npy"), values)
    arrays = read_npz(tmp_path / "b.npz")
    np.testing.assert_array_equal(arrays["b"], values[0])
    np.save(tmp_path / "o.npy", np.array([{}, 1], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="not a plain number type"):
        read_npy(tmp_path / "o.npy", InputError)


def _yaml_model(tmp_path: Path, value: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text("m:\n  graphs:\n    g:\n      nodes:\n        n:\n          parameters:\n"
                    f"            p:\n              value: {value}\n")
    return path


@pytest.mark.parametrize("value, reason", [
    ("2001-12-14", None),  # a timestamp is text, as JSON would have it
    ("0x" + "f" * 5000, "integer of 20000 bits is too long"),
    ("{? [1, 2] : 3}", "a list as a key"),
    ("!!binary aGVsbG8=", "a bytes value is not MDF data"),
    ("!!set {a, b}", "a set value is not MDF data"),
])
def test_yaml_values_json_cannot_hold_give_one_model_error(tmp_path, value, reason):
    path = _yaml_model(tmp_path, value)
    if reason is None:
        model = mdf_loops.load_model(str(path))
        assert model.graphs[0].nodes[0].parameters[0].value == "2001-12-14"
        assert mdf_loops.validate(str(path)) is not None
        return
    for call in (mdf_loops.load_model, mdf_loops.validate, mdf_loops.run):
        with pytest.raises(ModelError, match=reason) as error:
            call(str(path))
        assert "\n" not in str(error.value)


@pytest.mark.parametrize("value, reason", [
    ("[" * 40_000 + "]" * 40_000, "nested too deeply"),
    ("9" * 5000, "integer string conversion"),
])
def test_a_json_input_value_that_python_cannot_read_is_an_input_error(value, reason):
    from mdf_loops.cli.io import read_inputs

    graph = mdf_loops.load_model(str(MODEL)).graphs[0]
    with pytest.raises(InputError, match=reason) as error:
        read_inputs([f"x0={value}"], graph)
    assert "\n" not in str(error.value) and len(str(error.value)) < 300


@needs_input_port_fields  # before 0.4.14 an input's default_value is kept in its metadata
def test_a_model_file_is_read_once_and_gives_stock_modeci_mdf_s_model():
    from modeci_mdf.utils import load_mdf

    assert json.loads(mdf_loops.load_model(str(MODEL)).to_json()) == json.loads(
        load_mdf(str(MODEL)).to_json())
