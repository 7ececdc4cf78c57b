"""Measured op times carried by a graph: read from graph files, set from Python, used by the
simulator before the cost model, a device name over its kind."""

import json
import math

import pytest

import placelab as pl


def write_graph(tmp_path, measured):
    op = {"name": "a", "type": "MatMul", "kernel": {"class": "gemm", "m": 64, "n": 64, "k": 64, "batch": 1}}
    if measured is not None:
        op["measured_s"] = measured
    doc = {"format": "placelab-graph", "version": 2, "ops": [op, {"name": "b", "type": "NoOp"}],
           "edges": [{"src": "a", "dst": "b"}]}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    return path


def test_from_json_carries_measured_times(tmp_path, k80x4):
    g = pl.Graph.from_json(write_graph(tmp_path, {"gpu": 0.25, "gpu:1": 0.125}))
    assert g.measured_times == {"a": {"gpu": 0.25, "gpu:1": 0.125}}
    sim = pl.Simulator(g, k80x4)
    gpu0, gpu1 = k80x4.device_names.index("gpu:0"), k80x4.device_names.index("gpu:1")
    assert sim.op_time_s(0, gpu0) == 0.25
    assert sim.op_time_s(0, gpu1) == 0.125  # the device's own entry wins over its kind


def test_with_measured_times_returns_a_copy(tmp_path, k80x4):
    plain = pl.Graph.from_json(write_graph(tmp_path, None))
    assert plain.measured_times == {}
    g = plain.with_measured_times({"a": {"gpu": 0.5}, "b": {"cpu": 0.0, "gpu": 0.001}})
    assert plain.measured_times == {}
    assert g.measured_times == {"a": {"gpu": 0.5}, "b": {"cpu": 0.0, "gpu": 0.001}}
    gpu0 = k80x4.device_names.index("gpu:0")
    sim, before = pl.Simulator(g, k80x4), pl.Simulator(plain, k80x4)
    assert sim.op_time_s(0, gpu0) == 0.5
    assert sim.op_time_s(1, gpu0) == 0.001  # a noop honours it too
    assert before.op_time_s(0, gpu0) != 0.5
    r = sim.simulate([gpu0, gpu0])
    assert r.step_time_s == pytest.approx(0.501)
    assert g.with_measured_times({"a": {}}).measured_times == {"b": {"cpu": 0.0, "gpu": 0.001}}


@pytest.mark.parametrize("times, message", [
    ({"nope": {"gpu": 1.0}}, 'op "nope": the graph has no op of this name'),
    ({"a": {"gpu": math.nan}}, 'op "a": measured time for device key "gpu" = nan: must be finite'),
    ({"a": {"gpu": -1.0}}, 'op "a": measured time for device key "gpu" = -1: must be >= 0'),
    ({"a": {"gpu 0": 1.0}}, 'op "a": measured time for device key "gpu 0": must be a device kind'),
])
def test_with_measured_times_rejects_bad_input(tmp_path, times, message):
    g = pl.Graph.from_json(write_graph(tmp_path, None))
    with pytest.raises(pl.InputError, match=message.replace("(", r"\(")):
        g.with_measured_times(times)


def test_unknown_device_is_an_input_error_at_simulation(tmp_path, k80x4):
    g = pl.Graph.from_json(write_graph(tmp_path, {"gpu:9": 0.5}))
    with pytest.raises(pl.InputError, match='op "a": measured_s key "gpu:9": machine k80x4 has no device'):
        pl.Simulator(g, k80x4)


def test_bad_measured_time_in_a_file_names_file_line_and_field(tmp_path):
    with pytest.raises(pl.InputError, match=r"g\.json:1: /ops/0/measured_s/gpu = -1: must be >= 0"):
        pl.Graph.from_json(write_graph(tmp_path, {"gpu": -1}))
