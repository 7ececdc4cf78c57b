#!/usr/bin/python3
"""Generates the ONNX test fixtures of placelab's ONNX importer.

  /usr/bin/python3 scripts/make-onnx-fixtures.py                  # tests/data/onnx/tiny_cnn.onnx, tiny_resnet.onnx
  /usr/bin/python3 scripts/make-onnx-fixtures.py --resnet50 /tmp/resnet50.onnx

The default fixtures are built with python3-onnx's helper API (no torch), so CI can regenerate it.
--resnet50 exports torchvision's ResNet-50 (weights=None, batch 1) with torch.onnx.export; it
needs python3-torch and python3-torchvision (Debian) and is only for the local comparison test
(PLACELAB_RESNET50_ONNX). Run with Debian's /usr/bin/python3: the pyenv python3 lacks these modules.
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
    args = parser.parse_args()
    if args.resnet50:
        export_resnet50(args.resnet50)
        return 0
    for name, build in (("tiny_cnn.onnx", tiny_cnn), ("tiny_resnet.onnx", tiny_resnet)):
        path = os.path.join(args.out_dir, name)
        onnx.save(build(), path)
        print(f"wrote {os.path.normpath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
