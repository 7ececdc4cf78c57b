#!/usr/bin/env python3
"""The cost of executability (issue "Placements that run"): for five PyTorch models captured with
placelab.torch.capture, on k80x4, dgx1 and h100x8, the best step critpath and post find when they
must move whole modules (grouping: module, a captured graph's default) and when they may place
single ops (the run's op-level twins, which PyTorch cannot run), as PyTorch runs the step (eager).
Prints a Markdown table.

  PYTHONPATH=build/python /usr/bin/python3 scripts/executable-vs-op-level.py --out /tmp/exec [--samples 600]

Models (batch sizes as the papers and the zoo train them): torchvision resnet50 (batch 32, 224²,
momentum) and inception_v3 (batch 32, 299², aux head, rmsprop), an nn.TransformerEncoder (6 layers,
d_model 512, 8 heads, ff 2048, sequence 128, batch 32, Adam), a 2-layer nn.LSTM language model
(hidden 1024, vocabulary 10,000, sequence 35, batch 64, SGD) and a GPT-style decoder (6 layers, d 512,
8 heads, context 256, vocabulary 10,000, batch 16, AdamW).
"""
import argparse
import json
import os
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import placelab.torch as pt

# The models placelab.torch's tests train, sized up here.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests"))
from torch_models import LstmLm, TinyGpt  # noqa: E402


def captures():
    import torchvision
    ce = nn.CrossEntropyLoss()
    yield "resnet50", torchvision.models.resnet50(), (torch.randn(32, 3, 224, 224),), ce, torch.randint(0, 1000, (32,)), "momentum"
    inc = torchvision.models.inception_v3(init_weights=False, aux_logits=True)
    yield ("inception_v3", inc, (torch.randn(32, 3, 299, 299),),
           lambda o, t: F.cross_entropy(o.logits, t) + 0.4 * F.cross_entropy(o.aux_logits, t),
           torch.randint(0, 1000, (32,)), "rmsprop")
    enc = nn.Sequential(nn.TransformerEncoder(nn.TransformerEncoderLayer(512, 8, 2048), 6), nn.Linear(512, 10000))
    yield ("transformer", enc, (torch.randn(128, 32, 512),),
           lambda o, t: F.cross_entropy(o.reshape(-1, 10000), t.reshape(-1)), torch.randint(0, 10000, (128, 32)), "adam")
    yield "lstm_lm", LstmLm(vocab=10000, dim=1024), (torch.randint(0, 10000, (35, 64)),), ce, torch.randint(0, 10000, (35 * 64,)), "sgd"
    yield ("gpt", TinyGpt(vocab=10000, block=256, dim=512, heads=8, layers=6, tied=False), (torch.randint(0, 10000, (16, 256)),),
           lambda o, t: F.cross_entropy(o.reshape(-1, 10000), t.reshape(-1)), torch.randint(0, 10000, (16, 256)), "adamw")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--samples", type=int, default=600)
    ap.add_argument("--placelab", default="build/apps/placelab")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for name, model, inputs, loss, target, opt in captures():
        graph = os.path.join(a.out, f"{name}.json")
        if not os.path.exists(graph):
            pt.capture(model.train(), inputs, loss, target, optimizer=opt, name=name).save(graph)
        for machine in ("k80x4", "dgx1", "h100x8"):
            # One run: the default grouping of a captured graph is `module` (what PyTorch can run),
            # and its op-level twins (`op_level`, on by default) place single ops beside it.
            scenario = os.path.join(a.out, f"{name}-{machine}.yaml")
            with open(scenario, "w") as f:
                f.write(f"name: {name}-{machine}\ngraph: {os.path.abspath(graph)}\nmachine: {machine}\n"
                        f"devices: gpus\nsamples: {a.samples}\nbatch: 12\nseeds: 1\n"
                        "learners:\n  critpath: {}\n  post: {}\nbaselines: [single_gpu]\n")
            folder = os.path.join(a.out, f"{name}-{machine}")
            subprocess.run([a.placelab, "run", scenario, "--output", folder], check=True, capture_output=True)
            summary = json.load(open(os.path.join(folder, "summary.json")))
            assert summary["grouping"] == "module"
            # PyTorch can run the best: export refuses a placement that splits a module.
            subprocess.run([a.placelab, "export-placement", os.path.join(folder, "best_placement.json"),
                            "--format", "torch", "--graph", graph, "-o", folder + "-modules.json"],
                           check=True, capture_output=True)
            best = {r["name"]: (r["best_s"] if not r["oom"] else float("inf")) for r in summary["results"]}
            one = best["single_gpu"]
            for learner in ("critpath", "post"):
                rows.append((name, machine, learner, one, best[f"{learner} (op-level)"], best[learner]))
            print(f"{name} {machine}: done", file=sys.stderr)
    print("| model | machine | learner | one GPU | op-level best | executable best (modules) | cost of executability |")
    print("|---|---|---|---|---|---|---|")
    for name, machine, learner, one, op, mod in rows:
        print(f"| {name} | {machine} | {learner} | {one * 1e3:.2f} ms | {op * 1e3:.2f} ms | {mod * 1e3:.2f} ms | "
              f"{100 * (mod / op - 1):+.1f} % |")


if __name__ == "__main__":
    main()
