"""Untrained SmolLM2-135M-Instruct, free vs constrained decoding, on every built-in env that lists admissible
actions: valid-action rate and success on the same held-out seeds (docs/results/smollm2_learning.md).

Every env gets the same prompt settings (env rules as the system message, admissible actions listed, one history
entry, plain format) and step cap; free decoding may write up to ``--free-tokens`` tokens (the model tends to
write prose), constrained decoding stops when an admissible action is complete. Envs whose constructor needs
data that is not on this machine are reported as skipped, and so are the ``-noisy`` wrappers (same actions).

    python benchmarks/decoding_table.py [--episodes 4] [--max-steps 6] [--envs gridgoal frozenlake ...]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
import yaml

from gigpo.envs.registry import list_envs, make
from gigpo.train.evaluate import evaluate_model


def envs_with_admissible_actions(names: list[str] | None) -> tuple[list[str], dict[str, str]]:
    ok, skipped = [], {}
    for name in names or [n for n in list_envs() if not n.endswith("-noisy")]:  # wrappers: same actions
        try:
            env = make(name)
            _, info = env.reset(2**30)
            env.close()
        except Exception as e:  # noqa: BLE001 - report and move on: data-backed envs without their data
            skipped[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"
            continue
        if info.get("admissible_actions"):
            ok.append(name)
        else:
            skipped[name] = "no admissible actions"
    return ok, skipped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=4)
    ap.add_argument("--max-steps", type=int, default=6)
    ap.add_argument("--free-tokens", type=int, default=24)
    ap.add_argument("--envs", nargs="*")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    envs, skipped = envs_with_admissible_actions(args.envs)
    rows = []
    print("| env | decoding | valid-action rate | success | episodes | wall s |")
    print("|---|---|---|---|---|---|")
    for env in envs:
        for decoding in ("free", "constrained"):
            cfg = {"env": {"name": env}, "model": {"name": "smollm2-135m"},
                   "prompt": {"format": "plain", "history_length": 1, "show_admissible": True, "instructions": True,
                              "max_prompt_tokens": 1024},
                   "rollout": {"decoding": decoding, "max_steps": args.max_steps,
                               "max_response_tokens": args.free_tokens if decoding == "free" else 32},
                   "train": {"threads": args.threads}}
            with tempfile.TemporaryDirectory() as d:
                path = Path(d) / "cfg.yaml"
                path.write_text(yaml.safe_dump(cfg))
                t0 = time.perf_counter()
                summary, _ = evaluate_model(None, model="smollm2-135m", config=str(path), episodes=args.episodes)
                wall = time.perf_counter() - t0
            row = {"env": env, "decoding": decoding, "valid_action_rate": summary["valid_action_rate"],
                   "success_rate": summary["success_rate"], "episodes": args.episodes, "wall_s": wall}
            rows.append(row)
            print(f"| {env} | {decoding} | {row['valid_action_rate']:.2f} | {row['success_rate']:.2f} | "
                  f"{args.episodes} | {wall:.0f} |", flush=True)
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "skipped": skipped}, indent=1))


if __name__ == "__main__":
    main()
