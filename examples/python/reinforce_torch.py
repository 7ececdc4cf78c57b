#!/usr/bin/python3
"""REINFORCE with a small PyTorch policy against placelab.PlacementEnv.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/reinforce_torch.py
    PYTHONPATH=build/python /usr/bin/python3 examples/python/reinforce_torch.py --episodes 400 --csv curve.csv

The environment places the groups of a graph one per step (docs/python.md, "The environments");
the reward, after the last group, is minus the simulated step time. The policy is a two-layer
network that sees, for the group it places next, the group's features (the observation's feature
block), how many bytes it exchanges with the groups already on each device, and how many groups
each device holds so far; it outputs a distribution over devices. It is trained by REINFORCE
(Williams 1992) with the batch's mean reward as the baseline, as Mirhoseini et al. (2017) train
their placer.

Defaults: scenarios/graphs/quickstart.json (two towers and a head, 59 ops) on k80x4's GPUs, METIS
groups (256 asked, 49 come back), as scenarios/quickstart.yaml groups its Inception-V3. One core
(torch.set_num_threads(1)); the default 600 episodes take about half a minute. The curve
(mean simulated step time per batch of episodes) is printed as it goes and written with --csv.
Needs Debian's python3-torch (1.13) and the placelab module on PYTHONPATH.
"""
from __future__ import annotations

import argparse
import csv
import os
import sys
import time

import numpy as np
import torch

import placelab as pl

DEFAULT_GRAPH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scenarios", "graphs",
                             "quickstart.json")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--graph", default=DEFAULT_GRAPH, help="graph JSON file (default: %(default)s)")
    p.add_argument("--model", help="a zoo model spec instead of --graph, e.g. inception_v3:batch=32")
    p.add_argument("--machine", default="k80x4", help="machine preset or YAML file (default: %(default)s)")
    p.add_argument("--devices", default="gpus", choices=("all", "gpus"), help="devices the policy may use")
    p.add_argument("--grouping", default="metis", help="one of placelab.groupings() (default: %(default)s)")
    p.add_argument("--groups", type=int, default=256, help="groups METIS/Scotch are asked for")
    p.add_argument("--episodes", type=int, default=600, help="episodes to train (default: %(default)s)")
    p.add_argument("--batch", type=int, default=10, help="episodes per policy update (default: %(default)s)")
    p.add_argument("--lr", type=float, default=0.03, help="Adam learning rate (default: %(default)s)")
    p.add_argument("--hidden", type=int, default=32, help="hidden units of the policy (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seeds torch, numpy and the environment")
    p.add_argument("--csv", help="write the curve here: episode, step_time_s, oom, reward")
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    return p.parse_args(argv)


class Policy(torch.nn.Module):
    """Device logits for the next group from its features and what is placed so far."""

    def __init__(self, inputs: int, devices: int, hidden: int):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(inputs, hidden), torch.nn.Tanh(),
                                       torch.nn.Linear(hidden, devices))

    def forward(self, x):
        return self.net(x)


def policy_input(env, obs: np.ndarray, row: int) -> np.ndarray:
    """What the policy sees to place row `row` of the observation (group env.order[row])."""
    g, f, d = env.num_groups, env.features.shape[1], env.devices.size
    placed = np.zeros((g, d), dtype=np.float32)
    placed[env.order] = obs[:, f:f + d]                 # one-hot of each group's device, by group id
    edges = obs[row, :g] + obs[row, g:2 * g]            # data to and from every group, by group id
    return np.concatenate([obs[row, :f], edges @ placed, placed.sum(axis=0) / g])


def run_episode(env, policy, generator):
    """One episode; returns (sum of log-probabilities of the actions, the last step's info)."""
    obs, _ = env.reset()
    log_probs = []
    for row in range(env.num_groups):
        logits = policy(torch.from_numpy(policy_input(env, obs, row)))
        dist = torch.distributions.Categorical(logits=logits)
        action = torch.multinomial(dist.probs, 1, generator=generator).squeeze(0)
        log_probs.append(dist.log_prob(action))
        obs, reward, terminated, _, info = env.step(int(action))
        if terminated:
            info["reward"] = reward
            return torch.stack(log_probs).sum(), info
    raise RuntimeError("the episode did not end after one step per group")


def train(args, log=print):
    """Trains the policy; returns the curve, one (episode, step_time_s, oom, reward) per episode."""
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    graph = pl.Graph.from_model(args.model) if args.model else pl.Graph.from_json(args.graph)
    machine = pl.Machine.from_yaml(args.machine) if os.path.exists(args.machine) else pl.Machine.preset(args.machine)
    env = pl.PlacementEnv(graph, machine, grouping=args.grouping, devices=args.devices, groups=args.groups)
    env.reset(seed=args.seed)
    d = env.devices.size
    policy = Policy(env.features.shape[1] + 2 * d, d, args.hidden)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)
    log(f"{graph.num_ops} ops in {env.num_groups} groups ({args.grouping}) on {d} devices of {machine.name}; "
        f"{args.episodes} episodes, {args.batch} per update")

    curve = []
    best = None
    for first in range(0, args.episodes, args.batch):
        batch = [run_episode(env, policy, generator) for _ in range(min(args.batch, args.episodes - first))]
        rewards = torch.tensor([info["reward"] for _, info in batch], dtype=torch.float64)
        advantage = rewards - rewards.mean()
        if len(batch) > 1 and advantage.std() > 0:
            advantage = advantage / advantage.std()
        loss = -sum(float(a) * lp for a, (lp, _) in zip(advantage, batch)) / len(batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for k, (_, info) in enumerate(batch):
            curve.append((first + k, info["step_time_s"], info["oom"], info["reward"]))
            if not info["oom"] and (best is None or info["step_time_s"] < best[0]):
                best = (info["step_time_s"], info["placement"])
        times = [info["time_s"] for _, info in batch]
        if (first // args.batch) % 10 == 0 or first + len(batch) >= args.episodes:
            log(f"episodes {first:5d}-{first + len(batch) - 1:5d}: mean step time {1e3 * np.mean(times):8.3f} ms, "
                f"best so far {1e3 * best[0] if best else float('nan'):8.3f} ms")
    return curve, best


def write_curve(path, curve):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["episode", "step_time_s", "oom", "reward"])
        for episode, step_time_s, oom, reward in curve:
            w.writerow([episode, repr(step_time_s), int(oom), repr(reward)])


def main(argv=None):
    """Runs the example; returns the curve (see train) so that tests can check it."""
    args = parse_args(argv)
    start = time.perf_counter()
    curve, best = train(args, log=(lambda *_: None) if args.quiet else print)
    tenth = max(1, len(curve) // 10)
    first = np.mean([c[1] for c in curve[:tenth]])
    last = np.mean([c[1] for c in curve[-tenth:]])
    print(f"mean step time, first tenth of episodes {1e3 * first:.3f} ms -> last tenth {1e3 * last:.3f} ms; "
          f"best {1e3 * best[0]:.3f} ms; {time.perf_counter() - start:.1f} s")
    if args.csv:
        write_curve(args.csv, curve)
        print(f"wrote {args.csv}")
    return curve


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
