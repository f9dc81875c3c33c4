"""``mdf-loops import MODEL.pt``: a module saved by ``torch.jit.save`` to MDF.

The module is read with ``torch.jit.load`` (a TorchScript archive, never a pickle),
given the ``--input`` values as the example arguments of its ``forward``, in the
order of its parameters, and converted by :func:`mdf_loops.from_pytorch`. JSON values
become tensors as ``torch.tensor`` makes them (numbers with a point float32,
whole numbers int64).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mdf_loops.errors import ModelError

if TYPE_CHECKING:
    from modeci_mdf.mdf import Model

__all__ = ["TORCHSCRIPT_FILES", "import_torchscript"]

#: the extensions ``mdf-loops import`` reads as TorchScript archives
TORCHSCRIPT_FILES = (".pt", ".pth")


def import_torchscript(path: str, options: list[str]) -> Model:
    """The MDF model of the TorchScript module saved at ``path``, examples from ``options``."""
    from mdf_loops.cli.io import read_example_values
    from mdf_loops.onnx.from_pytorch import forward_parameters, from_pytorch, import_torch

    torch = import_torch()
    module = _load(torch, path)
    names = forward_parameters(module)
    args = tuple(_tensor(torch, v) for v in read_example_values(options, names))
    return from_pytorch(module, args, input_names=names)


def _load(torch, path: str) -> Any:
    try:
        return torch.jit.load(path, map_location="cpu")
    except FileNotFoundError:
        raise ModelError(f"{path}: no such file") from None
    except (RuntimeError, ValueError) as exc:  # torch's reader reports a bad archive so
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(
            f"{path}: not a TorchScript file ({first[:200]}); save the module with "
            "torch.jit.save(torch.jit.script(module), path) (a torch.save pickle is not "
            "read: unpickling runs code)"
        ) from None


def _tensor(torch, value: Any) -> Any:
    return torch.from_numpy(value) if hasattr(value, "dtype") else torch.tensor(value)
