"""Benchmark: the CPU end-to-end run (the real `lead-recipes train`, tests/cpu_e2e harness) per method: wall time,
time per training step as a ratio to the anchor `grpo` (same run) and peak RSS of the driver and the Ray cluster.
Not collected by pytest. How each figure is taken: docs/benchmarks.md#cpu-end-to-end-runs.
Usage: .venv/bin/python benchmarks/bench_e2e_cpu.py [--methods grpo,lead,leash,grpo-lead] [--episodes 2]"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cpu_e2e import harness


def step_times(run) -> list[float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    walls = {}
    for events in glob.glob(str(run.dir / "tb" / "**" / "events.*"), recursive=True):
        acc = EventAccumulator(events, size_guidance={"scalars": 0})
        acc.Reload()
        if "train/recipe/correct_rate" in acc.Tags()["scalars"]:
            walls.update({e.step: e.wall_time for e in acc.Scalars("train/recipe/correct_rate")})
    steps = sorted(walls)
    return [walls[b] - walls[a] for a, b in zip(steps, steps[1:])]


class PeakRss(threading.Thread):
    """Samples the summed RSS of the cluster's processes plus the driver every 0.5 s; keeps the peak and the
    largest single process (name, RSS)."""

    def __init__(self, cluster, run):
        super().__init__(daemon=True)
        self.cluster, self.train_run, self.peak, self.largest, self.done = cluster, run, 0, ("", 0), False

    def run(self):
        import psutil

        while not self.done:
            total = 0
            for pid in self.cluster.pids() | {self.train_run.proc.pid}:
                try:
                    p = psutil.Process(pid)
                    rss = p.memory_info().rss
                    name = " ".join(p.cmdline()[:3])[-60:]
                except psutil.Error:
                    continue
                total += rss
                if rss > self.largest[1]:
                    self.largest = (name, rss)
            self.peak = max(self.peak, total)
            time.sleep(0.5)


def main(argv):
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--methods", default="grpo,lead,leash,grpo-lead")
    ap.add_argument("--episodes", type=int, default=2)
    a = ap.parse_args(argv)
    model = harness.fixture_model()
    cluster = harness.RayCluster()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for method in a.methods.split(","):
                run = harness.Run(cluster, model, Path(tmp) / method, method, episodes=a.episodes)
                sampler = PeakRss(cluster, run)
                sampler.start()
                rc = run.wait(1800)
                sampler.done = True
                sampler.join()
                times = step_times(run)
                rows.append(
                    (
                        method,
                        rc,
                        run.wall_s,
                        statistics.median(times) if times else float("nan"),
                        sampler.peak / 2**30,
                        sampler.largest,
                    )
                )
    finally:
        cluster.stop()
    anchor = next((r[3] for r in rows if r[0] == "grpo"), rows[0][3])
    print(f"load average at end: {os.getloadavg()}, cpus: {os.cpu_count()}")
    print("| method | rc | run wall s | step s (median) | step ratio to grpo | peak RSS GiB (all) | largest process |")
    print("|---|---|---|---|---|---|---|")
    for method, rc, wall, step, peak, (name, rss) in rows:
        print(
            f"| {method} | {rc} | {wall:.0f} | {step:.2f} | {step / anchor:.2f} | {peak:.2f} | "
            f"{name} {rss / 2**30:.2f} GiB |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
