#!/usr/bin/env python3
"""Paired comparison of two sim_bench binaries on one benchmark, robust to a noisy shared machine.

Runs ABBA rounds (A, B, B, A; each a short run pinned to one core with taskset), takes the ratio
B/A of each round's throughput, and prints the median ratio with the rounds. Slow drifts of the
machine's speed cancel within a round, which single back-to-back runs do not.

Usage: scripts/bench-compare.py OLD_BINARY NEW_BINARY [--rounds 16] [--filter 'BM_Simulate/10000$']
                                [--cpu 1] [--min-time 0.2]
"""
import argparse
import re
import shutil
import statistics
import subprocess
import sys


def throughput(binary, flt, cpu, min_time):
    cmd = [binary, f"--benchmark_filter={flt}", f"--benchmark_min_time={min_time}"]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", str(cpu)] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"items_per_second=([0-9.]+)([kMG]?)/s", out.stdout)
    if out.returncode != 0 or not m:
        print(f"bench-compare: {binary} gave no items_per_second for {flt!r}:\n{out.stdout}{out.stderr}",
              file=sys.stderr)
        sys.exit(2)
    return float(m.group(1)) * {"": 1e-6, "k": 1e-3, "M": 1.0, "G": 1e3}[m.group(2)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--filter", default="BM_Simulate/10000$")
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--min-time", default="0.2")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    olds, news, ratios = [], [], []
    for r in range(a.rounds):
        o1 = throughput(a.old, a.filter, a.cpu, a.min_time)
        n1 = throughput(a.new, a.filter, a.cpu, a.min_time)
        n2 = throughput(a.new, a.filter, a.cpu, a.min_time)
        o2 = throughput(a.old, a.filter, a.cpu, a.min_time)
        olds += [o1, o2]
        news += [n1, n2]
        ratios.append((n1 + n2) / (o1 + o2))
        print(f"round {r + 1}/{a.rounds}: new/old {ratios[-1]:.3f}", file=sys.stderr, flush=True)
    print(f"old: median {statistics.median(olds):.2f} M/s, max {max(olds):.2f}; "
          f"new: median {statistics.median(news):.2f} M/s, max {max(news):.2f}; "
          f"new/old median of {a.rounds} rounds: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
