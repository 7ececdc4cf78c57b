"""Placements applied in a framework: the other end of ``placelab export-placement``.

``placelab export-placement best_placement.json --format torch --onnx model.onnx -o modules.json``
writes a map from PyTorch module paths (``"layer1.0.conv1"``) to torch devices (``"cuda:0"``);
``apply_module_map`` moves the submodules of a ``torch.nn.Module`` there:

    import json, placelab
    placelab.apply_module_map(model, json.load(open("modules.json")))

torch is imported by the caller, not here: this file needs only the module it is given.
"""

from __future__ import annotations

import re

from ._placelab import InputError

_PLACELAB_DEVICE = re.compile(r"(cpu|gpu):(\d+)")


def torch_device(device: str) -> str:
    """A torch device name for ``device``: placelab's ``gpu:N`` -> ``cuda:N``, ``cpu:N`` -> ``cpu``
    (as ``placelab export-placement --format torch`` writes them); any other name (``cuda:1``,
    ``cpu``, ``meta``) is returned as it is, for torch to judge."""
    m = _PLACELAB_DEVICE.fullmatch(device)
    if not m:
        return device
    return "cpu" if m.group(1) == "cpu" else f"cuda:{m.group(2)}"


def check_module_paths(module, paths) -> dict:
    """``module.named_modules()`` as a dict, after checking that each of ``paths`` is one of them;
    raises placelab.InputError naming the first path the module lacks."""
    modules = dict(module.named_modules())
    for path in paths:
        if path not in modules:
            raise InputError(f"module map: {path}: {type(module).__name__} has no submodule of this name")
    return modules


def apply_module_map(module, mapping: dict[str, str]):
    """Moves each submodule named in ``mapping`` (module path -> device) to its device, with
    ``.to(torch_device(device))``, parents before their children (fewer dots first) so that a
    child's entry overrides its parent's. ``""`` names ``module`` itself. Returns ``module``.
    Raises placelab.InputError naming the path when ``module`` has no such submodule."""
    order = sorted(mapping, key=lambda p: (p.count(".") + (p != ""), p))
    modules = check_module_paths(module, order)
    for path in order:
        modules[path].to(torch_device(mapping[path]))
    return module
