"""ONNX forms that torch's TorchScript exporter lacks for ``torch.nn.RNNCell`` and
``GRUCell``, lent to it for the length of one export.

A scripted ``RNNCell`` or ``GRUCell`` calls ``aten::rnn_tanh_cell``,
``aten::rnn_relu_cell`` or ``aten::gru_cell``, which the exporter has no ONNX form
for (``LSTMCell``'s ``lstm_cell`` it has), and its ``forward`` first asks
``input.dim() not in (1, 2)``, whose constant list the exporter folds into a tensor
that its own ``aten::__contains_`` form then refuses. :func:`cell_forms` registers
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

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["cell_forms"]

log = logging.getLogger(__name__)

#: the opset our forms are registered at: torch's lowest, so every export uses them
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


_FORMS = {
    "aten::rnn_tanh_cell": _rnn_cell("Tanh"),
    "aten::rnn_relu_cell": _rnn_cell("Relu"),
    "aten::gru_cell": _gru_cell,
    "aten::__contains_": _contains,
}


def _users_own(name: str) -> bool:
    """Whether the user registered a form of ``name`` at our opset (or we cannot tell)."""
    try:
        from torch.onnx._internal.torchscript_exporter import registration

        group = registration.registry.get_function_group(name)
        return group is not None and group._functions.overridden(_OPSET)
    except (ImportError, AttributeError):  # another torch: leave its exporter alone
        return True


@contextmanager
def cell_forms() -> Iterator[None]:
    """The forms above registered with torch's TorchScript exporter inside the block."""
    import torch

    lent = [name for name in _FORMS if not _users_own(name)]
    for name in lent:
        torch.onnx.register_custom_op_symbolic(name, _FORMS[name], _OPSET)
    try:
        yield
    finally:
        for name in lent:
            torch.onnx.unregister_custom_op_symbolic(name, _OPSET)
