"""Every Python-visible object used from 8 threads at once gives what it gives serially: one Simulator
shared by all threads (simulate and simulate_batch, which release the GIL), one environment per
thread, and scenario runs into separate folders. A race shows as a result that differs (a step time
of 0.0 or another call's result) or as an exception."""

import concurrent.futures
import json

import numpy as np
import pytest

import placelab as pl

THREADS = 8


def in_threads(fn, n=THREADS, repeat=4):
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        return list(pool.map(fn, range(n * repeat)))


def placements(graph, machine, seed, rows=16):
    rng = np.random.default_rng(seed)
    return rng.integers(0, len(machine.device_names), size=(rows, graph.num_ops), dtype=np.int32)


def test_one_simulator_from_eight_threads(small_graph, k80x4):
    sim = pl.Simulator(small_graph, k80x4)
    batches = [placements(small_graph, k80x4, seed) for seed in range(THREADS * 4)]
    want = [sim.simulate_batch(b, threads=1) for b in batches]
    want_one = [sim.simulate(b[0]).step_time_s for b in batches]

    def work(i):
        steps, ooms = sim.simulate_batch(batches[i], threads=2)
        one = sim.simulate(batches[i][0]).step_time_s
        return steps, ooms, one

    for i, (steps, ooms, one) in enumerate(in_threads(work)):
        np.testing.assert_array_equal(steps, want[i][0])
        np.testing.assert_array_equal(ooms, want[i][1])
        assert one == want_one[i]
        assert (steps > 0).all()


@pytest.mark.parametrize("env_class", ["PlacementEnv", "PlacementBanditEnv"])
def test_environments_one_per_thread(small_graph, k80x4, env_class):
    def episode(seed):
        env = getattr(pl, env_class)(small_graph, k80x4, grouping="colocation")
        env.reset(seed=seed)
        rng = np.random.default_rng(seed)
        if env_class == "PlacementBanditEnv":
            return env.step(rng.integers(0, env.action_space.nvec[0], size=env.num_groups))[1]
        reward, done = 0.0, False
        while not done:
            _, reward, done, _, _ = env.step(int(rng.integers(0, env.action_space.n)))
        return reward

    want = [episode(seed) for seed in range(THREADS * 4)]
    assert in_threads(episode) == want


def test_step_before_reset_is_the_users_error(small_graph, k80x4):
    env = pl.PlacementEnv(small_graph, k80x4, grouping="colocation")
    with pytest.raises(pl.InputError, match="call reset\\(\\) first"):
        env.step(0)


def test_scenario_runs_from_eight_threads(small_graph, tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text("model: cifar10_cnn:batch=8\nmachine: k80x4\nsamples: 24\nseeds: 1\n"
                        "learners:\n  mcmc: {}\nbaselines: [single_gpu, heft]\n")

    def run(i):
        out = pl.run(scenario, output=tmp_path / f"out{i}")
        return json.loads((out / "summary.json").read_text())["best"]["step_time_s"]

    serial = run(100)
    assert in_threads(run, repeat=1) == [serial] * THREADS


def test_device_ids_are_whole_numbers_never_truncated(small_graph, k80x4):
    """A float placement is taken only when every entry is a whole number; 1.5 or NaN is the
    user's error (before, 1.5 ran as 1 and NaN as a huge negative id)."""
    sim = pl.Simulator(small_graph, k80x4)
    p = np.zeros(small_graph.num_ops, dtype=np.int64)
    assert sim.simulate(p.astype(float)).step_time_s == sim.simulate(p).step_time_s == sim.simulate(list(p)).step_time_s
    for bad, message in ((p + 0.5, r"placement\[0\] = 0.5: must be a whole device id"),
                         (np.full(small_graph.num_ops, np.nan), r"placement\[0\] = nan"),
                         (p.astype(str), "must be an array of integer device ids")):
        with pytest.raises(pl.InputError, match=message):
            sim.simulate(bad)
    with pytest.raises(pl.InputError, match=r"placements\[0\] = 1.5"):
        sim.simulate_batch(np.full((2, small_graph.num_ops), 1.5))
