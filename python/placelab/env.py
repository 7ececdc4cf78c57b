"""Placement as a reinforcement-learning environment, with the Gymnasium API but without Gymnasium.

``PlacementEnv`` places a graph group by group, as the seq2seq placers (Mirhoseini et al. 2017)
and Placeto do: one step per group, in ``env.order`` (groups by the earliest topological position
of their ops); after the last group the whole placement is simulated and the reward arrives (0
before). ``PlacementBanditEnv`` takes the whole placement as one action and ends after one step.

Observation of ``PlacementEnv``: a float32 array of shape (G, F + D + 1), one row per group in
placement order (row i is group ``env.order[i]``):

    [0, F)        the group's features, ``describe_problem(...).features`` (learners/problem.h's
                  group_feature_matrix: edges to and from every group, op-type counts, summed
                  output shapes, log FLOPs/bytes; all scaled into [0, 1])
    [F, F + D)    one-hot of the device chosen for the group so far (all 0 before it is placed)
    F + D         1 for the group the next action places, else 0 (all 0 once the episode ends)

D is the number of devices the env may use (``env.devices``: all of the machine's, its GPUs with
``devices="gpus"``, or its GPUs and first CPU with ``devices="tensorflow"``); an action is an index into ``env.devices``. ``PlacementBanditEnv``'s
observation is the feature block alone, (G, F), and its action one device index per row.

Reward at the end: ``-t`` (``reward="neg_time"``) or ``-sqrt(t)`` (``"neg_sqrt_time"``, Mirhoseini
et al.'s), where t is the simulated step time in seconds, or ``oom_time_s`` when the placement runs
out of memory. ``info`` at the end holds ``step_time_s`` (the simulated time, also when OOM),
``oom``, ``placement`` (one device id per op, int32) and ``time_s`` (the t the reward used).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import _placelab

_REWARDS = ("neg_time", "neg_sqrt_time")


class Discrete:
    """A choice of ``n`` actions, 0 .. n-1 (Gymnasium's ``Discrete``, without Gymnasium)."""

    def __init__(self, n: int, seed: int | None = None):
        self.n = int(n)
        self.shape: tuple[int, ...] = ()
        self.dtype = np.dtype(np.int64)
        self.np_random = np.random.default_rng(seed)

    def seed(self, seed: int | None = None) -> None:
        self.np_random = np.random.default_rng(seed)

    def sample(self) -> int:
        return int(self.np_random.integers(self.n))

    def contains(self, x: Any) -> bool:
        try:
            v = int(x)
        except (TypeError, ValueError):
            return False
        return v == x and 0 <= v < self.n

    def __repr__(self) -> str:
        return f"Discrete({self.n})"


class MultiDiscrete:
    """``len(nvec)`` choices, entry i among 0 .. nvec[i]-1 (Gymnasium's ``MultiDiscrete``)."""

    def __init__(self, nvec, seed: int | None = None):
        self.nvec = np.asarray(nvec, dtype=np.int64)
        self.shape: tuple[int, ...] = tuple(self.nvec.shape)
        self.dtype = np.dtype(np.int64)
        self.np_random = np.random.default_rng(seed)

    def seed(self, seed: int | None = None) -> None:
        self.np_random = np.random.default_rng(seed)

    def sample(self) -> np.ndarray:
        return self.np_random.integers(self.nvec)

    def contains(self, x: Any) -> bool:
        a = np.asarray(x)
        return a.shape == self.shape and np.issubdtype(a.dtype, np.integer) and bool(((a >= 0) & (a < self.nvec)).all())

    def __repr__(self) -> str:
        return f"MultiDiscrete({self.nvec.tolist()})"


class Box:
    """Real arrays of ``shape`` with entries in [low, high] (Gymnasium's ``Box``)."""

    def __init__(self, low: float, high: float, shape: tuple[int, ...], dtype=np.float32, seed: int | None = None):
        self.low = float(low)
        self.high = float(high)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.np_random = np.random.default_rng(seed)

    def seed(self, seed: int | None = None) -> None:
        self.np_random = np.random.default_rng(seed)

    def sample(self) -> np.ndarray:
        return self.np_random.uniform(self.low, self.high, self.shape).astype(self.dtype)

    def contains(self, x: Any) -> bool:
        a = np.asarray(x)
        return a.shape == self.shape and bool(((a >= self.low) & (a <= self.high)).all())

    def __repr__(self) -> str:
        return f"Box({self.low}, {self.high}, {self.shape}, {self.dtype})"


class _PlacementBase:
    metadata: dict[str, Any] = {"render_modes": []}
    render_mode = None
    spec = None

    def __init__(self, graph, machine, grouping: str = "scope_units", reward: str = "neg_time",
                 oom_time_s: float = 100.0, devices: str = "all", groups: int = 256, grouping_seed: int = 1):
        if reward not in _REWARDS:
            raise _placelab.InputError(f"reward = {reward}: must be one of {', '.join(_REWARDS)}")
        if not (oom_time_s > 0 and math.isfinite(oom_time_s)):
            raise _placelab.InputError(f"oom_time_s = {oom_time_s}: must be a finite number > 0")
        if devices not in ("all", "gpus", "tensorflow"):
            raise _placelab.InputError(f"devices = {devices}: must be one of all, gpus, tensorflow")
        self.graph = graph
        self.machine = machine
        self.simulator = _placelab.Simulator(graph, machine)
        self.problem = _placelab.describe_problem(graph, grouping, groups, grouping_seed)
        self.reward_kind = reward
        self.oom_time_s = float(oom_time_s)
        kinds = machine.device_kinds
        # "tensorflow": TensorFlow 1.x's list, the host's one CPU device (the first CPU, where
        # cpu-only ops run) and the GPUs, as a scenario's `devices: tensorflow` (docs/scenarios.md).
        host = next((d for d in range(machine.num_devices) if kinds[d] == "cpu"), None)
        self.devices = np.array([d for d in range(machine.num_devices)
                                 if devices == "all" or kinds[d] == "gpu" or (devices == "tensorflow" and d == host)],
                                dtype=np.int32)
        if self.devices.size == 0:
            raise _placelab.InputError(f"devices = {devices}: machine {machine.name} has none")
        self.order = self.problem.order.astype(np.int64)
        self.group_of_op = self.problem.group_of_op.astype(np.int64)
        self.features = self.problem.features
        self.num_groups = int(self.problem.num_groups)
        self.np_random = np.random.default_rng()

    @property
    def unwrapped(self):
        return self

    def _finish(self, device_index_by_row: np.ndarray) -> tuple[float, dict[str, Any]]:
        """Simulates the placement that puts group order[i] on devices[device_index_by_row[i]]."""
        group_devices = np.empty(self.num_groups, dtype=np.int32)
        group_devices[self.order] = self.devices[device_index_by_row]
        placement = group_devices[self.group_of_op]
        r = self.simulator.simulate(placement)
        t = self.oom_time_s if r.oom else r.step_time_s
        reward = -t if self.reward_kind == "neg_time" else -math.sqrt(t)
        return reward, {"step_time_s": r.step_time_s, "oom": r.oom, "placement": placement, "time_s": t}

    def close(self) -> None:
        pass

    def render(self) -> None:
        return None


class PlacementEnv(_PlacementBase):
    """Places one group per step, in ``order``; the reward comes after the last group (module doc).

    PlacementEnv(graph, machine, grouping="scope_units", reward="neg_time", oom_time_s=100,
    devices="all", groups=256, grouping_seed=1): ``grouping`` is one of placelab.groupings();
    ``groups`` and ``grouping_seed`` are METIS's and Scotch's. Raises InputError for bad values.
    """

    def __init__(self, graph, machine, grouping: str = "scope_units", reward: str = "neg_time",
                 oom_time_s: float = 100.0, devices: str = "all", groups: int = 256, grouping_seed: int = 1):
        super().__init__(graph, machine, grouping, reward, oom_time_s, devices, groups, grouping_seed)
        g, f, d = self.num_groups, self.features.shape[1], self.devices.size
        self.observation_space = Box(0.0, 1.0, (g, f + d + 1), np.float32)
        self.action_space = Discrete(d)
        self._obs = np.zeros((g, f + d + 1), dtype=np.float32)
        self._obs[:, :f] = self.features
        self._chosen = np.zeros(g, dtype=np.int64)
        self._t = g  # no episode until reset()

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Starts an episode: nothing placed, group order[0] next. Returns (observation, info)."""
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        f = self.features.shape[1]
        self._obs[:, f:] = 0.0
        self._obs[0, -1] = 1.0
        self._t = 0
        return self._obs.copy(), {}

    def step(self, action):
        """Places group order[t] on devices[action]. Returns (obs, reward, terminated, truncated, info)."""
        if self._t >= self.num_groups:
            raise _placelab.InputError("step() before reset() or after the episode ended: call reset() first")
        if not self.action_space.contains(action):
            raise _placelab.InputError(f"action = {action}: must be a device index in [0, {self.action_space.n})")
        a, t, f = int(action), self._t, self.features.shape[1]
        self._chosen[t] = a
        self._obs[t, f + a] = 1.0
        self._obs[t, -1] = 0.0
        self._t = t + 1
        if self._t < self.num_groups:
            self._obs[self._t, -1] = 1.0
            return self._obs.copy(), 0.0, False, False, {}
        reward, info = self._finish(self._chosen)
        return self._obs.copy(), reward, True, False, info


class PlacementBanditEnv(_PlacementBase):
    """One step per episode: the action is a device index for every group (row of the observation).

    Same arguments as PlacementEnv. The observation is the (G, F) feature block; the action an
    integer array of G device indices, entry i for group order[i].
    """

    def __init__(self, graph, machine, grouping: str = "scope_units", reward: str = "neg_time",
                 oom_time_s: float = 100.0, devices: str = "all", groups: int = 256, grouping_seed: int = 1):
        super().__init__(graph, machine, grouping, reward, oom_time_s, devices, groups, grouping_seed)
        self.observation_space = Box(0.0, 1.0, self.features.shape, np.float32)
        self.action_space = MultiDiscrete(np.full(self.num_groups, self.devices.size))
        self._done = True

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self._done = False
        return self.features.copy(), {}

    def step(self, action):
        if self._done:
            raise _placelab.InputError("step() before reset() or after the episode ended: call reset() first")
        a = np.asarray(action)
        if not self.action_space.contains(a):
            raise _placelab.InputError(
                f"action: must be {self.num_groups} device indices in [0, {self.devices.size}), got shape {a.shape}")
        reward, info = self._finish(a.astype(np.int64))
        self._done = True
        return self.features.copy(), reward, True, False, info
