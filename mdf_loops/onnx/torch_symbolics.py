"""ONNX forms that torch's TorchScript exporter lacks for ``torch.nn.RNNCell`` and
``GRUCell`` and ``x.norm()``, or writes wrong for ``unbind``, lent to it for the length
of one export.

A scripted ``RNNCell`` or ``GRUCell`` calls ``aten::rnn_tanh_cell``,
``aten::rnn_relu_cell`` or ``aten::gru_cell``, which the exporter has no ONNX form
for (``LSTMCell``'s ``lstm_cell`` it has), and its ``forward`` first asks
``input.dim() not in (1, 2)``, whose constant list the exporter folds into a tensor
that its own ``aten::__contains_`` form then refuses; a loop over ``x.unbind(0)``
gets slices that kept the axis (:func:`_unbind`). :func:`cell_forms` registers
the forms below with ``torch.onnx.register_custom_op_symbolic`` and unregisters
them after the block, so torch's exporter is as it was for everyone else; a form
the user registered for one of these operators is left in place and used. The cells
become the operators torch computes (PyTorch's gate order)::

    RNNCell: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)        (relu likewise)
    GRUCell: r, z, n_x = split(x W_ih^T + b_ih);  r_h, z_h, n_h = split(h W_hh^T + b_hh)
             r = sigmoid(r + r_h);  z = sigmoid(z + z_h);  n = tanh(n_x + r * n_h)
             h' = n + z * (h - n)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["cell_forms"]

#: the opset of the forms torch has none of: its lowest, so every export uses them
_OPSET = 9


def _is_none(value: Any) -> bool:
    return value.node().mustBeNone()


def _linear(g: Any, x: Any, weight: Any, bias: Any) -> Any:
    y = g.op("MatMul", x, g.op("Transpose", weight, perm_i=[1, 0]))
    return y if _is_none(bias) else g.op("Add", y, bias)


def _rnn_cell(activation: str):
    def form(g, x, h, w_ih, w_hh, b_ih, b_hh):
        return g.op(activation, g.op("Add", _linear(g, x, w_ih, b_ih), _linear(g, h, w_hh, b_hh)))

    return form


def _thirds(g: Any, value: Any) -> list:
    if g.opset >= 18:
        return list(g.op("Split", value, axis_i=-1, num_outputs_i=3, outputs=3))
    return list(g.op("Split", value, axis_i=-1, outputs=3))


def _gru_cell(g, x, h, w_ih, w_hh, b_ih, b_hh):
    r_x, z_x, n_x = _thirds(g, _linear(g, x, w_ih, b_ih))
    r_h, z_h, n_h = _thirds(g, _linear(g, h, w_hh, b_hh))
    r = g.op("Sigmoid", g.op("Add", r_x, r_h))
    z = g.op("Sigmoid", g.op("Add", z_x, z_h))
    n = g.op("Tanh", g.op("Add", n_x, g.op("Mul", r, n_h)))
    return g.op("Add", n, g.op("Mul", z, g.op("Sub", h, n)))


def _contains(g, container, element):
    """``element in container``: torch's form, or for a list the exporter folded into a
    constant tensor and a constant element, the constant answer."""
    import torch
    from torch.onnx._internal.torchscript_exporter import symbolic_helper, symbolic_opset9

    folded = container.node().kind() == "onnx::Constant"
    if folded and symbolic_helper._is_constant(element):
        values = symbolic_helper._node_get(container.node(), "value").reshape(-1).tolist()
        found = symbolic_helper._node_get(element.node(), "value")
        found = found.item() if hasattr(found, "item") else found
        return g.op("Constant", value_t=torch.tensor(found in values))
    return symbolic_opset9.__contains_(g, container, element)


def _unbind(g, value, dim, _outputs=None):
    """``x.unbind(dim)`` as a sequence of the slices without ``dim``: torch's own form
    passes ``split=1``, and ONNX ignores ``keepdims=0`` when ``split`` is given, so each
    slice kept the axis (onnxruntime gives ``(1, n)`` rows of an ``(m, n)`` tensor).
    Unpacked into a known number of values (``a, b = x.unbind()``), torch's form is right."""
    from torch.onnx._internal.torchscript_exporter import symbolic_helper, symbolic_opset13

    if _outputs is not None:
        return symbolic_opset13.unbind(g, value, dim, _outputs)
    axis = symbolic_helper._get_const(dim, "i", "dim")
    return g.op("SplitToSequence", value, axis_i=axis, keepdims_i=0)


def _norm(g, value, p, dim=None, keepdim=None, dtype=None):
    """``x.norm()`` and ``x.norm(p)``, which torch's form (it wants ``dim`` and
    ``keepdim``) refuses: the 1- or 2-norm of every element; with ``dim``, torch's form."""
    from torch.onnx._internal.torchscript_exporter import symbolic_helper, symbolic_opset9

    if dim is not None:
        return symbolic_opset9.norm(g, value, p, dim, keepdim, dtype)
    order = symbolic_helper._maybe_get_const(p, "f")
    reduce = {1.0: "ReduceL1", 2.0: "ReduceL2"}.get(
        float(order) if isinstance(order, (int, float)) else -1.0
    )
    if reduce is None:
        from torch.onnx import errors

        raise errors.SymbolicValueError("ONNX export only p-norms with p of 1 or 2", value)
    return g.op(reduce, value, keepdims_i=0)


_FORMS = {
    "aten::norm": _norm,
    "aten::unbind": _unbind,
    "aten::rnn_tanh_cell": _rnn_cell("Tanh"),
    "aten::rnn_relu_cell": _rnn_cell("Relu"),
    "aten::gru_cell": _gru_cell,
    "aten::__contains_": _contains,
}


def _opset_of(name: str) -> int:
    """The opset to register our form of ``name`` at: that of the newest form torch has
    (the exporter takes the newest form not newer than the export's opset), else 9."""
    import importlib

    from torch.onnx._internal.torchscript_exporter import registration

    for version in range(_OPSET, 24):  # the exporter's forms register when their module loads
        try:
            importlib.import_module(
                f"torch.onnx._internal.torchscript_exporter.symbolic_opset{version}"
            )
        except ImportError:
            continue
    group = registration.registry.get_function_group(name)
    return max([_OPSET, *(group._functions._base if group is not None else ())])


def _users_own(name: str, opset: int) -> bool:
    """Whether the user registered a form of ``name`` at ``opset`` (or we cannot tell)."""
    try:
        from torch.onnx._internal.torchscript_exporter import registration

        group = registration.registry.get_function_group(name)
        return group is not None and group._functions.overridden(opset)
    except (ImportError, AttributeError):  # another torch: leave its exporter alone
        return True


@contextmanager
def cell_forms() -> Iterator[None]:
    """The forms above registered with torch's TorchScript exporter inside the block."""
    import torch

    try:
        opsets = {name: _opset_of(name) for name in _FORMS}
    except (ImportError, AttributeError):  # another torch: leave its exporter alone
        return (yield)
    lent = [(name, opset) for name, opset in opsets.items() if not _users_own(name, opset)]
    for name, opset in lent:
        torch.onnx.register_custom_op_symbolic(name, _FORMS[name], opset)
    try:
        yield
    finally:
        for name, opset in lent:
            torch.onnx.unregister_custom_op_symbolic(name, opset)
