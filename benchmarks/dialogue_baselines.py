"""Scripted baselines on the dialogue envs (rules user): oracle, varied-wording oracle, naive, random intents.

    python benchmarks/dialogue_baselines.py [--episodes 500]
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
from dialogue_policies import check_phrases, epsilon_oracle, naive, random_intent, varied_oracle

from gigpo.envs import make


def evaluate(name: str, policy, episodes: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    env = make(name)
    won, score, ret, turns = [], [], [], []
    for ep in range(episodes):
        env.reset(10_000 + ep)
        total, done = 0.0, False
        while not done:
            _, r, done, info = env.step(policy(env, rng))
            total += r
        won.append(info["won"]), score.append(info["score"]), ret.append(total), turns.append(info["turn"])
    return {"success": np.mean(won), "score": np.mean(score), "return": np.mean(ret), "turns": np.mean(turns)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    check_phrases()
    policies = {"oracle": lambda env, rng: env.oracle_action(), "oracle, varied wording": varied_oracle,
                "epsilon-oracle (0.3)": epsilon_oracle(0.3), "naive": naive, "random intent": random_intent}
    print("| env | agent | success | score | return | turns |\n|---|---|---|---|---|---|")
    t0 = time.process_time()
    for name in ("dialogue-guess", "dialogue-booking"):
        for label, pol in policies.items():
            m = evaluate(name, pol, args.episodes, args.seed)
            print(f"| {name} | {label} | {m['success']:.3f} | {m['score']:.3f} | {m['return']:+.3f} | "
                  f"{m['turns']:.2f} |")
    print(f"\n{args.episodes} episodes each (seeds 10000..), CPU {time.process_time() - t0:.1f} s")


if __name__ == "__main__":
    main()
