"""Paired per-seed comparison of two sweep cells (same seed = same initial weights and task draws).

Reads ``<sweep dir>/cells/<cell>-<hash>/seed<k>/metrics.jsonl`` from one or more ``gigpo sweep`` output folders,
takes every seed that both cells ran, and prints per-seed final metrics, the paired differences B − A, how many
seeds B won, and the one-sided sign-test p-value P(at least that many wins | no difference) = Σ C(n,k)/2^n.

    python benchmarks/paired_seeds.py runs/sparse_credit runs/sparse_credit_more \
        --a algorithm=grpo --b algorithm=gigpo
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path


def final_metrics(path: Path, last_k: int) -> dict[str, float]:
    """Mean training success over the last ``last_k`` iterations and the last held-out evaluation."""
    recs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    train = [r for r in recs if "rollout/success_rate" in r]
    evals = [r["eval/success_rate"] for r in recs if r.get("eval/success_rate") is not None]
    tail = train[-last_k:]
    return {
        "final_success": sum(r["rollout/success_rate"] for r in tail) / len(tail),
        "final_eval_success": evals[-1] if evals else float("nan"),
        "iterations": float(train[-1]["iteration"]) if train else 0.0,
    }


def runs_of(dirs: list[Path], cell: str) -> dict[int, Path]:
    """seed -> metrics file of the cell named ``cell`` (the part before the config hash) in any of ``dirs``."""
    out: dict[int, Path] = {}
    for d in dirs:
        for cell_dir in sorted((d / "cells").glob(f"{cell}-*")):
            if cell_dir.name.rsplit("-", 1)[0] != cell:
                continue
            for seed_dir in cell_dir.glob("seed*"):
                f = seed_dir / "metrics.jsonl"
                if f.is_file():
                    out[int(seed_dir.name[4:])] = f
    return out


def sign_test(wins: int, n: int) -> float:
    return sum(math.comb(n, k) for k in range(wins, n + 1)) / 2**n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--a", required=True, help="baseline cell, e.g. algorithm=grpo")
    ap.add_argument("--b", required=True, help="compared cell, e.g. algorithm=gigpo")
    ap.add_argument("--last-k", type=int, default=10)
    args = ap.parse_args()
    ra, rb = runs_of(args.dirs, args.a), runs_of(args.dirs, args.b)
    seeds = sorted(set(ra) & set(rb))
    if not seeds:
        raise SystemExit(f"no seed ran both {args.a} and {args.b} in {', '.join(map(str, args.dirs))}")
    for metric in ("final_success", "final_eval_success"):
        rows = []
        for s in seeds:
            fa, fb = final_metrics(ra[s], args.last_k), final_metrics(rb[s], args.last_k)
            rows.append((s, fa[metric], fb[metric]))
        diffs = [b - a for _, a, b in rows]
        wins, ties = sum(d > 0 for d in diffs), sum(d == 0 for d in diffs)
        n = len(diffs) - ties
        print(f"\n{metric}: {args.a} vs {args.b}, {len(seeds)} seeds")
        print("| seed | " + args.a + " | " + args.b + " | difference |\n|---|---|---|---|")
        for s, a, b in rows:
            print(f"| {s} | {a:.3f} | {b:.3f} | {b - a:+.3f} |")
        mean_a = statistics.mean(a for _, a, _ in rows)
        mean_b = statistics.mean(b for _, _, b in rows)
        sd = statistics.stdev(diffs) if len(diffs) > 1 else float("nan")
        print(
            f"mean {mean_a:.3f} vs {mean_b:.3f}; paired difference {statistics.mean(diffs):+.3f} ± {sd:.3f} (std); "
            f"{args.b} higher on {wins}/{len(diffs)} seeds ({ties} ties); one-sided sign test p = "
            f"{sign_test(wins, n) if n else float('nan'):.3f}"
        )


if __name__ == "__main__":
    main()
