"""MDF loop models as ``torch.nn.Module``\\ s: :func:`to_pytorch` and :class:`MdfModule`.

``to_pytorch(model)(**inputs)`` runs the model's graph in torch, eagerly: Scan, Loop
and If as Python loops over torch values (:mod:`.control`), every other operator as
torch operations. The model's floating-point constants are the module's
``nn.Parameter``\\ s (:mod:`.parameters`), its other constants buffers, so
``torch.optim`` trains the first and ``m.to(device)`` moves both; ``m.to_mdf()``
writes the current values into a copy of the model.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from modeci_mdf.mdf import Model

from mdf_loops.backends.torch.interpreter import Frame
from mdf_loops.backends.torch.parameters import Trained, attribute_names, write_back
from mdf_loops.backends.torch.plan import TorchPlan, plan
from mdf_loops.backends.torch.values import tensor_of, to_torch
from mdf_loops.errors import InputError, closest_names
from mdf_loops.model.inputs import (
    DeclaredInput,
    default_input,
    fit_input,
    graph_input_types,
    input_ports,
)
from mdf_loops.model.interface import graph_interface, load_model

__all__ = ["MdfModule", "to_pytorch"]


class MdfModule(torch.nn.Module):
    """One MDF graph as a torch module; ``m(**inputs)`` returns ``{output name: tensor}``."""

    def __init__(self, model: Model, graph_id: str, torch_plan: TorchPlan):
        super().__init__()
        self._model = model
        self._plan = torch_plan
        target = next(g for g in model.graphs if g.id == graph_id)
        interface = graph_interface(target)
        self.input_names: tuple[str, ...] = tuple(interface.inputs)
        self.output_names: tuple[str, ...] = torch_plan.output_names
        self._declared: dict[str, DeclaredInput] = graph_input_types(target, interface.inputs)
        ports = input_ports(target)
        self._defaults = {
            name: default_input(ports.get(pid, [])) for name, pid in interface.inputs.items()
        }
        trained: dict[tuple[str, str], Trained] = {
            **{("constant", key): t for key, t in torch_plan.constants.items()},
            **{("input", name): t for name, t in torch_plan.lifted.items()},
        }
        buffers = {site.key for site in torch_plan.table.sites} - set(torch_plan.constants)
        names = attribute_names(trained, buffers)
        self._constant_attributes: dict[str, str] = {}  # constant key -> attribute
        for site in torch_plan.table.sites:
            if site.key in torch_plan.constants:
                attribute = names[("constant", site.key)]
                self.register_parameter(attribute, torch.nn.Parameter(tensor_of(site.value)))
            else:
                attribute = site.key
                self.register_buffer(attribute, tensor_of(site.value, site.name))
            self._constant_attributes[site.key] = attribute
        self._input_attributes: dict[str, str] = {}  # lifted input name -> attribute
        for input_name, t in torch_plan.lifted.items():
            attribute = names[("input", input_name)]
            self.register_parameter(attribute, torch.nn.Parameter(tensor_of(t.site.value)))
            self._input_attributes[input_name] = attribute
        self._trained = {key: (t, names[key]) for key, t in trained.items()}
        self._qualified = {t.qualified: names[key] for key, t in trained.items()}

    # ------------------------------------------------------------ running
    def forward(self, *args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:
        feed = self._feed(args, kwargs)
        constants = {key: getattr(self, a) for key, a in self._constant_attributes.items()}
        for name, attribute in self._input_attributes.items():
            feed[name] = to_torch(getattr(self, attribute), self._plan.input_types[name])
        program = self._plan.program
        values = [feed.get(name) for name in program.input_names]
        outputs = program.bind(Frame({}, constants))(values)
        return dict(zip(self.output_names, outputs, strict=True))

    def _feed(self, args: tuple, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        if len(args) > len(self.input_names):
            raise InputError(
                f"graph '{self._plan.graph_id}' takes {len(self.input_names)} inputs "
                f"{list(self.input_names)}, got {len(args)} positional values"
            )
        given = dict(zip(self.input_names, args, strict=False))
        for name, value in kwargs.items():
            if name in given:
                raise InputError(f"input '{name}' is given twice (by position and by name)")
            if name not in self.input_names:
                close = closest_names(name, self.input_names)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise InputError(
                    f"graph '{self._plan.graph_id}': unknown input '{name}'; it takes "
                    f"{list(self.input_names)}{hint}"
                )
            given[name] = value
        device = self._device()
        feed = {}
        for name in self.input_names:
            if name in given:
                value = given[name]
            elif self._defaults[name][0]:
                value = self._defaults[name][1]
            else:
                raise InputError(
                    f"graph '{self._plan.graph_id}': missing input '{name}'; give a value "
                    "for each of " + str(list(self.input_names))
                )
            if not isinstance(value, torch.Tensor):
                value = fit_input(name, value, self._declared[name])
            try:
                feed[name] = to_torch(value, self._plan.input_types.get(name), device)
            except (TypeError, ValueError) as exc:  # strings, ragged lists
                raise InputError(f"input '{name}': {exc}") from exc
        return feed

    def _device(self) -> torch.device:
        for tensor in self.buffers():
            return tensor.device
        for parameter in self.parameters():
            return parameter.device
        return torch.device("cpu")

    # ------------------------------------------------------------ parameters
    def mdf_parameter(self, name: str) -> torch.nn.Parameter:
        """The parameter of the MDF value ``name`` (``"node.parameter"``)."""
        if name not in self._qualified:
            close = closest_names(name, self._qualified)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise KeyError(
                f"'{name}' is not a trained value; trained: {sorted(self._qualified)}{hint}"
            )
        return getattr(self, self._qualified[name])

    def to_mdf(self) -> Model:
        """A copy of the MDF model holding the parameters' current values."""
        values = []
        for trained, attribute in self._trained.values():
            tensor = getattr(self, attribute).detach().cpu().numpy()
            values.append((trained, tensor.astype(trained.site.value.dtype)))
        return write_back(self._model, self._plan.graph_id, values)


def to_pytorch(model: Model | str | os.PathLike, *, graph: str | None = None) -> MdfModule:
    """``model``'s graph as a ``torch.nn.Module`` whose constants torch can train.

    ``m(**inputs)`` (tensors or arrays by the graph's input names, or positional in the
    graph's input order) returns ``{output name: torch.Tensor}``. The model's
    floating-point constants (node parameters such as ``tau``, ``onnx::Constant``
    weights) are ``m``'s ``nn.Parameter``\\ s; ``m.to_mdf()`` returns a copy of the model
    with their current values. Needs ``mdf-loops[torch]``; docs/pytorch.md.

    Raises :class:`~mdf_loops.errors.CompileError` naming the node and operator when a
    node has no torch form.
    """
    from mdf_loops.model.interface import select_graph
    from mdf_loops.run import _verify

    source = load_model(model)
    _verify(source, False)  # the safety checks run() makes, before anything is exported
    target = select_graph(source, graph)
    interface = graph_interface(target)
    ports = input_ports(target)
    examples = {}
    for name, port_id in interface.inputs.items():
        has_default, value = default_input(ports.get(port_id, []))
        if has_default:
            examples[name] = np.asarray(value)
    return MdfModule(source, target.id, plan(source, target, examples, trainable=True))
