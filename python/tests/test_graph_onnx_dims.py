"""Graph.from_onnx with symbolic dimensions sized by name, as `placelab import --dim` does."""
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
