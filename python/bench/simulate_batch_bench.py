"""simulate_batch from Python against the C++ benchmark BM_SimulateBatch_Inception (bench/sim_bench.cpp).

The same 1,000 placements of op-level inception_v3:batch=32 on k80x4 (op i of placement k on
device splitmix64(k * ops + i) % 5), timed over `--repeats` calls per thread count; prints the
median wall and CPU seconds per batch (CPU time, as Google Benchmark's
"CPU" column, is the fairer figure on a shared machine) and the sum of the step times in placement order, 17 digits, as the C++
benchmark's label does: equal sums mean bit-identical results.

    PYTHONPATH=build/python /usr/bin/python3 python/bench/simulate_batch_bench.py
    build/bench/sim_bench --benchmark_filter=BM_SimulateBatch_Inception
"""

import argparse
import statistics
import time

import numpy as np

import placelab as pl


def splitmix64(x: np.ndarray) -> np.ndarray:
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()

    g = pl.Graph.from_model("inception_v3:batch=32")
    m = pl.Machine.preset("k80x4")
    sim = pl.Simulator(g, m)
    k = np.arange(1000, dtype=np.uint64)[:, None]
    i = np.arange(g.num_ops, dtype=np.uint64)[None, :]
    placements = (splitmix64(k * np.uint64(g.num_ops) + i) % np.uint64(m.num_devices)).astype(np.int32)
    reference = None
    for threads in args.threads:
        sim.simulate_batch(placements, threads=threads)  # warm-up: buffers grow once
        seconds, cpu_seconds = [], []
        for _ in range(args.repeats):
            start, cpu_start = time.perf_counter(), time.process_time()
            times, oom = sim.simulate_batch(placements, threads=threads)
            seconds.append(time.perf_counter() - start)
            cpu_seconds.append(time.process_time() - cpu_start)
        total = 0.0
        for t in times.tolist():
            total += t
        reference = times if reference is None else reference
        assert times.tobytes() == reference.tobytes(), "results depend on the thread count"
        print(f"threads={threads}: {1e3 * statistics.median(seconds):.1f} ms per batch of 1000 "
              f"(min {1e3 * min(seconds):.1f}), CPU {1e3 * statistics.median(cpu_seconds):.1f} ms, "
              f"{int(oom.sum())} oom, sum {total:.17g}")


if __name__ == "__main__":
    main()
