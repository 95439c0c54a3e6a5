"""Step-group sizes and grouping precision/recall on the dialogue envs: the env's true dialogue state vs the
user's paraphrased wording, grouped every way gigpo offers.

Rolls out groups of trajectories (same seed within a group) with an epsilon-oracle that words its questions in
varied ways (benchmarks/dialogue_policies.py), records each step's observation (the user's reply) and
``state_key``, then scores each grouping of the observations against the state keys with
``gigpo.algo.similarity.grouping_quality`` (the trainer's ``grouping/precision|recall|f1``).

    python benchmarks/dialogue_grouping.py [--env dialogue-booking] [--groups 16] [--group-size 8] [--epsilon 0.3]
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
from dialogue_policies import check_phrases, epsilon_oracle

from gigpo.algo import GroupingSpec, group_exact, group_similar, step_group_stats
from gigpo.algo.similarity import grouping_quality
from gigpo.envs import make


def rollout(name: str, groups: int, group_size: int, epsilon: float, seed: int) -> dict[str, list]:
    rng, policy = random.Random(seed), epsilon_oracle(epsilon)
    rows: dict[str, list] = {"group": [], "traj": [], "step": [], "obs": [], "key": []}
    env = make(name)
    for g in range(groups):
        for j in range(group_size):
            obs, info = env.reset(1000 + g)
            done, t = False, 0
            while not done:
                for k, v in zip(rows, (g, g * group_size + j, t, obs, repr(info["state_key"]))):
                    rows[k].append(v)
                obs, _r, done, info = env.step(policy(env, rng))
                t += 1
    return rows


def conversations(rows: dict[str, list]) -> list[str]:
    """Per row, the user's utterances of its trajectory up to that step, joined."""
    out, prev_traj, acc = [], None, []
    for traj, obs in zip(rows["traj"], rows["obs"]):
        acc = [*acc, obs] if traj == prev_traj else [obs]
        prev_traj = traj
        out.append(" | ".join(acc))
    return out


def table(rows: dict[str, list]) -> list[str]:
    g, tr, st = np.array(rows["group"]), np.array(rows["traj"]), np.array(rows["step"])
    variants = [("state_key (true state)", lambda: group_exact(g, rows["key"])),
                ("exact (wording)", lambda: group_exact(g, rows["obs"]))]
    for metric, thresholds in (("ro", (0.9, 0.7, 0.5)), ("indel", (0.9, 0.7, 0.5)), ("minhash", (0.5, 0.3))):
        for thr in thresholds:
            variants.append((f"{metric} >= {thr}", lambda m=metric, thr=thr: group_similar(g, tr, st, rows["obs"],
                                                                                           GroupingSpec(m, thr))))
    # The latest utterance alone is not the state; the whole conversation so far (user side) comes closer.
    conv = conversations(rows)
    variants.append(("exact (conversation so far)", lambda: group_exact(g, conv)))
    for thr in (0.9, 0.7):
        variants.append((f"ro >= {thr} (conversation so far)", lambda thr=thr: group_similar(g, tr, st, conv,
                                                                                          GroupingSpec("ro", thr))))
    lines = ["| grouping | mean step-group size | singleton fraction | precision | recall | f1 | seconds |",
             "|---|---|---|---|---|---|---|"]
    for label, fn in variants:
        t = time.perf_counter()
        ids = fn()
        secs = time.perf_counter() - t
        s, q = step_group_stats(ids), grouping_quality(ids, rows["key"], g)
        lines.append(f"| {label} | {s['mean_size_per_row']:.2f} | {s['singleton_frac']:.3f} | {q['precision']:.3f} "
                     f"| {q['recall']:.3f} | {q['f1']:.3f} | {secs:.2f} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="dialogue-booking", choices=["dialogue-booking", "dialogue-guess"])
    ap.add_argument("--groups", type=int, default=16)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--epsilon", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    check_phrases()
    t0 = time.process_time()
    rows = rollout(args.env, args.groups, args.group_size, args.epsilon, args.seed)
    n_keys = len(set(zip(rows["group"], rows["key"])))
    n_obs = len(set(zip(rows["group"], rows["obs"])))
    print(f"{args.env}: {len(rows['obs'])} steps, {args.groups} groups x {args.group_size} trajectories, "
          f"epsilon {args.epsilon}; distinct (group, state) {n_keys}, distinct (group, wording) {n_obs}")
    print("\n".join(table(rows)))
    print(f"\nCPU {time.process_time() - t0:.1f} s")


if __name__ == "__main__":
    main()
