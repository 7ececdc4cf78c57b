"""placelab from Python: simulate training steps of deep-learning graphs under device placements.

    import numpy as np
    import placelab as pl

    g = pl.Graph.from_model("inception_v3:batch=32")
    m = pl.Machine.preset("k80x4")
    sim = pl.Simulator(g, m)
    r = sim.simulate(pl.baseline(g, m, "heft"))
    print(r.step_time_s, r.oom, r.busy_s)
    times, oom = sim.simulate_batch(np.random.default_rng(0).integers(0, m.num_devices, (100, g.num_ops)))

The compiled part is ``placelab._placelab``; this package re-exports it and adds the
Gymnasium-style environments (``PlacementEnv``, ``PlacementBanditEnv``) and ``apply_module_map``, which
applies ``placelab export-placement --format torch``'s map to a ``torch.nn.Module``. ``placelab.torch``
(imported on its own, since it needs torch) captures a PyTorch training step as a graph:
``placelab.torch.capture(model, example_inputs, loss, target, optimizer)``. docs/python.md is the guide.
Bad input raises ``placelab.InputError`` (a ``ValueError``) with the same file:line: field message
as the command line.
"""

from ._placelab import (
    Error,
    Graph,
    InputError,
    LowerBound,
    Machine,
    Problem,
    Result,
    Simulator,
    __version__,
    baseline,
    baselines,
    describe_problem,
    grouping,
    groupings,
    learners,
    lower_bound,
    machines,
    models,
    run,
    sweep,
)
from .env import Box, Discrete, MultiDiscrete, PlacementBanditEnv, PlacementEnv
from .frameworks import apply_module_map, torch_device

__all__ = [
    "Box",
    "Discrete",
    "Error",
    "Graph",
    "InputError",
    "LowerBound",
    "Machine",
    "MultiDiscrete",
    "PlacementBanditEnv",
    "PlacementEnv",
    "Problem",
    "Result",
    "Simulator",
    "__version__",
    "apply_module_map",
    "baseline",
    "baselines",
    "describe_problem",
    "grouping",
    "groupings",
    "learners",
    "lower_bound",
    "machines",
    "models",
    "run",
    "sweep",
    "torch_device",
]
