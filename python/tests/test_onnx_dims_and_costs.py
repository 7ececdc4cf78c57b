"""Graph.from_onnx with symbolic dimensions sized by name (as `placelab import --dim`), and the
machine's cost model from Python: op costs with their source, copy times."""
import placelab as pl
import pytest


def test_from_onnx_sizes_symbolic_dimensions_by_name():
    from conftest import SOURCE_DIR

    path = SOURCE_DIR / "tests" / "data" / "onnx" / "tiny_attention.onnx"
    # x is [S, N, 8] with both dimensions symbolic: without sizes the import names what is missing.
    with pytest.raises(pl.InputError):
        pl.Graph.from_onnx(path)
    small = pl.Graph.from_onnx(path, dims={"S": 4, "N": 2})
    large = pl.Graph.from_onnx(path, dims={"S": 16, "N": 2})
    assert small.parameters == large.parameters == 378
    assert large.total_flops > small.total_flops


def test_machine_prices_ops_and_copies_as_the_simulator_does():
    g = pl.Graph.from_model("cifar10_cnn")
    m = pl.Machine.preset("k80x2")
    sim = pl.Simulator(g, m)
    for op in (0, g.num_ops // 2, g.num_ops - 1):
        seconds, source = m.op_cost(g, op, 1)
        assert seconds == sim.op_time_s(op, 1)
        assert source == "analytic"
    timed = g.with_measured_times({g.op_names[0]: {"gpu": 0.25}})
    assert m.op_cost(timed, 0, 1) == (0.25, "graph")
    assert m.transfer_time_s(0, 1, 1) == 0
    assert m.transfer_time_s(1 << 20, 1, 2) > m.transfer_time_s(1 << 10, 1, 2) > 0
    with pytest.raises(pl.InputError):
        m.op_cost(g, g.num_ops, 1)
    with pytest.raises(pl.InputError):
        m.transfer_time_s(-1, 1, 2)
