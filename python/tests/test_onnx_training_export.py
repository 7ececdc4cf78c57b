"""ONNX exports in training mode without constant folding (issue "PyTorch as it runs", part 5):
torch.onnx computes nn.LSTM's and nn.GRU's weights from the initializers at run time (the gates
reordered by Slice, joined by Concat, given a direction axis by Unsqueeze). The importer folds
those into the constants the recurrent nodes read instead of refusing them, and the graph trains
exactly torch's parameters."""

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt-get install python3-torch)")
pytest.importorskip("onnx", reason="torch.onnx.export needs python3-onnx")

import placelab as pl  # noqa: E402


class _LM(torch.nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.rnn = rnn
        self.fc = torch.nn.Linear(32, 50)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.fc(h)


@pytest.mark.parametrize("rnn", ["lstm", "gru"])
def test_training_mode_export_without_constant_folding_imports(tmp_path, rnn):
    torch.manual_seed(0)
    layer = torch.nn.LSTM(16, 32, num_layers=2) if rnn == "lstm" else torch.nn.GRU(16, 32, num_layers=2)
    model = _LM(layer).train()
    path = tmp_path / f"{rnn}.onnx"
    torch.onnx.export(model, (torch.randint(0, 50, (12, 4)),), str(path), opset_version=14,
                      do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
    g = pl.Graph.from_onnx(path)
    assert g.parameters == sum(p.numel() for p in model.parameters())
    assert g.num_ops > 0
