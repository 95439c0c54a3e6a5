"""Benchmark: does SmolLM2-135M-Instruct + LoRA + constrained decoding learn `lock` on a CPU? (issue 18, item 3)

Runs ``gigpo train --config smollm2-lock`` (or ``--config smollm2-lock-fixed``) for each algorithm × seed, one
process at a time (start two invocations with different ``--algorithms`` to use two cores), then reports, per run, held-out greedy success at each evaluation (iteration 0 = the untrained model), seconds of
rollout and update per iteration, and the process's wall and CPU time; per algorithm, the median over seeds of
(final − untrained) success. Curves go to ``OUT/curves.png``. Every run found under OUT is reported.

    python benchmarks/smollm2_learning.py --seeds 3 --algorithms gigpo,grpo --out runs/smollm2_learning
    python benchmarks/smollm2_learning.py --config smollm2-lock-fixed --seeds 3 --algorithms gigpo,grpo \
        --out runs/smollm2_fixed
    python benchmarks/smollm2_learning.py --report --out runs/smollm2_learning      # report existing runs only
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


def run_one(out: Path, config: str, algo: str, seed: int, extra: list[str]) -> None:
    name = out / f"{algo}_s{seed}"
    cmd = [sys.executable, "-m", "gigpo.cli", "train", "--config", config, f"algorithm={algo}",
           f"train.seed={seed}", f"train.run_dir={name}", "train.overwrite=true", "train.progress=false", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    rc = subprocess.run(cmd).returncode
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    Path(f"{name}.time").write_text(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": cpu, "rc": rc}))


def load_run(d: Path) -> dict:
    recs = [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines() if line.strip()]
    evals = {int(r["iteration"]): r["eval/success_rate"] for r in recs if "eval/success_rate" in r}
    its = [r for r in recs if "time/update" in r]
    t = json.loads(Path(f"{d}.time").read_text()) if Path(f"{d}.time").exists() else {}
    return {"name": d.name, "algo": d.name.rsplit("_s", 1)[0], "seed": int(d.name.rsplit("_s", 1)[1]),
            "evals": evals, "iterations": len(its),
            "success": [r["rollout/success_rate"] for r in its],
            "rollout_s": statistics.mean(r["time/rollout"] for r in its) if its else float("nan"),
            "update_s": statistics.mean(r["time/update"] for r in its) if its else float("nan"),
            "wall_s": t.get("wall_s"), "cpu_s": t.get("cpu_s")}


def _minutes(seconds: float | None) -> str:
    return f"{seconds / 60:.1f}" if seconds else "—"


def report(out: Path) -> None:
    runs = [load_run(d) for d in sorted(out.glob("*_s*")) if d.is_dir() and (d / "metrics.jsonl").exists()]
    print("| run | iterations | held-out success by iteration | gain | rollout s/it | update s/it | wall min | CPU min |")
    print("|---|---|---|---|---|---|---|---|")
    gains: dict[str, list[float]] = {}
    for r in runs:
        ev = r["evals"]
        seq = ", ".join(f"{k}: {v:.2f}" for k, v in sorted(ev.items()))
        gain = ev[max(ev)] - ev[0] if 0 in ev and len(ev) > 1 else float("nan")
        if len(ev) > 1 and 0 in ev:
            gains.setdefault(r["algo"], []).append(gain)
        print(f"| {r['name']} | {r['iterations']} | {seq} | {gain:+.2f} | {r['rollout_s']:.1f} | {r['update_s']:.1f} "
              f"| {_minutes(r['wall_s'])} | {_minutes(r['cpu_s'])} |")
    for algo, g in gains.items():
        print(f"{algo}: median gain over {len(g)} run(s) {statistics.median(g):+.3f} (each: "
              f"{', '.join(f'{x:+.2f}' for x in g)})")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
    for r in runs:
        style = "-" if r["algo"] == "gigpo" else "--"
        a1.plot(range(1, len(r["success"]) + 1), r["success"], style, label=r["name"], alpha=0.8)
        ev = sorted(r["evals"].items())
        a2.plot([k for k, _ in ev], [v for _, v in ev], style + "o", label=r["name"])
    a1.set(xlabel="iteration", ylabel="rollout success (sampled)", title="training rollouts")
    a2.set(xlabel="iteration", ylabel="held-out greedy success", title="held-out greedy (16 episodes)")
    a2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="runs/smollm2_learning")
    ap.add_argument("--config", default="smollm2-lock", help="preset: smollm2-lock (per-task shown code) or "
                    "smollm2-lock-fixed (one hidden lock)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0, help="run seeds first-seed .. first-seed+seeds-1")
    ap.add_argument("--algorithms", default="gigpo")
    ap.add_argument("--report", action="store_true", help="only report the runs already under --out")
    ap.add_argument("overrides", nargs="*", help="extra key=value overrides of every run")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.report:
        for seed in range(args.first_seed, args.first_seed + args.seeds):  # seed-major: a stopped sweep still has paired seeds
            for algo in args.algorithms.split(","):
                run_one(out, args.config, algo, seed, args.overrides)
    report(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
