"""What one prompt costs when the observation is huge: the prompt builder as it is (only a tail of an observation
too long to fit is tokenized) against the reference that tokenizes every observation whole (the builder before
issue 29's fix), on the same text. Each arm runs in a fresh process so its peak memory is its own.

    python benchmarks/huge_observation.py [--mb 5] [--budget 2048] [--model tiny]

Prints per arm: wall and CPU seconds of one ``build`` (the observation both current and in the history, as an env
that returns the same page every step makes it), peak RSS, and whether the two arms' token ids are identical;
then the ratio reference / current.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, random, resource, sys, time, hashlib
from gigpo.agent.prompt import PromptBuilder
arm, mb, budget, model = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
words = ["shelf", "apple", "drawer", "the", "goal", "click", "buy", "now", "room", "door"]
rng = random.Random(0)
obs = " ".join(rng.choice(words) for _ in range(int(mb * 1e6) // 5))
if model == "tiny":
    from gigpo.models import tiny_tokenizer
    tok = tiny_tokenizer()
else:
    from gigpo.models import load_model
    tok = load_model(model).tokenizer
pb = PromptBuilder(tok, budget)
if arm == "whole":
    pb._tail_of = lambda text: None  # the reference: every observation tokenized whole
c, w = time.process_time(), time.perf_counter()
ids = pb.build("rules", "task", [(obs, "up")], obs, ["up", "down"])
print(json.dumps({"arm": arm, "wall_s": time.perf_counter() - w, "cpu_s": time.process_time() - c,
                  "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, "n_ids": len(ids),
                  "ids_sha": hashlib.sha256(str(ids).encode()).hexdigest()[:16]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=5.0, help="observation size in MB")
    ap.add_argument("--budget", type=int, default=2048, help="prompt.max_prompt_tokens")
    ap.add_argument("--model", default="tiny", help="whose tokenizer: tiny or a model name (smollm2-135m)")
    args = ap.parse_args()
    rows = {}
    for arm in ("tail", "whole"):
        out = subprocess.run([sys.executable, "-c", CHILD, arm, str(args.mb), str(args.budget), args.model],
                             capture_output=True, text=True, check=True).stdout
        rows[arm] = json.loads(out.strip().splitlines()[-1])
        r = rows[arm]
        print(f"{arm:5s}: {r['wall_s']:8.3f} s wall, {r['cpu_s']:8.3f} s CPU, peak {r['peak_gb']:.2f} GB, "
              f"{r['n_ids']} ids ({r['ids_sha']})")
    same = rows["tail"]["ids_sha"] == rows["whole"]["ids_sha"]
    print(f"same prompt: {same}; CPU ratio whole / tail: {rows['whole']['cpu_s'] / rows['tail']['cpu_s']:.0f}x, "
          f"peak {rows['whole']['peak_gb']:.2f} / {rows['tail']['peak_gb']:.2f} GB")


if __name__ == "__main__":
    main()
