"""The Gymnasium-style environments: episodes, rewards, observation layout, determinism by seed."""

import math

import numpy as np
import pytest

import placelab as pl


@pytest.fixture(scope="module")
def machine():
    return pl.Machine.preset("k80x4")


def run_episode(env, seed):
    obs, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    rewards, observations = [], [obs]
    while True:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        rewards.append(reward)
        observations.append(obs)
        assert not truncated
        if terminated:
            return observations, rewards, info


def test_episode_places_every_group_in_order(small_graph, machine):
    env = pl.PlacementEnv(small_graph, machine, grouping="scope_units")
    g, f, d = env.num_groups, env.features.shape[1], env.devices.size
    assert env.observation_space.shape == (g, f + d + 1)
    assert env.action_space.n == d == machine.num_devices
    observations, rewards, info = run_episode(env, seed=3)
    assert len(rewards) == g
    assert all(r == 0.0 for r in rewards[:-1])
    first, last = observations[0], observations[-1]
    assert (first[:, :f] == env.features).all()
    assert first[0, -1] == 1.0 and first[:, -1].sum() == 1.0 and first[:, f:f + d].sum() == 0
    assert last[:, -1].sum() == 0 and (last[:, f:f + d].sum(axis=1) == 1).all()
    # The final reward is the simulator's verdict on the placement the episode built.
    r = pl.Simulator(small_graph, machine).simulate(info["placement"])
    assert info["step_time_s"] == r.step_time_s and info["oom"] == r.oom
    assert rewards[-1] == -(100.0 if r.oom else r.step_time_s)
    chosen = last[:, f:f + d].argmax(axis=1)
    groups = pl.grouping(small_graph, "scope_units")
    assert (info["placement"] == env.devices[chosen[np.argsort(env.order)][groups]]).all()
    with pytest.raises(pl.Error):
        env.step(0)


def test_same_seed_same_episode(small_graph, machine):
    a = run_episode(pl.PlacementEnv(small_graph, machine, reward="neg_sqrt_time"), seed=11)
    b = run_episode(pl.PlacementEnv(small_graph, machine, reward="neg_sqrt_time"), seed=11)
    assert a[1] == b[1]
    assert all((x == y).all() for x, y in zip(a[0], b[0]))
    assert (a[2]["placement"] == b[2]["placement"]).all()
    assert a[1][-1] == -math.sqrt(a[2]["time_s"])


def test_gpus_only_and_bad_actions(small_graph, machine):
    env = pl.PlacementEnv(small_graph, machine, devices="gpus")
    assert env.devices.tolist() == [1, 2, 3, 4]
    env.reset(seed=0)
    with pytest.raises(pl.InputError):
        env.step(4)
    with pytest.raises(pl.InputError):
        pl.PlacementEnv(small_graph, machine, reward="time")


def test_tensorflow_device_list_is_the_first_cpu_and_the_gpus(small_graph):
    p100 = pl.Machine.preset("p100x4")  # cpu:0, cpu:1, gpu:0-3
    assert pl.PlacementEnv(small_graph, p100, devices="tensorflow").devices.tolist() == [0, 2, 3, 4, 5]
    assert pl.PlacementEnv(small_graph, p100, devices="all").devices.size == 6
    with pytest.raises(pl.InputError):
        pl.PlacementEnv(small_graph, p100, devices="cpus")


def test_bandit_is_one_step(small_graph, machine):
    env = pl.PlacementBanditEnv(small_graph, machine, devices="gpus", oom_time_s=50)
    obs, _ = env.reset(seed=5)
    assert obs.shape == env.observation_space.shape == (env.num_groups, env.features.shape[1])
    env.action_space.seed(5)
    action = env.action_space.sample()
    assert action.shape == (env.num_groups,)
    _, reward, terminated, truncated, info = env.step(action)
    assert terminated and not truncated
    assert reward == -info["time_s"]
    assert set(np.unique(info["placement"])) <= {1, 2, 3, 4}
    # The sequential env given the same choices reaches the same placement.
    seq = pl.PlacementEnv(small_graph, machine, devices="gpus", oom_time_s=50)
    seq.reset()
    for a in action:
        *_, seq_info = seq.step(int(a))
    assert (seq_info["placement"] == info["placement"]).all()
