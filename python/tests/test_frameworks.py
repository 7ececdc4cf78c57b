"""Placements applied in PyTorch: torch_device, apply_module_map and `placelab export-placement`."""

import json
import subprocess

import pytest

import placelab as pl


def test_torch_device_spells_placelab_devices_as_torch_does():
    assert pl.torch_device("gpu:0") == "cuda:0"
    assert pl.torch_device("gpu:12") == "cuda:12"
    assert pl.torch_device("cpu:0") == "cpu"
    assert pl.torch_device("cuda:1") == "cuda:1"  # torch's own names pass through
    assert pl.torch_device("meta") == "meta"


def tiny_resnet(torch):
    """The modules of tests/data/onnx/tiny_resnet.onnx: stem, layer1 = Sequential(Block), avgpool, fc."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(4)
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.relu(self.bn1(self.conv1(x))) + x

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 4, 3, padding=1, bias=False)
            self.layer1 = nn.Sequential(Block())
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(4, 10)

        def forward(self, x):
            return self.fc(torch.flatten(self.avgpool(self.layer1(self.stem(x))), 1))

    return Net()


def test_apply_module_map_moves_parents_then_children():
    torch = pytest.importorskip("torch", reason="python3-torch is not installed")
    model = tiny_resnet(torch)
    # The meta device stands in for a GPU: a machine without one can still see every move. Meta
    # tensors cannot be copied back, so the parent's move applied after its child's would fail.
    returned = pl.apply_module_map(model, {"layer1.0.conv1": "meta", "layer1.0": "cpu:0", "fc": "meta"})
    assert returned is model
    devices = {name: p.device.type for name, p in model.named_parameters()}
    assert devices["layer1.0.conv1.weight"] == "meta"  # the child's entry overrides its parent's
    assert devices["layer1.0.bn1.weight"] == "cpu"
    assert devices["fc.weight"] == devices["fc.bias"] == "meta" and devices["stem.weight"] == "cpu"
    pl.apply_module_map(model, {"layer1": "meta"})
    assert model.layer1[0].bn1.running_mean.device.type == "meta"  # buffers move too
    with pytest.raises(pl.InputError, match="layer2.0: Net has no submodule"):
        pl.apply_module_map(model, {"layer2.0": "cpu"})


def test_export_placement_names_the_modules_of_a_torch_export(cli, tmp_path):
    torch = pytest.importorskip("torch", reason="python3-torch is not installed")
    model = tiny_resnet(torch).eval()  # eval: batch norm's running statistics are not updated by the trace
    onnx_file = tmp_path / "net.onnx"
    torch.onnx.export(model, torch.zeros(2, 3, 8, 8), str(onnx_file), opset_version=13, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE, input_names=["x"],
                      dynamic_axes={"x": {0: "N"}})
    graph_file = tmp_path / "net.json"
    subprocess.run([cli, "import", str(onnx_file), "--batch", "8", "-o", str(graph_file)], check=True,
                   capture_output=True)
    g = pl.Graph.from_json(graph_file)
    placement = {name: ("gpu:1" if "/bn1/" in name else "gpu:0") for name in g.op_names}
    placement_file = tmp_path / "best_placement.json"
    placement_file.write_text(json.dumps({"placement": placement}))
    modules_file = tmp_path / "modules.json"
    subprocess.run([cli, "export-placement", str(placement_file), "--format", "torch", "--onnx", str(onnx_file),
                    "-o", str(modules_file)], check=True, capture_output=True)
    mapping = json.loads(modules_file.read_text())
    assert set(mapping) <= set(dict(model.named_modules()))
    assert mapping["layer1.0.bn1"] == "cuda:1"
    assert mapping["layer1.0.conv1"] == mapping["stem"] == mapping["fc"] == "cuda:0"
