"""placelab.torch.capture: a PyTorch training step as a placelab graph (docs/python.md, "Capturing a
PyTorch training step"). Every model is captured on the meta device, so batch and image size cost
nothing; the sizes below are small anyway so that the CPU capture in one test stays fast."""

import json
import os
import stat
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: apt-get install python3-torch)")

import placelab as pl  # noqa: E402
import placelab.torch as pt  # noqa: E402
from conftest import SOURCE_DIR  # noqa: E402
from torch_models import LstmLm, TinyGpt  # noqa: E402

nn = torch.nn
F = torch.nn.functional

KERNEL_FIELDS = {
    "noop": set(), "gemm": {"m", "n", "k", "batch"}, "elementwise": {"elements", "inputs"},
    "reduction": {"elements", "out"}, "embedding": {"rows", "dim", "lookups"}, "softmax": {"rows", "cols"},
    "copy": {"bytes"},
    **{c: {"n", "c", "h", "w", "k", "r", "s", "stride", "pad"}
       for c in ("conv2d", "conv2d_backprop_input", "conv2d_backprop_filter")},
}


@pytest.fixture(scope="module")
def torchvision():
    return pytest.importorskip("torchvision", reason="torchvision is not installed (Debian: python3-torchvision)")


def conv2d(**dims):
    return {"class": "conv2d", **dims}


def trainable(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def check_graph(g, model, slots):
    """The properties every capture has: parameter count, modules that resolve, program order,
    phase order, unique names, valid kernels, persistent bytes = parameters, buffers and the
    optimizer's `slots` copies of each parameter."""
    assert g.parameters == trainable(model)
    names = [op["name"] for op in g.ops]
    assert len(set(names)) == len(names)
    index = {n: i for i, n in enumerate(names)}
    for e in g.edges:
        assert index[e["src"]] < index[e["dst"]], e  # program order: producers come first
        assert e["bytes"] > 0
    phases = "".join(op["phase"][0] for op in g.ops)  # other, forward, backward, update
    assert re.fullmatch("o+f+b+u+", phases), phases[:200]
    for op in g.ops:
        if op["module"]:
            model.get_submodule(op["module"])  # raises when the path does not resolve
        assert op["call"] >= 0 and op["layer"] == -1
        kernel = dict(op["kernel"])
        assert set(kernel) - {"class"} == KERNEL_FIELDS[kernel.pop("class")], op
        assert all(isinstance(v, int) and v >= 0 for v in kernel.values()), op
    variables = [op for op in g.ops if op["type"] == "VariableV2"]
    tensors = dict(model.named_parameters())
    tensors.update(model.named_buffers())
    assert {op["name"]: op["persistent_bytes"] for op in variables} == {
        path: t.numel() * t.element_size() for path, t in tensors.items()}
    params_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    updates = [op for op in g.ops if op["phase"] == "update"]
    assert len(updates) == sum(1 for p in model.parameters() if p.requires_grad)
    assert sum(op["persistent_bytes"] for op in updates) == slots * params_bytes
    return index


def count(g, type_, phase=None):
    return sum(1 for op in g.ops if op["type"] == type_ and (phase is None or op["phase"] == phase))


# --- models -------------------------------------------------------------------------------------


def test_resnet50_is_captured_with_modules_calls_and_the_zoo_s_op_types(torchvision):
    model = torchvision.models.resnet50()
    x, y = torch.randn(2, 3, 64, 64), torch.randint(0, 1000, (2,))
    g = pt.capture(model, (x,), nn.CrossEntropyLoss(), y, "momentum")
    check_graph(g, model, slots=1)  # SGD with momentum: one buffer per parameter
    convs = [path for path, m in model.named_modules() if isinstance(m, nn.Conv2d)]
    filters = [op["module"] for op in g.ops if op["type"] == "Conv2DBackpropFilter"]
    assert sorted(filters) == sorted(convs)  # one filter gradient per convolution
    assert count(g, "Conv2DBackpropInput") == len(convs) - 1  # not for the image
    assert count(g, "Conv2D", "forward") == len(convs)
    # Bottleneck.forward calls self.relu three times; each call's ops carry its index.
    relu = [(op["phase"], op["call"]) for op in g.ops if op["module"] == "layer1.0.relu"]
    assert [c for p, c in relu if p == "forward"] == [0, 1, 2]
    assert [c for p, c in relu if p == "backward" and True] == [2, 2, 1, 0]  # the residual sum, then 2, 1, 0
    # The residual sums of the backward belong to the block's last relu, which produced the sum's tensor.
    assert all(op["module"].endswith("relu") or op["module"] == "maxpool" for op in g.ops if op["type"] == "AddN")
    stem = next(op for op in g.ops if op["name"] == "conv1/Conv2D")
    assert stem["kernel"] == conv2d(n=2, c=3, h=64, w=64, k=64, r=7, s=7, stride=2, pad=3)
    assert stem["output_bytes"] == 2 * 64 * 32 * 32 * 4
    assert {"IteratorGetNext", "MaxPool", "AvgPool", "MatMul", "LogSoftmax", "NllLoss", "FusedBatchNorm", "Relu",
            "Add"} <= {op["type"] for op in g.ops if op["phase"] == "forward"}
    assert {"NllLossGrad", "LogSoftmaxGrad", "AvgPoolGrad", "MaxPoolGrad", "FusedBatchNormGrad", "ReluGrad",
            "MatMul", "Sum"} <= {op["type"] for op in g.ops if op["phase"] == "backward"}
    # The loss is the model's (module ""), forward and backward.
    assert {op["phase"] for op in g.ops if op["type"] in ("NllLoss", "NllLossGrad")} == {"forward", "backward"}
    assert all(op["module"] == "" for op in g.ops if op["type"] in ("NllLoss", "NllLossGrad", "LogSoftmax"))
    # An update reads its parameter and its gradient, colocated with the parameter.
    update = next(op for op in g.ops if op["name"] == "fc.weight/ApplyMomentum")
    assert update["module"] == "fc" and update["colocation"] == "fc.weight"
    assert update["kernel"] == {"class": "elementwise", "elements": 2048 * 1000, "inputs": 3}
    into = {e["src"] for e in g.edges if e["dst"] == update["name"]}
    assert into == {"fc.weight", "gradients/fc/MatMul_1"}


def test_inception_v3_with_its_auxiliary_head(torchvision):
    model = torchvision.models.inception_v3(init_weights=False, aux_logits=True).train()
    t = torch.randint(0, 1000, (2,))

    def loss(out):
        return F.cross_entropy(out.logits, t) + 0.4 * F.cross_entropy(out.aux_logits, t)

    # 299 is the smallest image the auxiliary head accepts (its 5x5 convolution needs Mixed_6e at 17x17).
    g = pt.capture(model, (torch.randn(2, 3, 299, 299),), loss, optimizer="adam")
    check_graph(g, model, slots=2)  # Adam: two moments per parameter
    modules = {op["module"] for op in g.ops if op["phase"] == "backward"}
    assert {"AuxLogits.conv1.conv", "AuxLogits.fc", "Mixed_7c.branch_pool.conv"} <= modules
    assert count(g, "NllLoss") == 2 and count(g, "Conv2DBackpropFilter") == count(g, "Conv2D")
    # A 1x7 convolution with padding (0, 3) is the padded input with pad 0, as the zoo's builder writes it.
    conv = next(op for op in g.ops if op["name"] == "Mixed_6b.branch7x7_2.conv/Conv2D")
    assert conv["kernel"] == conv2d(n=2, c=128, h=17, w=23, k=128, r=1, s=7, stride=1, pad=0)


def test_an_image_too_small_for_the_aux_head_is_an_error_not_an_empty_convolution(torchvision):
    # PyTorch 1.13's meta convolution does not check the kernel against the input; the rule does.
    model = torchvision.models.inception_v3(init_weights=False, aux_logits=True).train()
    with pytest.raises(pl.InputError, match=r"aten\.convolution in module 'AuxLogits\.conv1\.conv'.*smaller than"):
        pt.capture(model, (torch.randn(2, 3, 283, 283),), lambda out: out.logits.sum() + out.aux_logits.sum())


def test_transformer_encoder():
    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128)
    model = nn.TransformerEncoder(layer, num_layers=2).train()
    g = pt.capture(model, (torch.randn(10, 2, 64),), lambda out: out.pow(2).mean(), optimizer="adamw")
    check_graph(g, model, slots=2)
    assert count(g, "LayerNorm", "forward") == 4 and count(g, "LayerNormGrad", "backward") == 4
    assert count(g, "Softmax", "forward") == 2 and count(g, "SoftmaxGrad", "backward") == 2
    bmm = [op for op in g.ops if op["type"] == "BatchMatMul" and op["phase"] == "forward"]
    assert [op["kernel"] for op in bmm[:2]] == [  # scores, then the weighted values: 2 x 4 heads of 10 x 16
        {"class": "gemm", "m": 10, "n": 10, "k": 16, "batch": 8},
        {"class": "gemm", "m": 10, "n": 16, "k": 10, "batch": 8}]
    assert all(op["module"] == "layers.0.self_attn" for op in bmm[:2])
    assert {op["module"] for op in g.ops if op["type"] == "Softmax"} == {"layers.0.self_attn", "layers.1.self_attn"}


def test_lstm_language_model():
    model = LstmLm().train()
    seq, batch = 6, 3
    tokens, targets = torch.randint(0, 50, (seq, batch)), torch.randint(0, 50, (seq * batch,))
    g = pt.capture(model, tokens, nn.CrossEntropyLoss(), targets, optimizer="adam")
    check_graph(g, model, slots=2)
    lookup = next(op for op in g.ops if op["type"] == "GatherV2")
    assert lookup["kernel"] == {"class": "embedding", "rows": 50, "dim": 32, "lookups": seq * batch}
    grad = next(op for op in g.ops if op["type"] == "EmbeddingGrad")
    assert grad["module"] == "embedding" and grad["kernel"] == lookup["kernel"]
    # PyTorch's CPU LSTM runs its gates step by step; every such op is the LSTM's.
    lstm = [op for op in g.ops if op["module"] == "lstm"]
    assert {"MatMul", "Sigmoid", "Tanh", "Mul"} <= {op["type"] for op in lstm if op["phase"] == "forward"}
    assert {"SigmoidGrad", "TanhGrad", "MatMul"} <= {op["type"] for op in lstm if op["phase"] == "backward"}


def test_gpt_style_decoder_with_tied_embeddings():
    model = TinyGpt().train()
    idx, targets = torch.randint(0, 97, (2, 12)), torch.randint(0, 97, (2, 12))
    def loss(logits, t):
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), t.view(-1))

    g = pt.capture(model, (idx,), loss, targets, "adamw")
    check_graph(g, model, slots=2)
    # The tied weight is one variable and one update; its two gradients (lookup and LM head) are
    # summed for the variable's owner.
    assert [op["name"] for op in g.ops if op["name"].startswith("tok.weight")] == ["tok.weight", "tok.weight/ApplyAdam"]
    sums = [op for op in g.ops if op["type"] == "AddN" and op["module"] == "tok"]
    assert len(sums) == 1
    assert {e["src"] for e in g.edges if e["dst"] == "tok.weight/ApplyAdam"} == {"tok.weight", sums[0]["name"]}
    assert count(g, "Range") == 1 and count(g, "Gelu") == 2 and count(g, "GeluGrad") == 2
    assert {op["module"] for op in g.ops if op["type"] == "MaskedFill"} == {"blocks.0.attn", "blocks.1.attn"}
    # q and k are transposed views of thirds of the qkv output; matmul copies each (aten::clone)
    # before its bmm, and each copy reads its third of the output through its edge.
    scores = next(op for op in g.ops if op["type"] == "BatchMatMul" and op["module"] == "blocks.0.attn")
    copies = [e["src"] for e in g.edges if e["dst"] == scores["name"]]
    assert [op["type"] for op in g.ops if op["name"] in copies] == ["Identity", "Identity"]
    third = 2 * 12 * 32 * 4  # batch x tokens x dim floats
    assert [(e["src"], e["bytes"]) for e in g.edges if e["dst"] in copies] == [("blocks.0.attn.qkv/MatMul", third)] * 2


def test_a_module_called_twice_and_one_called_never():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)
            self.unused = nn.Linear(8, 8)

        def forward(self, x):
            return self.fc(torch.relu(self.fc(x)))

    model = Net()
    g = pt.capture(model, torch.randn(4, 8), lambda out: out.sum(), optimizer="sgd")
    assert g.parameters == trainable(model)
    calls = [(op["phase"], op["type"], op["call"]) for op in g.ops if op["module"] == "fc"]
    assert calls == [("other", "VariableV2", 0), ("other", "VariableV2", 0),
                     ("forward", "MatMul", 0), ("forward", "MatMul", 1),
                     ("backward", "MatMul", 1), ("backward", "MatMul", 1), ("backward", "Sum", 1),
                     ("backward", "MatMul", 0), ("backward", "Sum", 0),
                     ("backward", "AddN", 0), ("backward", "AddN", 0),  # both calls' weight and bias gradients
                     ("update", "ApplyGradientDescent", 0), ("update", "ApplyGradientDescent", 0)]
    # The functional relu between the two calls is the root module's.
    assert [op["module"] for op in g.ops if op["type"] in ("Relu", "ReluGrad")] == ["", ""]
    # No gradient reaches `unused`: its parameters are variables without updates.
    assert not any(op["module"] == "unused" and op["phase"] != "other" for op in g.ops)


def test_meta_and_cpu_captures_are_the_same_graph():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1, groups=1)
            self.dw = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8)  # depthwise, dilated
            self.bn = nn.BatchNorm2d(8)
            self.drop = nn.Dropout(0.5)
            self.fc = nn.Linear(8, 5)

        def forward(self, x):
            x = self.drop(F.relu(self.bn(self.dw(self.conv(x)))))
            return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))

    model = Net().train()
    args = (torch.randn(2, 3, 12, 12),), nn.CrossEntropyLoss(), torch.randint(0, 5, (2,)), "rmsprop"
    meta, cpu = pt.capture(model, *args), pt.capture(model, *args, device="cpu")
    assert meta.ops == cpu.ops and meta.edges == cpu.edges
    check_graph(meta, model, slots=2)  # RMSProp with momentum: mean square and momentum buffer
    assert {op["type"] for op in meta.ops if op["phase"] == "update"} == {"ApplyRMSProp"}
    dw = next(op for op in meta.ops if op["name"] == "dw/Conv2D")
    # Grouped and dilated: the signature's effective 5x5 filter gives the output size, the FLOPs
    # are the 3x3 depthwise work: 2 * n * k * (c / groups) * r * s * ho * wo.
    assert dw["kernel"]["r"] == 5 and dw["flops"] == 2 * 2 * 8 * 1 * 3 * 3 * 12 * 12
    assert "flops" not in next(op for op in meta.ops if op["name"] == "conv/Conv2D")


def test_the_users_model_and_optimizer_are_not_changed():
    model = nn.Linear(4, 3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    g = pt.capture(model, torch.randn(2, 4), lambda out: out.sum(), optimizer=opt, device="cpu")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert model.weight.grad is None and not opt.state
    assert [op["type"] for op in g.ops if op["phase"] == "update"] == ["ApplyAdam", "ApplyAdam"]


# --- errors -------------------------------------------------------------------------------------


def test_an_op_without_a_rule_is_named_with_its_module():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return torch.cumsum(self.fc(x), dim=1)

    with pytest.raises(pl.InputError, match=r"aten\.cumsum in module '' \(forward\): no capture rule"):
        pt.capture(Net(), torch.randn(2, 4), lambda out: out.sum())


def test_a_3d_convolution_is_named_with_its_module():
    model = nn.Sequential(nn.Conv3d(1, 2, 3), nn.Flatten())
    message = r"aten\.convolution in module '0' \(forward\): a 3-D convolution cannot be captured"
    with pytest.raises(pl.InputError, match=message):
        pt.capture(model, torch.randn(1, 1, 4, 4, 4), lambda out: out.sum())


def test_another_librarys_op_is_named_with_its_namespace(torchvision):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):
            return torchvision.ops.roi_align(self.conv(x), torch.tensor([[0, 0.0, 0.0, 4.0, 4.0]]), output_size=2)

    with pytest.raises(pl.InputError, match=r"^torchvision\.roi_align in module '' \(forward\): no capture rule"):
        pt.capture(Net(), torch.randn(1, 3, 8, 8), lambda out: out.sum())


def test_bad_arguments_are_input_errors():
    model = nn.Linear(4, 2)
    x = torch.randn(3, 4)
    with pytest.raises(pl.InputError, match="loss returned a tensor of shape \\[3, 2\\]: must be a scalar tensor"):
        pt.capture(model, x, lambda out: out)
    with pytest.raises(pl.InputError, match="optimizer = 'lbfgs': must be one of sgd, momentum, rmsprop, adam, adamw "):
        pt.capture(model, x, lambda out: out.sum(), optimizer="lbfgs")
    other = torch.optim.SGD(nn.Linear(4, 2).parameters(), lr=0.1)
    with pytest.raises(pl.InputError, match=r"optimizer.param_groups\[0\] holds a tensor of shape \[2, 4\]"):
        pt.capture(model, x, lambda out: out.sum(), optimizer=other)
    with pytest.raises(pl.InputError, match="reads tensor values.*device='cpu'"):
        pt.capture(model, x, lambda out: out.sum() * (2 if out.sum().item() > 0 else 1))


# --- the file -----------------------------------------------------------------------------------


def small_capture():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))
    return pt.capture(model, torch.randn(2, 3, 8, 8), nn.CrossEntropyLoss(), torch.randint(0, 10, (2,)), name="tiny")


def test_save_writes_version_3_atomically(tmp_path):
    g = small_capture()
    path = tmp_path / "tiny.json"
    g.save(path)
    assert os.listdir(tmp_path) == ["tiny.json"]  # no temporary file left behind
    data = json.loads(path.read_text())
    assert data == json.loads(g.to_json())
    assert {k: data[k] for k in ("format", "version", "name", "execution", "parameters")} == {
        "format": "placelab-graph", "version": 3, "name": "tiny", "execution": "eager", "parameters": g.parameters}
    assert data["ops"] == g.ops and data["edges"] == g.edges and g.num_ops == len(data["ops"])
    # The file gets the mode any new file gets (the umask's), not the temporary file's private 0600.
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~umask


def test_command_line_captures_a_torchvision_model(tmp_path, torchvision):
    out = tmp_path / "r18.json"
    command = [sys.executable, "-m", "placelab.torch", "capture", "--model", "torchvision:resnet18", "--batch", "2",
               "--image", "64", "--optimizer", "adam", "-o", str(out)]
    r = subprocess.run(command, capture_output=True, text=True, check=True)
    data = json.loads(out.read_text())
    assert data["parameters"] == 11689512 and data["name"] == "resnet18:batch=2,image=64"
    assert f"{out}: {len(data['ops'])} ops" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "placelab.torch", "capture", "--model", "torchvision:nosuch", "-o",
                          str(out)], capture_output=True, text=True)
    assert bad.returncode == 2 and "torchvision.models has no model 'nosuch'" in bad.stderr


def test_the_cpp_reader_takes_the_capture_as_it_is():
    g = small_capture()
    graph = g.to_graph()  # written as version 3 and read back by the C++ reader, which validates it
    assert graph.op_names == [op["name"] for op in g.ops] and graph.op_types == [op["type"] for op in g.ops]
    assert (graph.num_edges, graph.parameters) == (g.num_edges, g.parameters)
    assert graph.total_flops > 0


def test_placelab_reads_the_capture(tmp_path, cli):
    g = small_capture()
    path = tmp_path / "tiny.json"
    g.save(path)
    r = subprocess.run([cli, "inspect", str(path), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    modules = {op["module"] for op in g.ops} - {""}
    assert (summary["execution"], summary["ops"], summary["edges"], summary["parameters"], summary["modules"]) == (
        "eager", g.num_ops, g.num_edges, g.parameters, len(modules))


def test_the_committed_transformer_graph_is_what_capture_writes(tmp_path):
    """scenarios/graphs/transformer-encoder-pytorch.json is reproducible: its script captures it
    again, byte for byte (the scenario's figures in docs/reproductions.md depend on it)."""
    script = SOURCE_DIR / "scripts" / "capture-transformer-encoder.py"
    out = tmp_path / "t.json"
    subprocess.run([sys.executable, str(script), str(out)], check=True, capture_output=True, text=True)
    committed = SOURCE_DIR / "scenarios" / "graphs" / "transformer-encoder-pytorch.json"
    assert out.read_text() == committed.read_text()
