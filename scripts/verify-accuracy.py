#!/usr/bin/env python3
"""Simulated vs measured step time over many placements on this machine (issue: calibration).

Calibrates a `localhost` machine of N one-core CPU devices (the built-in sweep plus exactly the
models' kernel signatures), then for each model runs >= 14 placements for real with the CPU
executor (`placelab verify`): each device alone, layer splits in both directions, and 10 random
placements; prints a table and the median / worst |error| and the Spearman rank correlation.

Usage: scripts/verify-accuracy.py [--placelab build/apps/placelab] [--out results/accuracy] [--rounds 12]
       [--steps 4] [--repeats 1] [--in-situ] [--calibration FILE (reuse)] [--models m1 m2 ...]
Needs only the Python standard library. Run it on an otherwise idle machine.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

DEFAULT_MODELS = ["cifar10_cnn:batch=8", "rnnlm:layers=2,hidden=256,seq=10,batch=8,vocab=2000"]


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return cov / (va * vb) if va > 0 and vb > 0 else 0.0


def placements_for(graph, devices):
    """Named placements ({"devices": [...]} form) of one graph over `devices` device names."""
    ops = graph["ops"]
    n = len(ops)
    layers = sorted({op.get("layer", -1) for op in ops})
    real = [l for l in layers if l >= 0] or [-1]
    out = {}
    for d in devices:
        out[f"all on {d}"] = [d] * n
    if len(devices) >= 2:
        half = real[len(real) // 2]
        out["layers split, first half on " + devices[0]] = [
            devices[0] if op.get("layer", -1) < half else devices[1] for op in ops]
        out["layers split, first half on " + devices[1]] = [
            devices[1] if op.get("layer", -1) < half else devices[0] for op in ops]
        out["layers alternate"] = [devices[(max(op.get("layer", -1), 0)) % len(devices)] for op in ops]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--placelab", default="build/apps/placelab")
    ap.add_argument("--out", default="results/accuracy")
    ap.add_argument("--calibration", help="reuse this calibrated machine file instead of calibrating")
    ap.add_argument("--devices", type=int, default=2)
    ap.add_argument("--models", nargs="+", default=DEFAULT_MODELS)
    ap.add_argument("--random", type=int, default=10)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--alone", action="store_true", help="calibrate with --in-situ-alone (uncontended in-situ runs)")
    ap.add_argument("--rounds", type=int, default=12,
                    help="per model, measure its placements in this many interleaved rounds inside one "
                         "`placelab verify` (median per placement), so slow spells hit every placement alike")
    ap.add_argument("--in-situ", action="store_true",
                    help="pass --in-situ to verify: predict with the graph's kernels re-timed in situ before each "
                         "round (interleaved with the placements); the table also summarises the prediction "
                         "from the calibration file alone, on the same measurements")
    ap.add_argument("--repeats", type=int, default=1,
                    help="run the whole measurement this many times, in passes over the models, and use the median")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    cal = a.calibration or os.path.join(a.out, "localhost.yaml")
    if not a.calibration:
        cmd = [a.placelab, "calibrate", "--backend", "cpu", "--devices", str(a.devices), "--out", cal]
        for m in a.models:
            cmd += ["--model", m]
        if a.alone:
            cmd.append("--in-situ-alone")
        print("calibrating:", " ".join(cmd), flush=True)
        print(run(cmd), flush=True)
    devices = [f"cpu:{i}" for i in range(a.devices)]
    jobs = []  # (model, name, graph path, placement spec)
    for model in a.models:
        gpath = os.path.join(a.out, model.split(":")[0] + ".json")
        run([a.placelab, "export", model, "-o", gpath])
        with open(gpath) as f:
            graph = json.load(f)
        named = placements_for(graph, devices)
        specs = []
        for name, devs in named.items():
            p = os.path.join(a.out, f"{model.split(':')[0]}-{len(specs)}.placement.json")
            with open(p, "w") as f:
                json.dump({"devices": devs}, f)
            specs.append((name, p))
        specs += [(f"random:{k}", f"random:{k}") for k in range(1, a.random + 1)]
        jobs += [(model, name, gpath, spec) for name, spec in specs]
    measured = [[] for _ in jobs]
    drift = []  # the machine's speed at each verify vs at calibration (the drift probe)
    predicted, oom = [0.0] * len(jobs), [False] * len(jobs)
    predicted_file = [None] * len(jobs)  # with --in-situ: the calibration file's own prediction
    for rep in range(a.repeats):
        for model in a.models:
            idx = [i for i, job in enumerate(jobs) if job[0] == model]
            cmd = [a.placelab, "verify", "--graph", jobs[idx[0]][2], "--machine", cal, "--steps", str(a.steps),
                   "--rounds", str(a.rounds), "--json"] + (["--in-situ"] if a.in_situ else []) + \
                  ["--placement"] + [jobs[i][3] for i in idx]
            print(f"pass {rep + 1}/{a.repeats} {model}: {len(idx)} placements, {a.rounds} interleaved rounds of "
                  f"{a.steps} steps", flush=True)
            out = json.loads(run(cmd))
            reports = out["placements"] if "placements" in out else [out]
            for d in out.get("drift", []):
                print(f"  {d['device']}: {d['slowdown']:.2f}x the drift probe's time at calibration", flush=True)
                drift.append({"pass": rep + 1, "model": model, **d})
            for i, j in zip(idx, reports):
                predicted[i], oom[i] = j["predicted_s"], j["oom"]
                predicted_file[i] = j.get("predicted_with_file_s")
                measured[i].append(j["measured_s"])
                print(f"  {jobs[i][1]:<34} predicted {j['predicted_s']*1e3:9.3f} ms  "
                      f"measured {j['measured_s']*1e3:9.3f} ms", flush=True)
    rows = []
    for i, (model, name, _, _) in enumerate(jobs):
        m = statistics.median(measured[i])
        err = (predicted[i] - m) / m if m > 0 else 0.0
        rows.append((model, name, predicted[i], m, err, oom[i], measured[i], predicted_file[i]))
    print()
    for r in rows:
        print(f"{r[0]:<45} {r[1]:<34} predicted {r[2]*1e3:9.3f} ms  measured {r[3]*1e3:9.3f} ms  "
              f"error {100*r[4]:+6.1f} %")
    ok = [r for r in rows if not r[5]]
    errs = sorted(abs(r[4]) for r in ok)
    med = statistics.median(errs)
    summary = {"placements": len(ok), "median_abs_error": med, "worst_abs_error": errs[-1],
               "spearman": spearman([r[2] for r in ok], [r[3] for r in ok])}
    per_model = {}
    for model in a.models:
        mr = [r for r in ok if r[0] == model]
        per_model[model] = spearman([r[2] for r in mr], [r[3] for r in mr]) if len(mr) > 1 else 0.0
    summary["spearman_per_model"] = per_model
    summary["in_situ"] = a.in_situ
    if a.in_situ:
        ferrs = sorted(abs((r[7] - r[3]) / r[3]) for r in ok)
        summary["with_file"] = {"median_abs_error": statistics.median(ferrs), "worst_abs_error": ferrs[-1],
                                "spearman": spearman([r[7] for r in ok], [r[3] for r in ok])}
    with open(os.path.join(a.out, "accuracy.json"), "w") as f:
        json.dump({"rows": rows, "summary": summary, "drift": drift}, f, indent=2)
    print(f"\n{len(ok)} placements: median |error| {100*med:.1f} %, worst {100*errs[-1]:.1f} %, "
          f"Spearman {summary['spearman']:.3f} (per model: " +
          ", ".join(f"{m.split(':')[0]} {s:.3f}" for m, s in per_model.items()) + ")" +
          (" with the kernels re-timed in situ" if a.in_situ else ""))
    if a.in_situ:
        w = summary["with_file"]
        print(f"the same measurements against the calibration file's prediction: median |error| "
              f"{100*w['median_abs_error']:.1f} %, worst {100*w['worst_abs_error']:.1f} %, Spearman {w['spearman']:.3f}")


if __name__ == "__main__":
    main()
