"""GiGPO vs GiGPO + branch rollouts at matched env-step budgets, paired seeds (issue 41 part 4; protocol:
docs/results/branching_protocol.md, results: docs/results/branching.md).

Each study is two arms that differ only in ``rollout.branch`` (off | every, M = 2 siblings, every K steps); every
run goes through :func:`gigpo.train.sweep.run_sweep` (a subprocess per run, resumable, seed-major so an
interrupted study still has paired seeds). Per study the report gives the paired differences B − A of sampled
success AUC, final sampled success and final greedy held-out success (bootstrap 95% CI, sign test:
benchmarks/credit_bridge.py ``paired``), the env steps per iteration and the mean step-group size of each arm, and
the CPU minutes the study's runs used (``RUSAGE_CHILDREN``).

    python benchmarks/branching.py [--out runs/branching] [--studies lock8,ads,tictactoe] [--seeds 4]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from credit_bridge import HEADER, paired, row_md  # noqa: E402

from gigpo.train.sweep import build_cells, run_sweep  # noqa: E402

COMMON = ["algorithm=gigpo", "rollout.decoding=constrained", "train.eval_episodes=32"]
#: study -> (config, overrides of both arms, branch step K)
STUDIES: dict[str, tuple[str, list[str], int]] = {
    "lock8": ("lock", ["env.rooms=8", "env.max_steps=24", "algorithm.normalize=mean", "train.iterations=150",
                       "train.checkpoint_every=50"], 4),
    "ads": ("lock", ["env=lock-noisy", "env.ad_rate=1.0", "grouping.metric=observation", "train.iterations=60"], 4),
    "tictactoe": ("textarena-tictactoe", ["env.opponent=random", "train.iterations=20"], 2),
}


def arms(study: str):
    """The study's two cells: plain GiGPO and GiGPO + branching (every K, M = 2)."""
    config, fixed, k = STUDIES[study]
    plain = build_cells(config, {"rollout.branch": ["off"]}, COMMON + fixed)[0]
    branched = build_cells(config, {"rollout.branch": ["every"]},
                           COMMON + fixed + ["rollout.branching.siblings=2", f"rollout.branching.every={k}"])[0]
    return config, plain, branched


def records(run: Path) -> list[dict]:
    f = run / "metrics.jsonl"
    return [json.loads(x) for x in f.read_text().splitlines() if x.strip()] if f.is_file() else []


def per_seed(cell, key: str, iterations: int) -> dict[int, list[float]]:
    """Per seed that finished, the series of metric ``key`` (the first ``iterations`` values)."""
    out = {}
    for seed, run in cell.runs.items():
        values = [r[key] for r in records(Path(run)) if r.get(key) is not None]
        if len([r for r in records(Path(run)) if "rollout/success_rate" in r]) >= iterations and values:
            out[seed] = values[:iterations]
    return out


def final_eval(cell, iterations: int) -> dict[int, list[float]]:
    """Per seed that finished, its last held-out evaluation as a one-point curve (an eval at iteration 0 too,
    where the preset has one, is not the final one)."""
    out = {}
    for seed, run in cell.runs.items():
        recs = records(Path(run))
        evals = [r["eval/success_rate"] for r in recs if r.get("eval/success_rate") is not None]
        if len([r for r in recs if "rollout/success_rate" in r]) >= iterations and evals:
            out[seed] = evals[-1:]
    return out


def mean_of(cell, key: str, iterations: int) -> float:
    runs = per_seed(cell, key, iterations)
    return float(np.mean([np.mean(v) for v in runs.values()])) if runs else float("nan")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/branching")
    p.add_argument("--studies", default="lock8,ads,tictactoe")
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--seed-start", type=int, default=0)
    p.add_argument("--report-only", action="store_true", help="do not train; report what exists")
    args = p.parse_args(argv)
    out = Path(args.out)
    seeds = list(range(args.seed_start, args.seed_start + args.seeds))
    lines, cpu_lines = [HEADER], []
    for study in args.studies.split(","):
        config, a, b = arms(study)
        if not args.report_only:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            jobs = [(c, s) for s in seeds for c in (a, b)]
            for r in run_sweep(config, [a, b], seeds, out / study, workers=1, threads=1, order=jobs):
                if r.status == "failed":
                    print(f"FAILED {study} {r.cell.label} seed {r.seed}: {r.error[-300:]}", file=sys.stderr)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / 60
            cpu_lines.append(f"{study}: {cpu:.1f} CPU-min for the runs made now (seeds {seeds})")
        else:
            for c in (a, b):
                c.runs = {s: out / study / "cells" / c.key / f"seed{s}" for s in seeds}
        its = a.iterations
        sa, sb = per_seed(a, "rollout/success_rate", its), per_seed(b, "rollout/success_rate", its)
        if sa and sb:
            lines.append(row_md(f"{study}: gigpo → gigpo + branch, sampled", paired(sa, sb)))
        ea, eb = (final_eval(c, its) for c in (a, b))
        if ea and eb:
            lines.append(row_md(f"{study}: gigpo → gigpo + branch, final greedy held-out", paired(ea, eb)))
        for name, c in (("gigpo", a), ("gigpo + branch", b)):
            cpu_lines.append(f"{study} {name}: seeds finished {sorted(per_seed(c, 'rollout/success_rate', its))}, "
                             f"env steps/iteration {mean_of(c, 'rollout/steps', its):.1f}, mean step-group size "
                             f"{mean_of(c, 'grouping/step_group/mean_size', its):.2f}, trajectories/iteration "
                             f"{mean_of(c, 'grouping/num_trajectories', its):.1f}")
    text = "\n".join(lines + [""] + cpu_lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / "branching.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
