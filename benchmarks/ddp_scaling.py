"""Iteration time of 1 process vs K data-parallel ranks (torchrun, gloo on CPU / NCCL on GPUs).

    python benchmarks/ddp_scaling.py                      # quickstart and a rollout-heavy variant, 1 vs 2 ranks
    python benchmarks/ddp_scaling.py --ranks 1 2 4 --iterations 6 --device cuda

Each (preset, K) pair is one ``gigpo train`` run (``torchrun --nproc_per_node K`` for K > 1) with evaluation and
checkpoints off except the last. Per iteration it reads ``time/rollout`` + ``time/advantages`` + ``time/update``
from metrics.jsonl (each averaged over ranks by the trainer) and reports the median over iterations after the
first (warm-up); beside it the job's wall time (launch and model load included) and the CPU time of all its
processes. Every run keeps ``train.rollout_shards=0`` (one shard per rank): the same tasks for every K, sampled
from K seeds instead of one.

On a CPU with C cores, K ranks of ``train.threads=1`` can at best run min(K, C) times faster, and only the
rollout and the per-rank forward/backward split; the gradient all-reduce and the Python per-row work do not.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PRESETS = {
    # the quickstart as shipped: 8 groups x 8 trajectories, one-token actions
    "quickstart": [],
    # the same task with 16-token responses and twice the groups: generation dominates the iteration
    "rollout-heavy": ["rollout.max_response_tokens=16", "rollout.groups=16"],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(preset: str, ranks: int, iterations: int, device: str, root: Path) -> dict:
    run_dir = root / f"{preset}-{ranks}"
    args = ["train", *PRESETS[preset], f"train.iterations={iterations}", "train.eval_every=0",
            "train.eval_episodes=0", "train.checkpoint_every=0", "train.progress=false", "train.threads=1",
            "train.sample_trajectories=0", f"model.device={device}", f"train.run_dir={run_dir}"]
    if ranks == 1:
        cmd = [sys.executable, "-m", "gigpo", *args]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks), "--master_addr",
               "127.0.0.1", "--master_port", str(_free_port()), "-m", "gigpo", *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    rows = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines() if ln.strip()]
    per_it = [r["time/rollout"] + r["time/advantages"] + r["time/update"] for r in rows if r.get("iteration", 0) > 1]
    med = lambda key: statistics.median(r[key] for r in rows if r.get("iteration", 0) > 1)  # noqa: E731
    return {"preset": preset, "ranks": ranks, "s_per_iteration": statistics.median(per_it),
            "rollout_s": med("time/rollout"), "update_s": med("time/update"), "wall_s": wall,
            "cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    ap.add_argument("--iterations", type=int, default=4, help="per run; the first is warm-up (default 4)")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    if args.iterations < 2:
        ap.error("--iterations must be >= 2 (the first is not timed)")
    print(f"# {os.cpu_count()} CPU cores visible; device={args.device}")
    print("| preset | ranks | s/iteration | rollout s | update s | speed-up | job wall s | job CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for preset in args.presets:
            base = None
            for k in args.ranks:
                r = run(preset, k, args.iterations, args.device, Path(tmp))
                base = base or r["s_per_iteration"]
                print(f"| {preset} | {k} | {r['s_per_iteration']:.3f} | {r['rollout_s']:.3f} | {r['update_s']:.3f} "
                      f"| {base / r['s_per_iteration']:.2f}x | {r['wall_s']:.1f} | {r['cpu_s']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
