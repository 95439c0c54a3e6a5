"""The GiGPO paper's noise table in miniature: step-group sizes and grouping precision/recall under ads.

Rolls out groups of trajectories on ``webshop-noisy`` (ads inserted into pages; each env instance draws its own
ads, so identical pages differ across a group) with an epsilon-oracle policy (the scripted oracle's action with
probability 1 - epsilon, else a random admissible action), then groups the noisy observations every way gigpo
offers and scores each grouping against the env's true state keys.

    python benchmarks/grouping_table.py [--groups 16] [--group-size 8] [--epsilon 0.5] [--ad-rate 1.0]
"""

from __future__ import annotations

import argparse
import platform
import random
import subprocess
import time

import numpy as np

from gigpo.algo import GroupingSpec, group_exact, group_similar, step_group_stats
from gigpo.algo.similarity import grouping_quality
from gigpo.envs import make
from gigpo.envs.webshop import oracle_action


def rollout(groups: int, group_size: int, epsilon: float, ad_rate: float, seed: int):
    rng = random.Random(seed)
    rows = {"group": [], "traj": [], "step": [], "obs": [], "clean": [], "key": []}
    for g in range(groups):
        task_seed = 1000 + g
        for j in range(group_size):
            env = make("webshop-noisy", ad_rate=ad_rate, split="test")
            obs, info = env.reset(task_seed)
            for t in range(env.max_steps):
                rows["group"].append(g)
                rows["traj"].append(g * group_size + j)
                rows["step"].append(t)
                rows["obs"].append(obs)
                rows["clean"].append(info.get("clean_observation", obs))
                rows["key"].append(repr(info["state_key"]))
                adm = [a for a in (info.get("admissible_actions") or []) if not a.startswith("search[<")]
                if rng.random() < epsilon and adm:
                    action = rng.choice(adm)
                else:
                    action = oracle_action(env.env if hasattr(env, "env") else env)
                obs, _r, done, info = env.step(action)
                if done:
                    break
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=16)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--epsilon", type=float, default=0.5)
    ap.add_argument("--ad-rate", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    t0 = time.perf_counter()
    rows = rollout(args.groups, args.group_size, args.epsilon, args.ad_rate, args.seed)
    n = len(rows["obs"])
    mean_len = np.mean([len(o) for o in rows["obs"]])
    print(f"{n} steps, {args.groups} groups x {args.group_size} trajectories, mean observation "
          f"{mean_len:.0f} chars, rollout {time.perf_counter() - t0:.1f} s")
    g, tr, st = np.array(rows["group"]), np.array(rows["traj"]), np.array(rows["step"])
    variants = [("state_key (true state)", lambda: group_exact(g, rows["key"])),
                ("exact (noisy text)", lambda: group_exact(g, rows["obs"]))]
    for thr in (1.0, 0.9, 0.8, 0.5, 0.2):
        variants.append((f"ro >= {thr}", lambda thr=thr: group_similar(g, tr, st, rows["obs"], GroupingSpec("ro", thr))))
    lines = [
        "| grouping | mean step-group size | singleton fraction | precision | recall | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for name, fn in variants:
        t = time.perf_counter()
        ids = fn()
        secs = time.perf_counter() - t
        s = step_group_stats(ids)
        q = grouping_quality(ids, rows["key"], g)
        lines.append(f"| {name} | {s['mean_size_per_row']:.2f} | {s['singleton_frac']:.3f} | {q['precision']:.3f} | "
                     f"{q['recall']:.3f} | {secs:.2f} |")
    print("\n".join(lines))
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True,
                         text=True).stdout.strip()
    print(f"\nmachine: {platform.machine()} {cpu}, python {platform.python_version()}")


if __name__ == "__main__":
    main()
