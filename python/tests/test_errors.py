"""Bad input raises placelab.InputError (a ValueError) with the C++ message: file:line, field, rule."""

import numpy as np
import pytest

import placelab as pl


def test_input_error_is_a_value_error():
    assert issubclass(pl.InputError, ValueError)
    assert issubclass(pl.InputError, pl.Error)
    assert issubclass(pl.Error, RuntimeError)


def test_unknown_model_names_it():
    with pytest.raises(pl.InputError, match="no_such_model"):
        pl.Graph.from_model("no_such_model:batch=3")


def test_unknown_preset_lists_presets():
    with pytest.raises(pl.InputError, match="k80x4"):
        pl.Machine.preset("k81x9")


def test_bad_machine_file_names_file_line_and_field(tmp_path):
    text = pl_machine_yaml().replace("memory_bytes: 12000000000", "memory_bytes: -4", 1)
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(pl.InputError, match=r"bad\.yaml:\d+: .*memory_bytes = -4: must be > 0"):
        pl.Machine.from_yaml(path)


def pl_machine_yaml():
    return (
        "name: two\n"
        "devices:\n"
        "  - {name: cpu:0, kind: cpu, peak_flops: 1.0e11, memory_bandwidth_Bps: 5.0e10, memory_bytes: 12000000000, streams: 1, launch_overhead_s: 5.0e-6}\n"
        "  - {name: gpu:0, kind: gpu, peak_flops: 1.0e13, memory_bandwidth_Bps: 5.0e11, memory_bytes: 12000000000, streams: 1, launch_overhead_s: 5.0e-6}\n"
        "links:\n"
        "  - {a: cpu:0, b: gpu:0, kind: pcie, bandwidth_Bps: 1.0e10, latency_s: 1.0e-5}\n"
    )


def test_machine_file_loads(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(pl_machine_yaml())
    m = pl.Machine.from_yaml(path)
    assert m.name == "two" and m.device_names == ["cpu:0", "gpu:0"]


def test_bad_graph_file_names_file_and_line(tmp_path):
    path = tmp_path / "g.json"
    path.write_text('{"ops": [\n  {"name": "a", "type": "MatMul", "flops": -1}\n]}\n')
    with pytest.raises(pl.InputError, match=r"g\.json:\d+"):
        pl.Graph.from_json(path)


def test_bad_placements(small_graph):
    m = pl.Machine.preset("k80x4")
    sim = pl.Simulator(small_graph, m)
    with pytest.raises(pl.InputError, match="one per op"):
        sim.simulate(np.zeros(small_graph.num_ops + 1, dtype=np.int64))
    bad = np.zeros(small_graph.num_ops, dtype=np.int64)
    bad[2] = 9
    with pytest.raises(pl.InputError, match=r"placement\[2\] = 9: must be a device id < 5"):
        sim.simulate(bad)
    with pytest.raises(pl.InputError, match=r"placements\[1, 2\] = 9"):
        sim.simulate_batch(np.stack([np.zeros_like(bad), bad]))
    with pytest.raises(pl.InputError, match="unknown_rule"):
        pl.baseline(small_graph, m, "unknown_rule")
    with pytest.raises(pl.InputError):
        pl.grouping(small_graph, "no_such_grouping")
