"""The simulator from Python: the same numbers as the command line, batches equal to single runs."""

import json
import subprocess

import numpy as np
import pytest

import placelab as pl


def cli_step_time(cli, model, machine, placement):
    out = subprocess.run([cli, "simulate", "--model", model, "--machine", machine, "--placement", str(placement),
                          "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def test_import_exposes_registries():
    assert pl.__version__
    assert "k80x4" in pl.machines()
    names = [e["name"] for e in pl.learners()]
    assert "post" in names and "reinforce" in names
    post = next(e for e in pl.learners() if e["name"] == "post")
    assert all({"key", "kind", "default", "rule", "help", "choices"} <= set(o) for o in post["options"])
    assert "heft" in [b["name"] for b in pl.baselines()]
    assert "scope_units" in pl.groupings()
    assert "inception_v3" in [m["name"] for m in pl.models()]


def test_graph_and_machine(inception, k80x4):
    assert inception.num_ops == len(inception.op_names) == len(inception.op_types) > 1000
    assert inception.label.startswith("inception_v3")
    assert inception.parameters and inception.parameters > 20_000_000
    assert k80x4.num_devices == 5 and k80x4.device_kinds.count("gpu") == 4
    assert k80x4.memory_bytes.dtype == np.int64 and not k80x4.calibrated


@pytest.mark.parametrize("rule", ["single_gpu", "random:3", "expert", "round_robin"])
def test_simulate_equals_cli_for_rules(cli, inception, k80x4, inception_sim, rule):
    placement = pl.baseline(inception, k80x4, rule)
    r = inception_sim.simulate(placement)
    expected = cli_step_time(cli, "inception_v3:batch=32", "k80x4", rule)
    assert r.step_time_s == expected["step_time_s"]  # bit for bit: JSON keeps 17 digits
    assert r.oom == expected["oom"]
    assert r.busy_s.tolist() == [d["busy_s"] for d in expected["devices"]]
    assert r.peak_memory_bytes.tolist() == [d["peak_memory_bytes"] for d in expected["devices"]]


def test_simulate_equals_cli_for_a_placement_file(cli, tmp_path, inception, k80x4, inception_sim):
    placement = np.random.default_rng(7).integers(0, k80x4.num_devices, inception.num_ops)
    names = k80x4.device_names
    path = tmp_path / "placement.json"
    path.write_text(json.dumps({"devices": [names[d] for d in placement]}))
    expected = cli_step_time(cli, "inception_v3:batch=32", "k80x4", path)
    r = inception_sim.simulate(placement)
    assert r.step_time_s == expected["step_time_s"]
    assert r.oom == expected["oom"]
    assert r.transfers == expected["transfers"]


def test_simulate_batch_equals_simulate(inception, k80x4, inception_sim):
    rng = np.random.default_rng(1)
    batch = rng.integers(0, k80x4.num_devices, (24, inception.num_ops))
    batch[0] = pl.baseline(inception, k80x4, "single_gpu")
    times1, oom1 = inception_sim.simulate_batch(batch, threads=1)
    times2, oom2 = inception_sim.simulate_batch(batch.astype(np.int32), threads=2)
    assert times1.dtype == np.float64 and oom1.dtype == np.bool_
    assert times1.tobytes() == times2.tobytes() and (oom1 == oom2).all()
    for k in range(len(batch)):
        r = inception_sim.simulate(batch[k])
        assert r.step_time_s == times1[k] and r.oom == oom1[k]


def test_lower_bound_holds(inception, k80x4, inception_sim):
    bound = pl.lower_bound(inception, inception_sim)
    heft = inception_sim.simulate(pl.baseline(inception, k80x4, "heft"))
    assert 0 < bound.step_s <= heft.step_time_s
    assert bound.step_s == max(bound.critical_path_s, bound.work_s)


def test_grouping_and_baseline(inception, k80x4):
    groups = pl.grouping(inception, "scope_units")
    assert groups.shape == (inception.num_ops,) and groups.dtype == np.uint32
    assert groups.min() == 0 and len(np.unique(groups)) == groups.max() + 1
    heft = pl.baseline(inception, k80x4, "heft")
    assert heft.shape == (inception.num_ops,) and heft.dtype == np.int32
    assert ((heft >= 0) & (heft < k80x4.num_devices)).all()
