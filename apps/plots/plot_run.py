#!/usr/bin/env python3
"""Plots of a placelab run folder (called by `placelab run` and `placelab report`).

learning_curves.png: per learner, the average step time of each batch of samples (those that fit
in memory: OOM placements have no time) and the best step time found so far, mean over seeds (like
Post's Figure 2), with the baselines as dashed lines.
timeline.png: the simulated step of the best placement, one row per device stream and per link
that carried data.

Usage: MPLBACKEND=Agg /usr/bin/python3 plot_run.py <run folder>
"""
import csv
import json
import math
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402


def save_figure(fig, path):
    """Writes the figure as the C++ outputs are written (core/files.h, write_file_atomically): into a
    temporary file beside it, then renamed over it, so an interrupted plot leaves no half a PNG."""
    tmp = f"{os.path.join(os.path.dirname(path), '.' + os.path.basename(path))}.tmp.{os.getpid()}.png"
    try:
        fig.savefig(tmp, dpi=120)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def learning_curves(run_dir, summary):
    path = os.path.join(run_dir, "curve.csv")
    if not os.path.exists(path):
        return False
    # algorithm -> seed -> list of (sample, time or None, best or None)
    rows = defaultdict(lambda: defaultdict(list))
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            t = float(r["step_time_s"]) if r["step_time_s"] else None
            b = float(r["best_s"]) if r["best_s"] else None
            rows[r["algorithm"]][r["seed"]].append((int(r["sample"]), t, b))
    if not rows:
        return False
    window = max(1, int(summary.get("batch", 12)))
    fig, (ax_avg, ax_best) = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (algo, seeds) in enumerate(sorted(rows.items())):
        color = colors[i % len(colors)]
        n = min(len(v) for v in seeds.values())
        xs, avg, best = [], [], []
        for start in range(0, n, window):
            times, bests = [], []
            for v in seeds.values():
                chunk = [t for (_, t, _) in v[start:start + window] if t is not None]
                if chunk:
                    times.append(sum(chunk) / len(chunk))
                b = v[min(start + window, n) - 1][2]
                if b is not None:
                    bests.append(b)
            xs.append(min(start + window, n))
            avg.append(sum(times) / len(times) if times else math.nan)
            best.append(sum(bests) / len(bests) if bests else math.nan)
        ax_avg.plot(xs, avg, color=color, label=algo, linewidth=1.2)
        ax_best.plot(xs, best, color=color, label=algo, linewidth=1.8)
    # Baselines as dashed lines; baselines with the same time share one line and one label.
    lines = {}
    for res in summary.get("results", []):
        if res["kind"] == "baseline" and "mean_s" in res:
            lines.setdefault(round(res["mean_s"], 6), []).append(res["name"])
    # Labels of lines closer than 4 % (a few points on the log axis) are stacked upwards so they
    # do not print over each other.
    last_value, lift = None, 0
    for j, (value, names) in enumerate(sorted(lines.items())):
        for ax in (ax_avg, ax_best):
            ax.axhline(value, color="gray", linestyle=(0, (4, 2 + j)), linewidth=0.9)
        lift = lift + 8 if last_value is not None and value < last_value * 1.04 else 0
        last_value = value
        ax_best.annotate(", ".join(names), (1.0, value), xycoords=("axes fraction", "data"),
                         xytext=(3, lift), textcoords="offset points", fontsize=7, va="center", color="gray")
    for ax, title in ((ax_avg, "average step time per batch (placements that fit)"), (ax_best, "best step time so far")):
        ax.set_title(title)
        ax.set_xlabel("samples")
        ax.grid(alpha=0.3)
    ax_avg.set_ylabel("seconds per step (simulated)")
    ax_avg.set_yscale("log")
    low, high = ax_avg.get_ylim()
    for ax in (ax_avg, ax_best):
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%.2f"))
        if high > 10 * low:
            # Over a decade a label on every minor tick runs into the next: label 1, 2 and 5 only.
            ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        else:
            ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%.2f"))
    ax_avg.legend(fontsize=8)
    fig.suptitle(f"{summary.get('scenario', '')}: {summary.get('model', '')} on {summary.get('machine', '')}", fontsize=10)
    fig.tight_layout()
    save_figure(fig, os.path.join(run_dir, "learning_curves.png"))
    plt.close(fig)
    return True


def timeline(run_dir, summary):
    path = os.path.join(run_dir, "timeline.json")
    if not os.path.exists(path):
        return False
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    proc = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    thread = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    spans = defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            spans[(e["pid"], e["tid"])].append((e["ts"] / 1000.0, e["dur"] / 1000.0, e.get("cat", "")))
    keys = sorted(spans, key=lambda k: (proc.get(k[0], "") == "links", k[0], k[1]))
    if not keys:
        return False
    fig, ax = plt.subplots(figsize=(12, 0.35 * len(keys) + 1.5))
    for row, key in enumerate(keys):
        # Alternate two shades so that back-to-back ops on one stream stay distinguishable.
        shades = ("tab:orange", "#f6b26b") if proc.get(key[0]) == "links" else ("tab:blue", "#6fa8dc")
        bars = sorted(spans[key])
        ax.broken_barh([(s, max(d, 1e-6)) for s, d, _ in bars], (row - 0.4, 0.8),
                       facecolors=[shades[i % 2] for i in range(len(bars))])
    labels = []
    for pid, tid in keys:
        name = thread.get((pid, tid), str(tid))
        labels.append(name if proc.get(pid) == "links" else f"{proc.get(pid, pid)} {name}")
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time in the step (ms)")
    best = summary.get("best", {})
    ax.set_title(f"best placement ({best.get('name', '?')}, seed {best.get('seed', '?')}): "
                 f"{best.get('step_time_s', 0) * 1000:.2f} ms per step — blue: ops, orange: transfers", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    save_figure(fig, os.path.join(run_dir, "timeline.png"))
    plt.close(fig)
    return True


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    run_dir = sys.argv[1]
    with open(os.path.join(run_dir, "summary.json")) as f:
        summary = json.load(f)
    made = [name for name, fn in (("learning_curves.png", learning_curves), ("timeline.png", timeline))
            if fn(run_dir, summary)]
    print("plots: " + (", ".join(os.path.join(run_dir, m) for m in made) if made else "none"))


if __name__ == "__main__":
    main()
