#!/usr/bin/python3
"""Generates the ONNX test fixtures of placelab's ONNX importer.

  /usr/bin/python3 scripts/make-onnx-fixtures.py                  # tests/data/onnx/tiny_cnn.onnx, tiny_resnet.onnx
  /usr/bin/python3 scripts/make-onnx-fixtures.py --resnet50 /tmp/resnet50.onnx
  /usr/bin/python3 scripts/make-onnx-fixtures.py --inception-v3 /tmp/inception_v3.onnx
  /usr/bin/python3 scripts/make-onnx-fixtures.py --transformer /tmp/transformer.onnx
  /usr/bin/python3 scripts/make-onnx-fixtures.py --causal-transformer /tmp/causal_transformer.onnx
  /usr/bin/python3 scripts/make-onnx-fixtures.py --bert-style /tmp/bert_style.onnx
  /usr/bin/python3 scripts/make-onnx-fixtures.py --lstm-lm /tmp/lstm_lm.onnx
  /usr/bin/python3 scripts/make-onnx-fixtures.py --gru-lm /tmp/gru_lm.onnx

The default fixtures are built with python3-onnx's helper API (no torch), so CI can regenerate them.
The other options export real models with torch.onnx.export (PyTorch 1.13) for the local tests
that read them (PLACELAB_RESNET50_ONNX, PLACELAB_INCEPTION_V3_ONNX, PLACELAB_TRANSFORMER_ONNX,
PLACELAB_CAUSAL_TRANSFORMER_ONNX, PLACELAB_BERT_STYLE_ONNX, PLACELAB_LSTM_LM_ONNX, PLACELAB_GRU_LM_ONNX) and print torch's parameter count; --resnet50 and --inception-v3 need
python3-torchvision too. Run with Debian's /usr/bin/python3: the pyenv python3 lacks these modules.
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def classifier_model(name, nodes, inits):
    """The checked opset-13 model of `nodes`: input x [N,3,8,8] (N symbolic), output logits [N,10]."""
    graph = helper.make_graph(nodes, name,
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
    model = helper.make_model(graph, producer_name="placelab make-onnx-fixtures",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def tiny_cnn():
    """The network of tiny_cnn() in tests/models/onnx_import_test.cpp, with a symbolic batch:
    x [N,3,8,8] -> Conv 4x3x3x3 + bias, pad 1 -> BatchNormalization -> Relu -> MaxPool 2/2 ->
    GlobalAveragePool -> Flatten -> Gemm [10,4]^T + [10]. 170 trainable parameters."""
    rng = np.random.default_rng(0)

    def init(name, *dims):
        return numpy_helper.from_array(rng.standard_normal(dims).astype(np.float32), name)

    inits = [init("conv.w", 4, 3, 3, 3), init("conv.b", 4), init("bn.scale", 4), init("bn.bias", 4),
             init("bn.mean", 4), numpy_helper.from_array(np.ones(4, np.float32), "bn.var"),
             init("fc.w", 10, 4), init("fc.b", 10)]
    nodes = [
        helper.make_node("Conv", ["x", "conv.w", "conv.b"], ["c"], name="/conv/Conv", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["bn"],
                         name="/bn/BatchNormalization"),
        helper.make_node("Relu", ["bn"], ["r"], name="/relu/Relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"], name="/gap/GlobalAveragePool"),
        helper.make_node("Flatten", ["g"], ["f"], name="/flatten/Flatten"),
        helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="/fc/Gemm", transB=1),
    ]
    return classifier_model("tiny_cnn", nodes, inits)


def tiny_resnet():
    """A stem convolution, one residual block and a classifier, its nodes named as torch.onnx.export
    (PyTorch 1.13) names them for nn.Modules `stem`, `layer1 = Sequential(Block())` with `conv1`,
    `bn1`, `relu`, and `fc`: "/layer1/layer1.0/conv1/Conv" and so on. For export-placement's module
    paths (tests/apps/cli_test.cpp). x [N,3,8,8] -> Conv 4x3x3x3 -> (Conv 4x4x3x3 -> BN -> Relu) + ->
    GlobalAveragePool -> Flatten -> Gemm [10,4]^T + [10]."""
    rng = np.random.default_rng(1)

    def init(name, *dims):
        return numpy_helper.from_array(rng.standard_normal(dims).astype(np.float32), name)

    b = "layer1.0."
    inits = [init("stem.weight", 4, 3, 3, 3), init(b + "conv1.weight", 4, 4, 3, 3), init(b + "bn1.weight", 4),
             init(b + "bn1.bias", 4), init(b + "bn1.running_mean", 4),
             numpy_helper.from_array(np.ones(4, np.float32), b + "bn1.running_var"),
             init("fc.weight", 10, 4), init("fc.bias", 10)]
    nodes = [
        helper.make_node("Conv", ["x", "stem.weight"], ["s"], name="/stem/Conv", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["s", b + "conv1.weight"], ["c"], name="/layer1/layer1.0/conv1/Conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", b + "bn1.weight", b + "bn1.bias", b + "bn1.running_mean",
                                                b + "bn1.running_var"], ["bn"],
                         name="/layer1/layer1.0/bn1/BatchNormalization"),
        helper.make_node("Relu", ["bn"], ["r"], name="/layer1/layer1.0/relu/Relu"),
        helper.make_node("Add", ["r", "s"], ["a"], name="/layer1/layer1.0/Add"),
        helper.make_node("GlobalAveragePool", ["a"], ["g"], name="/avgpool/GlobalAveragePool"),
        helper.make_node("Flatten", ["g"], ["f"], name="/Flatten"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm", transB=1),
    ]
    return classifier_model("tiny_resnet", nodes, inits)


def model_of(name, nodes, inputs, outputs, inits, opset=13):
    """A checked model of `nodes` with the given value infos."""
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, producer_name="placelab make-onnx-fixtures",
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def tiny_pad_pool():
    """Inception-V3's pooling branch as torchvision exports it: F.avg_pool2d(x, 3, 1, 1) comes out as
    Pad (spatial 1 on each side, from a Constant) + AveragePool without padding; and a Pad whose
    reader is no window op (a standalone zero pad). x [N,3,8,8] -> Pad 1 -> AveragePool 3/1 ->
    Conv 4x3x1x1 -> Pad 0/1 (bottom/right) -> Relu -> GlobalAveragePool -> Flatten -> Gemm [10,4]^T + [10].
    Trainable parameters: 12 + 40 + 10 = 62."""
    rng = np.random.default_rng(2)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 1, 1)).astype(np.float32), "conv.weight"),
             numpy_helper.from_array(rng.standard_normal((10, 4)).astype(np.float32), "fc.weight"),
             numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fc.bias"),
             ints("pads2", [0, 0, 0, 0, 0, 0, 1, 1])]
    nodes = [
        helper.make_node("Constant", [], ["pads1"], name="/branch_pool/Constant",
                         value=numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))),
        helper.make_node("Pad", ["x", "pads1"], ["p"], name="/branch_pool/Pad", mode="constant"),
        helper.make_node("AveragePool", ["p"], ["a"], name="/branch_pool/AveragePool", kernel_shape=[3, 3],
                         strides=[1, 1], pads=[0, 0, 0, 0]),
        helper.make_node("Conv", ["a", "conv.weight"], ["c"], name="/branch_pool/conv/Conv", kernel_shape=[1, 1]),
        helper.make_node("Pad", ["c", "pads2"], ["cp"], name="/pad/Pad"),
        helper.make_node("Relu", ["cp"], ["r"], name="/relu/Relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["g"], name="/gap/GlobalAveragePool"),
        helper.make_node("Flatten", ["g"], ["f"], name="/Flatten"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm", transB=1),
    ]
    return classifier_model("tiny_pad_pool", nodes, inits)


def tiny_attention():
    """One self-attention block as PyTorch 1.13 exports nn.MultiheadAttention (opset 14) with a symbolic
    sequence and batch: q, k, v sliced from one packed projection at offsets computed from Shape, head
    reshapes whose shapes are Shape -> Gather -> Unsqueeze -> Concat chains, batched MatMuls, Softmax;
    then a mean over the sequence and a classifier. x [S,N,8] (dims "S", "N"), 2 heads of 4.
    Trainable parameters: in_proj 8*24 + 24, out_proj 8*8 + 8, head 8*10 + 10 = 378."""
    rng = np.random.default_rng(3)
    e, heads = 8, 2
    d = e // heads

    def w(name, *dims):
        return numpy_helper.from_array(rng.standard_normal(dims).astype(np.float32), name)

    def c(name, value):
        return helper.make_node("Constant", [], [name], name="/attn/" + name,
                                value=numpy_helper.from_array(np.array(value, np.int64)))

    inits = [w("in_proj.weight_t", e, 3 * e), w("in_proj.bias", 3 * e), w("out_proj.weight", e, e),
             w("out_proj.bias", e), w("head.weight_t", e, 10), w("head.bias", 10)]
    a = "/attn/"
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"], name=a + "Shape"),
        c("i0", 0), c("i1", 1), c("heads", heads), c("head_dim", d), c("neg1", [-1]), c("zero1", [0]), c("three", [3]),
        c("one1", [1]), c("two1", [2]), c("ax0", [0]), c("e1", [e]),
        helper.make_node("Gather", ["shape", "i0"], ["seq"], name=a + "Gather", axis=0),
        helper.make_node("Gather", ["shape", "i1"], ["batch"], name=a + "Gather_1", axis=0),
        helper.make_node("MatMul", ["x", "in_proj.weight_t"], ["proj0"], name=a + "MatMul"),
        helper.make_node("Add", ["in_proj.bias", "proj0"], ["proj"], name=a + "Add"),
        # chunk(3, dim=-1): each third's bounds from the projection's last dimension.
        helper.make_node("Shape", ["proj"], ["pshape"], name=a + "Shape_1"),
        helper.make_node("Gather", ["pshape", "neg1"], ["plast"], name=a + "Gather_2", axis=0),
        helper.make_node("Div", ["plast", "three"], ["third"], name=a + "Div"),
        helper.make_node("Mul", ["third", "two1"], ["two_thirds"], name=a + "Mul"),
        helper.make_node("Slice", ["proj", "zero1", "third", "neg1"], ["q"], name=a + "Slice"),
        helper.make_node("Slice", ["proj", "third", "two_thirds", "neg1"], ["k"], name=a + "Slice_1"),
        helper.make_node("Slice", ["proj", "two_thirds", "plast", "neg1"], ["v"], name=a + "Slice_2"),
        # [S, N, E] -> [S, N*heads, d] -> [N*heads, S, d]
        helper.make_node("Mul", ["batch", "heads"], ["bh"], name=a + "Mul_1"),
        helper.make_node("Unsqueeze", ["seq", "ax0"], ["seq1"], name=a + "Unsqueeze"),
        helper.make_node("Unsqueeze", ["bh", "ax0"], ["bh1"], name=a + "Unsqueeze_1"),
        helper.make_node("Unsqueeze", ["head_dim", "ax0"], ["d1"], name=a + "Unsqueeze_2"),
        helper.make_node("Concat", ["seq1", "bh1", "d1"], ["heads_shape"], name=a + "Concat", axis=0),
    ]
    for t in ("q", "k", "v"):
        nodes.append(helper.make_node("Reshape", [t, "heads_shape"], [t + "h"], name=a + "Reshape_" + t))
        nodes.append(helper.make_node("Transpose", [t + "h"], [t + "t"], name=a + "Transpose_" + t, perm=[1, 0, 2]))
    nodes += [
        helper.make_node("Transpose", ["kt"], ["kT"], name=a + "Transpose_kT", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["qt", "kT"], ["scores"], name=a + "MatMul_1"),
        helper.make_node("Softmax", ["scores"], ["probs"], name=a + "Softmax", axis=-1),
        helper.make_node("MatMul", ["probs", "vt"], ["ctx"], name=a + "MatMul_2"),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], name=a + "Transpose_ctx", perm=[1, 0, 2]),
        # [S, N*heads, d] -> [S*N, E]
        helper.make_node("Mul", ["seq", "batch"], ["rows"], name=a + "Mul_2"),
        helper.make_node("Unsqueeze", ["rows", "ax0"], ["rows1"], name=a + "Unsqueeze_3"),
        helper.make_node("Concat", ["rows1", "e1"], ["flat_shape"], name=a + "Concat_1", axis=0),
        helper.make_node("Reshape", ["ctx_t", "flat_shape"], ["flat"], name=a + "Reshape"),
        helper.make_node("Gemm", ["flat", "out_proj.weight", "out_proj.bias"], ["o"], name=a + "out_proj/Gemm",
                         transB=1),
        helper.make_node("Shape", ["x"], ["xshape"], name=a + "Shape_2"),
        helper.make_node("Reshape", ["o", "xshape"], ["attn"], name=a + "Reshape_1"),
        helper.make_node("Add", ["x", "attn"], ["res"], name="/Add"),
        helper.make_node("ReduceMean", ["res"], ["pooled"], name="/ReduceMean", axes=[0], keepdims=0),
        helper.make_node("MatMul", ["pooled", "head.weight_t"], ["h0"], name="/head/MatMul"),
        helper.make_node("Add", ["head.bias", "h0"], ["logits"], name="/head/Add"),
    ]
    return model_of("tiny_attention", nodes,
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["S", "N", e])],
                    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits, opset=14)


def tiny_lstm_lm():
    """An LSTM language model as PyTorch 1.13 exports nn.LSTM(4, 4, num_layers=2) with initial states:
    ids [5,2] -> Gather table [20,4] -> per layer Slice (h0, c0) -> LSTM hidden 4 with initial_h/c ->
    Squeeze -> MatMul [4,20] + [20]. Inputs ids [5,2] (int64), h0 and c0 [2,2,4], all static (traced
    at batch 2). Trainable parameters: 80 + 2 * (64 + 64 + 32) + 80 + 20 = 500."""
    rng = np.random.default_rng(4)

    def w(name, *dims):
        return numpy_helper.from_array(rng.standard_normal(dims).astype(np.float32), name)

    inits = [w("emb.weight", 20, 4), w("out.weight_t", 4, 20), w("out.bias", 20), ints("ax0", [0]),
             ints("ax1", [1])]
    nodes = [helper.make_node("Gather", ["emb.weight", "ids"], ["emb"], name="/emb/Gather")]
    x = "emb"
    for layer in range(2):
        inits += [w(f"W{layer}", 1, 16, 4), w(f"R{layer}", 1, 16, 4), w(f"B{layer}", 1, 32),
                  ints(f"start{layer}", [layer]), ints(f"end{layer}", [layer + 1])]
        sfx = f"_{layer}" if layer else ""
        nodes += [
            helper.make_node("Slice", ["h0", f"start{layer}", f"end{layer}", "ax0"], [f"h0_{layer}"],
                             name="/rnn/Slice" + sfx),
            helper.make_node("Slice", ["c0", f"start{layer}", f"end{layer}", "ax0"], [f"c0_{layer}"],
                             name="/rnn/Slice_c" + sfx),
            helper.make_node("LSTM", [x, f"W{layer}", f"R{layer}", f"B{layer}", "", f"h0_{layer}", f"c0_{layer}"],
                             [f"y{layer}", f"hn{layer}", f"cn{layer}"], name="/rnn/LSTM" + sfx, hidden_size=4),
            helper.make_node("Squeeze", [f"y{layer}", "ax1"], [f"s{layer}"], name="/rnn/Squeeze" + sfx),
        ]
        x = f"s{layer}"
    nodes += [helper.make_node("MatMul", [x, "out.weight_t"], ["o"], name="/out/MatMul"),
              helper.make_node("Add", ["out.bias", "o"], ["logits"], name="/out/Add")]
    return model_of("tiny_lstm_lm", nodes,
                    [helper.make_tensor_value_info("ids", TensorProto.INT64, [5, 2]),
                     helper.make_tensor_value_info("h0", TensorProto.FLOAT, [2, 2, 4]),
                     helper.make_tensor_value_info("c0", TensorProto.FLOAT, [2, 2, 4])],
                    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [5, 2, 20])], inits, opset=14)


def tiny_gru():
    """A GRU language model as PyTorch 1.13 exports nn.GRU(4, 3) with an initial state (linear_before_reset=1):
    ids [4,2] -> Gather table [20,4] -> GRU hidden 3 with initial_h [1,2,3] (a graph input) -> Squeeze ->
    MatMul [3,20] + [20]. Trainable parameters: 80 + (36 + 27 + 18) + 60 + 20 = 241."""
    rng = np.random.default_rng(6)

    def w(name, *dims):
        return numpy_helper.from_array(rng.standard_normal(dims).astype(np.float32), name)

    inits = [w("emb.weight", 20, 4), w("W", 1, 9, 4), w("R", 1, 9, 3), w("B", 1, 18), w("out.weight_t", 3, 20),
             w("out.bias", 20), ints("ax1", [1])]
    nodes = [
        helper.make_node("Gather", ["emb.weight", "ids"], ["emb"], name="/emb/Gather"),
        helper.make_node("GRU", ["emb", "W", "R", "B", "", "h0"], ["y", "hn"], name="/rnn/GRU", hidden_size=3,
                         linear_before_reset=1),
        helper.make_node("Squeeze", ["y", "ax1"], ["s"], name="/rnn/Squeeze"),
        helper.make_node("MatMul", ["s", "out.weight_t"], ["o"], name="/out/MatMul"),
        helper.make_node("Add", ["out.bias", "o"], ["logits"], name="/out/Add"),
    ]
    return model_of("tiny_gru", nodes,
                    [helper.make_tensor_value_info("ids", TensorProto.INT64, [4, 2]),
                     helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, 2, 3])],
                    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [4, 2, 20])], inits, opset=14)


def tiny_baked_batch():
    """A classifier traced at batch 1 without dynamic_axes: its flatten is a Reshape to the literal
    [1, -1]. x [1,3,4,4] -> Conv 2x3x1x1 -> Relu -> Reshape [1, -1] -> Gemm [10,32]^T + [10].
    Trainable parameters: 6 + 320 + 10 = 336."""
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.standard_normal((2, 3, 1, 1)).astype(np.float32), "conv.weight"),
             numpy_helper.from_array(rng.standard_normal((10, 32)).astype(np.float32), "fc.weight"),
             numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fc.bias")]
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight"], ["c"], name="/conv/Conv", kernel_shape=[1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="/relu/Relu"),
        helper.make_node("Constant", [], ["flat_shape"], name="/Constant",
                         value=numpy_helper.from_array(np.array([1, -1], np.int64))),
        helper.make_node("Reshape", ["r", "flat_shape"], ["f"], name="/Reshape"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm", transB=1),
    ]
    return model_of("tiny_baked_batch", nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
                    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)


def export_inception_v3(path):
    import torch
    import torchvision

    # aux_logits=False: the auxiliary classifier runs only in training mode, so an eval-mode export
    # has none of its 3,326,696 parameters; without it the file's parameters are the model's.
    model = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=False)
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    torch.onnx.export(model, torch.zeros(1, 3, 299, 299), path, opset_version=13, input_names=["input"],
                      output_names=["logits"], do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE)
    print(f"{path}: torchvision inception_v3 (aux_logits=False), {params} parameters")


def export_transformer(path):
    import torch
    from torch import nn

    class Encoder(nn.Module):
        """nn.TransformerEncoder (2 layers, d_model 256, 8 heads, feed-forward 1024) + a classifier."""

        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, dropout=0.1)
            self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
            self.head = nn.Linear(256, 10)

        def forward(self, src):
            return self.head(self.encoder(src))

    torch.manual_seed(0)
    model = Encoder()
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    # Sequence-first [S, N, 256], both symbolic: the attention's reshapes are Shape arithmetic.
    torch.onnx.export(model, torch.zeros(16, 4, 256), path, opset_version=14, input_names=["src"],
                      output_names=["logits"],
                      dynamic_axes={"src": {0: "sequence", 1: "batch"}, "logits": {0: "sequence", 1: "batch"}})
    print(f"{path}: nn.TransformerEncoder, {params} parameters")


def export_causal_transformer(path):
    import torch
    from torch import nn

    class CausalLM(nn.Module):
        """A GPT-style decoder-only model: Embedding(100, 64) + a learned positional table [1, 512, 64]
        cut to the sequence, nn.TransformerEncoder (2 layers, batch_first, norm_first, GELU, 4 heads)
        under a causal mask, Linear(64, 100)."""

        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.1, batch_first=True,
                                               activation="gelu", norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
            self.embedding = nn.Embedding(100, 64)
            self.position = nn.Parameter(torch.zeros(1, 512, 64))
            self.head = nn.Linear(64, 100)

        def forward(self, ids):
            n = ids.shape[1]
            mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
            x = self.embedding(ids) + self.position[:, :n]
            return self.head(self.encoder(x, mask=mask))

    torch.manual_seed(0)
    model = CausalLM()
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    torch.onnx.export(model, torch.zeros(2, 16, dtype=torch.long), path, opset_version=14, input_names=["ids"],
                      output_names=["logits"], dynamic_axes={"ids": {0: "batch", 1: "sequence"}})
    print(f"{path}: causal nn.TransformerEncoder language model, {params} parameters")


def export_bert_style(path):
    import math

    import torch
    from torch import nn

    class Layer(nn.Module):
        """A BERT encoder layer written as Hugging Face's modeling_bert writes it (view/permute head
        splits, an additive extended attention mask, post-norm, GELU)."""

        def __init__(self, d=64, heads=4):
            super().__init__()
            self.heads, self.head_dim = heads, d // heads
            self.query, self.key, self.value, self.output = (nn.Linear(d, d) for _ in range(4))
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.intermediate, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def split(self, x):
            b, n, _ = x.size()
            return x.view(b, n, self.heads, self.head_dim).permute(0, 2, 1, 3)

        def forward(self, x, extended_mask):
            q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim) + extended_mask
            context = torch.matmul(scores.softmax(-1), v).permute(0, 2, 1, 3).contiguous()
            context = context.view(context.size()[:-2] + (self.heads * self.head_dim,))
            x = self.norm1(x + self.output(context))
            return self.norm2(x + self.out(nn.functional.gelu(self.intermediate(x))))

    class Bert(nn.Module):
        """Word, position and token-type embeddings (the ids of the last two from registered buffers,
        as Hugging Face's BertEmbeddings), 2 layers of d 64, a classifier on the first token."""

        def __init__(self):
            super().__init__()
            self.word, self.position, self.token_type = nn.Embedding(1000, 64), nn.Embedding(128, 64), nn.Embedding(2, 64)
            self.norm = nn.LayerNorm(64)
            self.layers = nn.ModuleList([Layer(), Layer()])
            self.register_buffer("position_ids", torch.arange(128).expand((1, -1)))
            self.register_buffer("token_type_ids", torch.zeros(1, 128, dtype=torch.long))
            self.classifier = nn.Linear(64, 2)

        def forward(self, input_ids, attention_mask):
            n = input_ids.size(1)
            token_types = self.token_type_ids[:, :n].expand(input_ids.size(0), n)
            x = self.norm(self.word(input_ids) + self.position(self.position_ids[:, :n]) + self.token_type(token_types))
            extended = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
            for layer in self.layers:
                x = layer(x, extended)
            return self.classifier(x[:, 0])

    torch.manual_seed(0)
    model = Bert()
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    torch.onnx.export(model, (torch.zeros(2, 16, dtype=torch.long), torch.ones(2, 16, dtype=torch.long)), path,
                      opset_version=14, input_names=["input_ids", "attention_mask"], output_names=["logits"],
                      dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}})
    print(f"{path}: BERT-style encoder, {params} parameters")


def export_rnn_lm(path, cell):
    import torch
    from torch import nn

    class LanguageModel(nn.Module):
        """Embedding 10000x256, a 2-layer nn.LSTM / nn.GRU (256 -> 512) with initial states, Linear 512 -> 10000."""

        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(10000, 256)
            self.rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(256, 512, num_layers=2)
            self.decoder = nn.Linear(512, 10000)

        def forward(self, ids, *state):
            y, _ = self.rnn(self.embedding(ids), state if cell == "lstm" else state[0])
            return self.decoder(y)

    torch.manual_seed(0)
    model = LanguageModel()
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    # Traced at 35 steps of batch 20 (static; ids are [sequence, batch]).
    ids = torch.zeros(35, 20, dtype=torch.long)
    states = (torch.zeros(2, 20, 512),) * (2 if cell == "lstm" else 1)
    names = ["h0", "c0"] if cell == "lstm" else ["h0"]
    torch.onnx.export(model, (ids, *states), path, opset_version=14, input_names=["ids", *names],
                      output_names=["logits"])
    print(f"{path}: {cell.upper()} language model, {params} parameters")


def export_lstm_lm(path):
    export_rnn_lm(path, "lstm")


def export_gru_lm(path):
    export_rnn_lm(path, "gru")


def export_resnet50(path):
    import torch
    import torchvision

    model = torchvision.models.resnet50(weights=None)
    model.eval()
    params = sum(p.numel() for p in model.parameters())
    # TrainingMode.PRESERVE in eval mode keeps BatchNormalization nodes as nodes only when constant
    # folding is off; with folding, export fuses them into the convolutions (and the parameter
    # count would no longer be the training model's).
    torch.onnx.export(model, torch.zeros(1, 3, 224, 224), path, opset_version=13, input_names=["input"],
                      output_names=["logits"], do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE)
    print(f"{path}: torchvision resnet50, {params} parameters")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "onnx"))
    parser.add_argument("--resnet50", metavar="PATH", help="export torchvision's ResNet-50 to PATH instead")
    parser.add_argument("--inception-v3", metavar="PATH", help="export torchvision's Inception-V3 to PATH instead")
    parser.add_argument("--transformer", metavar="PATH", help="export an nn.TransformerEncoder to PATH instead")
    parser.add_argument("--causal-transformer", metavar="PATH",
                        help="export a GPT-style nn.TransformerEncoder language model to PATH instead")
    parser.add_argument("--bert-style", metavar="PATH",
                        help="export a small BERT written as Hugging Face's modeling_bert to PATH instead")
    parser.add_argument("--lstm-lm", metavar="PATH", help="export an LSTM language model to PATH instead")
    parser.add_argument("--gru-lm", metavar="PATH", help="export a GRU language model to PATH instead")
    args = parser.parse_args()
    exports = ((args.resnet50, export_resnet50), (args.inception_v3, export_inception_v3),
               (args.transformer, export_transformer), (args.causal_transformer, export_causal_transformer),
               (args.bert_style, export_bert_style),
               (args.lstm_lm, export_lstm_lm), (args.gru_lm, export_gru_lm))
    if any(path for path, _ in exports):
        # Without torch (or torchvision, for its two models) nothing can be exported: 77 is the
        # "skipped" status CTest's fixture onnx_torch_exports declares (tests/models/CMakeLists.txt).
        needed = ["torch"] + (["torchvision"] if args.resnet50 or args.inception_v3 else [])
        for module in needed:
            try:
                __import__(module)
            except ImportError as e:
                print(f"make-onnx-fixtures: cannot export without {module} ({e}); "
                      "install python3-torch and python3-torchvision", file=sys.stderr)
                return 77
        for path, export in exports:
            if path:
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
                export(path)
        return 0
    for name, build in (("tiny_cnn.onnx", tiny_cnn), ("tiny_resnet.onnx", tiny_resnet),
                        ("tiny_pad_pool.onnx", tiny_pad_pool), ("tiny_attention.onnx", tiny_attention),
                        ("tiny_lstm_lm.onnx", tiny_lstm_lm), ("tiny_gru.onnx", tiny_gru),
                        ("tiny_baked_batch.onnx", tiny_baked_batch)):
        path = os.path.join(args.out_dir, name)
        onnx.save(build(), path)
        print(f"wrote {os.path.normpath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
