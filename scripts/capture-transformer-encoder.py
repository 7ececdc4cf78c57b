#!/usr/bin/env python3
# The small Transformer: nn.TransformerEncoder (4 layers, d_model 256, 8 heads, feed-forward
# 1024) + a Linear(256, 2048) token head, 3.69 M parameters; sequence 128, batch 32, cross entropy,
# Adam. Captured as PyTorch runs its training step; writes the graph to the path given:
#   PYTHONPATH=build/python /usr/bin/python3 scripts/capture-transformer-encoder.py scenarios/graphs/transformer-encoder-pytorch.json
import sys, torch, placelab.torch as pt
torch.manual_seed(0)
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=4)
        self.head = torch.nn.Linear(256, 2048)
    def forward(self, x):
        return self.head(self.encoder(x))
model = Model()
x = torch.randn(128, 32, 256)
y = torch.randint(0, 2048, (128, 32))
g = pt.capture(model, example_inputs=(x,), loss=lambda out, t: torch.nn.functional.cross_entropy(out.reshape(-1, 2048), t.reshape(-1)),
               target=y, optimizer="adam")
g.save(sys.argv[1])
print(g.num_ops, g.parameters)
