"""``placelab.torch.place``: a model placed by a module map, with its activations moved where they
are used, so that a placement placelab found runs as it was simulated.

    import json, torch, placelab.torch as pt
    placed = pt.place(model, json.load(open("modules.json")))       # {"layer1": "cuda:1", ...}
    opt = torch.optim.SGD(placed.parameters(), lr=0.1)               # any optimizer, built after
    loss = loss_fn(placed(x), y.to(placed.device)); loss.backward(); opt.step()
    # on a machine without those GPUs: pt.place(model, mapping, device_map={"cuda:1": "cpu", ...})

How: every module is moved (``.to``) to the device of its own entry in the map, else of the
nearest module above it, else the model's (``""``). While the placed model runs, forward hooks keep
the stack of running modules and a ``TorchFunctionMode`` sees every torch function call: a call
runs on the device of the innermost running module (the module whose ``forward`` made the call: a
submodule's layer, or its parent's functional op such as a residual ``+``), and each tensor argument
on another device is moved there first with ``.to``, which autograd differentiates, so the backward
sends each gradient back. The outputs are moved to the model's device. This is the rule the
simulator's module map assumes (``placelab simulate --placement modules.json``): every op on its
module's device, a copy where a value crosses devices. In-place ops on a value that had to be moved
modify the moved copy (``out += x`` rebinds ``out`` and is exact; a bare ``x.relu_()`` whose result
is dropped is not).
"""

from __future__ import annotations

import json
import os
import weakref
from typing import Any, Mapping

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

from ._placelab import InputError
from .frameworks import check_module_paths, torch_device


def _device_of_module(path: str, devices: Mapping[str, str]) -> str:
    """The map's device for ``path``: its own entry, else the nearest module above it, else ``""``'s
    (which ``place`` always fills in)."""
    while True:
        if path in devices:
            return devices[path]
        path = path.rpartition(".")[0]


class PlacedModel(torch.nn.Module):
    """``model`` with its modules on their devices (see the module docstring). ``device`` is the
    model's device (where outputs arrive); ``moves`` counts the values moved between the map's
    devices in the last forward (logical devices, before ``device_map``), ``devices`` is the map
    after ``device_map``. Parameters, state dict and ``train()``/``eval()`` are the model's."""

    def __init__(self, model: torch.nn.Module, logical: dict[str, str], physical: dict[str, torch.device]):
        super().__init__()
        self.model = model
        self.devices = {path: str(d) for path, d in physical.items()}
        self.device = physical[""]
        self.moves = 0
        self._logical_of_module: dict[int, str] = {}
        self._physical_of_module: dict[int, torch.device] = {}
        for path, module in model.named_modules():
            self._logical_of_module[id(module)] = logical[path]
            self._physical_of_module[id(module)] = physical[path]
            module.to(physical[path])  # parents first (named_modules' order), children after: theirs wins
        self._stack: list[torch.nn.Module] = []
        self._hooks = []
        for module in model.modules():
            self._hooks.append(module.register_forward_pre_hook(self._enter))
            self._hooks.append(module.register_forward_hook(self._leave))
        # The logical device of each tensor seen (id -> (weak reference, device)); parameters and
        # buffers are on their module's.
        self._tags: dict[int, tuple[Any, str]] = {}
        for path, module in model.named_modules():
            for t in list(module.parameters(recurse=False)) + list(module.buffers(recurse=False)):
                self._tag(t, logical[path])

    def _enter(self, module, _inputs):
        self._stack.append(module)

    def _leave(self, module, _inputs, _output):
        if self._stack and self._stack[-1] is module:
            self._stack.pop()

    def _tag(self, t: torch.Tensor, device: str) -> None:
        self._tags[id(t)] = (weakref.ref(t), device)

    def _logical(self, t: torch.Tensor, default: str) -> str:
        entry = self._tags.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else default

    def _target(self) -> tuple[str, torch.device]:
        module = self._stack[-1] if self._stack else self.model
        return self._logical_of_module[id(module)], self._physical_of_module[id(module)]

    def forward(self, *args, **kwargs):
        self.moves = 0
        self._stack.clear()
        root_logical = self._logical_of_module[id(self.model)]
        with _MoveMode(self):
            out = self.model(*args, **kwargs)
        self._tags = {k: v for k, v in self._tags.items() if v[0]() is not None}

        def home(t):
            if not isinstance(t, torch.Tensor):
                return t
            if self._logical(t, root_logical) != root_logical:
                self.moves += 1
            return t.to(self.device) if t.device != self.device else t

        return tree_map(home, out)

    def remove(self) -> torch.nn.Module:
        """Removes the hooks and returns the model, its modules left where they are."""
        for h in self._hooks:
            h.remove()
        self._hooks.clear()
        return self.model


class _MoveMode(TorchFunctionMode):
    """Moves each call's tensor arguments to the device of the innermost running module."""

    def __init__(self, placed: PlacedModel):
        super().__init__()
        self.placed = placed
        self.busy = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.busy:
            return func(*args, **kwargs)
        placed = self.placed
        logical, physical = placed._target()
        flat, _ = tree_flatten((args, kwargs))
        if not any(isinstance(t, torch.Tensor) for t in flat):
            return func(*args, **kwargs)
        self.busy = True
        try:
            def move(t):
                if not isinstance(t, torch.Tensor):
                    return t
                if placed._logical(t, logical) != logical:
                    placed.moves += 1
                return t.to(physical) if t.device != physical and t.device.type != "meta" else t

            # Property reads and metadata (x.shape, x.device, x.dim()) pass through untouched.
            name = getattr(func, "__name__", "")
            if name in ("__get__", "size", "dim", "numel", "to", "cpu", "cuda", "is_floating_point") or func in (
                    torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda):
                return func(*args, **kwargs)
            args, kwargs = tree_map(move, (args, kwargs))
            out = func(*args, **kwargs)
            for t in tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor):
                    placed._tag(t, logical)
            return out
        finally:
            self.busy = False


def place(model: torch.nn.Module, placement, *, device_map: Mapping[str, str] | None = None) -> PlacedModel:
    """``model`` placed by ``placement``: a module map (module path -> device; ``""`` is the model
    itself; without it, the map's most common device) as ``placelab export-placement --format torch``
    writes it, or the path of such a JSON file. Devices are torch's (``cuda:1``, ``cpu``) or placelab's (``gpu:1``, ``cpu:0``).
    ``device_map`` replaces devices before anything moves (``{"cuda:1": "cpu"}``), so that a
    machine without those GPUs runs any placement. Raises placelab.InputError for a path the model
    lacks, a map without a device for some module, or a device torch cannot make."""
    if isinstance(placement, (str, os.PathLike)):
        with open(placement, encoding="utf-8") as f:
            placement = json.load(f)
    if not isinstance(placement, Mapping) or not all(isinstance(v, str) for v in placement.values()):
        raise InputError("place: the placement must be a module map {module path: device} (export-placement "
                         "--format torch writes one)")
    modules = check_module_paths(model, placement)
    wanted = {path: torch_device(d) for path, d in placement.items()}
    if "" not in wanted:
        # The model itself (its own functional ops, where outputs arrive): the map's most common
        # device, the first in the map among equals.
        counts: dict[str, int] = {}
        for d in wanted.values():
            counts[d] = counts.get(d, 0) + 1
        if not counts:
            raise InputError("module map: empty")
        wanted[""] = max(counts, key=lambda d: (counts[d], -list(counts).index(d)))
    device_map = {torch_device(k): torch_device(v) for k, v in (device_map or {}).items()}
    logical = {path: _device_of_module(path, wanted) for path in modules}
    physical = {}
    for path, dev in logical.items():
        name = device_map.get(dev, dev)
        try:
            physical[path] = torch.device(name)
        except RuntimeError as e:
            raise InputError(f"module map: {path or repr('')}: device {name!r}: {e}") from None
    for path, dev in physical.items():
        if dev.type == "cuda" and not (torch.cuda.is_available() and (dev.index or 0) < torch.cuda.device_count()):
            raise InputError(f"module map: {path or repr('')} on {dev}: no such GPU here "
                             f"({torch.cuda.device_count()} visible); map it with device_map={{'{dev}': 'cpu'}}")
    return PlacedModel(model, logical, physical)
