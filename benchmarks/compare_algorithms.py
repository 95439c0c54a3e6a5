"""Train every algorithm variant on one preset for several seeds and print a markdown comparison table.

    python benchmarks/compare_algorithms.py --out runs/compare --seeds 0 1 2 -- train.iterations=8 rollout.groups=4

Each (variant, seed) is one ``gigpo train`` subprocess (a fresh process, so runs cannot leak state into each
other); results are appended to ``OUT/results.jsonl`` as they finish, so an interrupted comparison keeps what it
measured and a rerun skips finished cells. The table reports, per variant, mean ± std over seeds of: the final
held-out evaluation success rate and return (greedy), the rollout success rate and return averaged over the
last three iterations (sampled, temperature 1), and wall seconds per run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

VARIANTS: dict[str, list[str]] = {
    "gigpo": ["algorithm=gigpo"],
    "grpo": ["algorithm=grpo"],
    "rloo": ["algorithm=rloo"],
    "dapo": ["algorithm=dapo"],
    "dapo+step": ["algorithm=dapo+step"],
    "gspo": ["algorithm=gspo"],
    "ppo": ["algorithm=ppo"],
    "ppo+step": ["algorithm=ppo+step"],
    "reinforce++": ["algorithm=reinforce++"],
    "grpo (concat)": ["algorithm=grpo", "rollout.mode=concat"],
}


def run_one(name: str, seed: int, out: Path, preset: str, extra: list[str]) -> dict:
    run_dir = out / f"{name.replace(' ', '_').replace('(', '').replace(')', '')}-s{seed}"
    cmd = [sys.executable, "-m", "gigpo.cli", "train", "--config", preset, *VARIANTS[name], *extra,
           f"train.seed={seed}", f"train.run_dir={run_dir}", "train.progress=false"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        return {"variant": name, "seed": seed, "error": proc.stderr[-2000:], "wall_s": wall}
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    its = [r for r in rows if "rollout/success_rate" in r]
    last = its[-3:]
    final = rows[-1]
    return {
        "variant": name, "seed": seed, "wall_s": wall, "iterations": len(its),
        "eval_success": final.get("eval/success_rate"), "eval_return": final.get("eval/episode_return"),
        "rollout_success_last3": statistics.fmean(r["rollout/success_rate"] for r in last),
        "rollout_return_last3": statistics.fmean(r["rollout/episode_return"] for r in last),
        "rounds_mean": statistics.fmean(r.get("rollout/rounds", 1.0) for r in its),
    }


def _ms(xs: list[float]) -> str:
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    return f"{statistics.fmean(xs):.3f} ± {statistics.pstdev(xs):.3f}" if len(xs) > 1 else f"{xs[0]:.3f}"


def table(results: list[dict]) -> str:
    lines = ["| variant | seeds | eval success | eval return | rollout success (last 3) | rollout return (last 3) "
             "| rounds/it | s/run |", "|---|---|---|---|---|---|---|---|"]
    for name in VARIANTS:
        rs = [r for r in results if r["variant"] == name and "error" not in r]
        if not rs:
            continue
        lines.append(
            f"| {name} | {len(rs)} | {_ms([r['eval_success'] for r in rs])} | {_ms([r['eval_return'] for r in rs])} "
            f"| {_ms([r['rollout_success_last3'] for r in rs])} | {_ms([r['rollout_return_last3'] for r in rs])} "
            f"| {statistics.fmean(r['rounds_mean'] for r in rs):.2f} | {statistics.fmean(r['wall_s'] for r in rs):.0f} |"
        )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="runs/compare_algorithms")
    p.add_argument("--preset", default="quickstart")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("overrides", nargs="*", help="key=value overrides applied to every run")
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    res_file = out / "results.jsonl"
    done = [json.loads(x) for x in res_file.read_text().splitlines()] if res_file.exists() else []
    have = {(r["variant"], r["seed"]) for r in done if "error" not in r}
    for seed in a.seeds:  # seed-major: after one pass every variant has a first number
        for name in a.variants:
            if (name, seed) in have:
                continue
            r = run_one(name, seed, out, a.preset, a.overrides)
            done.append(r)
            with res_file.open("a") as f:
                f.write(json.dumps(r) + "\n")
            print(f"{name} seed={seed}: " + ("ERROR " + r["error"][-300:] if "error" in r else
                  f"eval_success={r['eval_success']} rollout_success_last3={r['rollout_success_last3']:.3f} "
                  f"({r['wall_s']:.0f}s)"), flush=True)
    print(table(done))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
