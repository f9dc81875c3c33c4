"""``mdf-loops import MODEL.pt`` (mdf_loops/cli/torch_import.py): a TorchScript file comes in
with its loop as a loop node and answers as torch does at another length; missing,
unknown or extra examples and a pickled module are one-line errors."""

from __future__ import annotations

import numpy as np
import pytest

import mdf_loops
from mdf_loops.cli import commands as cli

torch = pytest.importorskip("torch")


class Accumulator(torch.nn.Module):
    """s_t = 0.9 s_{t-1} + x_t * w; returns every s_t."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))

    def forward(self, x, s0):
        s, decay = s0, 0.9
        out = []
        for t in range(x.shape[0]):
            s = decay * s + x[t] * self.w
            out.append(s)
        return torch.stack(out)


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "accumulator.pt"
    torch.jit.save(torch.jit.script(Accumulator()), str(path))
    np.save(tmp_path / "x.npy", np.ones((4, 2), np.float32))
    return path


def test_a_torchscript_file_comes_in_and_answers_at_another_length(saved, tmp_path, capsys):
    out = tmp_path / "accumulator.json"
    status = cli.main(["import", str(saved), "-i", f"x={tmp_path / 'x.npy'}",
                       "-i", "s0=[0.5, 0.5]", "-o", str(out)])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert captured.out == "" and captured.err == f"mdf-loops: wrote {out}\n"  # nothing of torch's
    x = np.linspace(0, 1, 14, dtype=np.float32).reshape(7, 2)
    s0 = np.zeros(2, np.float32)
    got = mdf_loops.run(str(out), {"x": x, "s0": s0})["output_0"]
    expected = Accumulator()(torch.from_numpy(x), torch.from_numpy(s0)).detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize(
    "options, says",
    [
        (["-i", "s0=[0.0, 0.0]"], "missing 'x'"),
        ([], "missing 'x', 's0'"),
        (["-i", "x=[[1.0, 2.0]]", "-i", "s=[0.0, 0.0]"], "unknown input 's'; forward takes"),
    ],
)
def test_examples_that_do_not_fit_forward_are_one_line(saved, tmp_path, capsys, options, says):
    status = cli.main(["import", str(saved), *options, "-o", str(tmp_path / "m.json")])
    err = capsys.readouterr().err
    assert status == 1 and says in err and err.count("\n") == 1, err
    assert not (tmp_path / "m.json").exists()


def test_a_pickled_module_is_not_read(tmp_path, capsys):
    path = tmp_path / "pickled.pt"
    torch.save(Accumulator(), str(path))
    status = cli.main(["import", str(path), "-i", "x=[[1.0, 2.0]]", "-i", "s0=[0.0, 0.0]",
                       "-o", str(tmp_path / "m.json")])
    err = capsys.readouterr().err
    assert status == 1 and "not a TorchScript file" in err and "torch.jit.save" in err


def test_examples_for_an_onnx_file_are_refused(tmp_path, capsys):
    status = cli.main(["import", str(tmp_path / "m.onnx"), "-i", "x=1",
                       "-o", str(tmp_path / "m.json")])
    assert status == 1 and "an .onnx needs none" in capsys.readouterr().err
