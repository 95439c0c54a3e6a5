"""The settings search of issue 42 (docs/results/smollm2_learning.md, "Held-out grids and TicTacToe"): one row per
run directory — held-out greedy success at each evaluation (iteration 0 = the untrained model; TicTacToe: wins,
with draws and losses), sampled success AUC, and the per-iteration signal diagnostics that explain it: the
fraction of task groups whose returns vary (``grouping/episode_group/signal_frac``, logged since this search
began; blank for runs started before), rows with a zero advantage, mean step-group size, entropy over the first
and last 5 iterations, gradient norm, approx. KL and clip fraction per update; CPU minutes from the
``/usr/bin/time`` line of ``RUN_DIR.log`` when present.

    python benchmarks/smollm2_search.py runs/G1-s0 runs/G4-s1 ...
    python benchmarks/smollm2_search.py docs/results/smollm2_learning/search/*-s*     # the committed copies

The committed copies (``docs/results/smollm2_learning/search/RUN/``) keep each run's config.yaml, its
metrics.jsonl gzipped and the time lines of its logs (``run.log.txt``, ``run-resume.log.txt``).
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
import sys
from pathlib import Path


def mean(recs: list[dict], key: str) -> str:
    vals = [r[key] for r in recs if isinstance(r.get(key), (int, float)) and r[key] == r[key]]
    return f"{statistics.fmean(vals):.3f}" if vals else ""


def cpu_minutes(run: Path) -> str:
    """Sum of every ``CPU_USER u CPU_SYS s`` line in RUN.log and RUN-resume.log (a resumed run has two)."""
    total, found = 0.0, False
    for log in (run.with_name(run.name + ".log"), run.with_name(run.name + "-resume.log"), run / "run.log.txt",
                run / "run-resume.log.txt"):
        if log.is_file():
            for u, s in re.findall(r"CPU_USER ([\d.]+) CPU_SYS ([\d.]+)", log.read_text(errors="replace")):
                total, found = total + float(u) + float(s), True
    return f"{total / 60:.1f}" if found else ""


def outcome(rec: dict) -> str:
    """Held-out success; for a two-player game (a ``seat`` key) also draws and losses, from the mean return: a win
    returns +1, a loss -1, a draw 0 (every held-out move is valid under constrained decoding, so no penalty)."""
    wins = rec["eval/success_rate"]
    if not any(k.startswith("eval/seat") for k in rec):
        return f"{wins:.3f}"
    losses = wins - rec["eval/episode_return"]
    return f"{wins:.3f} (d {1 - wins - losses:.2f}, l {losses:.2f})"


def row(run: Path) -> str:
    plain, packed = run / "metrics.jsonl", run / "metrics.jsonl.gz"
    text = plain.read_text() if plain.is_file() else gzip.decompress(packed.read_bytes()).decode()
    recs = [json.loads(line) for line in text.splitlines() if line.strip()]
    evals = ", ".join(f"{r['iteration']}: {outcome(r)}" for r in recs if "eval/success_rate" in r)
    train = [r for r in recs if "rollout/success_rate" in r]
    cells = [run.name, str(len(train)), evals, mean(train, "rollout/success_rate"),
             mean(train, "grouping/episode_group/signal_frac"), mean(train, "grouping/adv/zero_frac"),
             mean(train, "grouping/step_group/mean_size"), mean(train[:5], "loss/entropy"),
             mean(train[-5:], "loss/entropy"), mean(train, "update/grad_norm"), mean(train, "loss/approx_kl"),
             mean(train, "loss/clip_frac"), cpu_minutes(run)]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    print("| run | iterations | held-out greedy success (iteration: value) | sampled success AUC | groups with "
          "signal | rows with A = 0 | step-group size | entropy first 5 | entropy last 5 | grad norm | approx KL "
          "| clip frac | CPU min |")
    print("|" + "---|" * 13)
    for arg in sys.argv[1:]:
        print(row(Path(arg)))


if __name__ == "__main__":
    main()
