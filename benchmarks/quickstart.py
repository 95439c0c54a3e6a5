"""Measure the quickstart: `gigpo train` (the default preset) for several seeds, untrained vs final held-out success.

    python benchmarks/quickstart.py [--seeds 0 1 2] [--out runs/quickstart-bench] [key=value ...]

Each seed runs as its own process, one after another (the preset pins torch to one thread). Prints a markdown
table: held-out success of the untrained policy (iteration 0) and after training, the rise, wall-clock and CPU
seconds; then the median rise over seeds.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run_seed(seed: int, out: Path, overrides: list[str]) -> dict:
    run_dir = out / f"seed{seed}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "gigpo.cli", "train", f"train.seed={seed}", f"train.run_dir={run_dir}",
           "train.progress=false", *overrides]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"seed {seed} failed:\n{proc.stderr[-2000:]}")
    rows = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines() if ln.strip()]
    evals = [(r["iteration"], r["eval/success_rate"]) for r in rows if r.get("eval/success_rate") is not None]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seed": seed, "untrained": evals[0][1], "final": evals[-1][1], "curve": evals, "wall_s": wall,
            "cpu_s": cpu, "iterations": rows[-1]["iteration"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", default="runs/quickstart-bench")
    ap.add_argument("overrides", nargs="*")
    args = ap.parse_args()
    res = [run_seed(s, Path(args.out), args.overrides) for s in args.seeds]
    print("| seed | untrained success | final success | rise | iterations | wall (s) | CPU (s) |")
    print("|---|---|---|---|---|---|---|")
    for r in res:
        print(f"| {r['seed']} | {r['untrained']:.3f} | {r['final']:.3f} | {r['final'] - r['untrained']:+.3f} | "
              f"{r['iterations']} | {r['wall_s']:.0f} | {r['cpu_s']:.0f} |")
    rises = [r["final"] - r["untrained"] for r in res]
    print(f"\nmedian rise over {len(res)} seeds: {statistics.median(rises):+.3f}")
    for r in res:
        print(f"seed {r['seed']} eval curve: " + ", ".join(f"{i}:{s:.2f}" for i, s in r["curve"]))


if __name__ == "__main__":
    main()
