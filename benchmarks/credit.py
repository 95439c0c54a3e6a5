"""The evidence benchmark for the step-level term: paired-seed arms on `lock` (two sizes) and, when registered,
`alfworld-gen`, plus the ω sweep; the paired difference of success AUC and final success per comparison with a
bootstrap 95% CI and a two-sided sign test (statistics: :mod:`gigpo.train.sweep.paired_stats`, through
benchmarks/credit_bridge.py ``paired``; the same code as ``gigpo sweep --paired``).

Every run goes through :func:`gigpo.train.sweep.run_sweep` (subprocess per run, resumable, failures reported,
seed-major order so an interrupted benchmark still has paired seeds). Equivalent `gigpo sweep` commands (they
share OUT, so identical configs are reused by hash):

    gigpo sweep --config lock --seeds 8 --out OUT --name lock5 \
        algorithm=grpo,gigpo,hgpo,rloo,rloo+step,dapo,dapo+step
    gigpo sweep --config lock --seeds 8 --out OUT --name lock8 env.rooms=8 env.max_steps=24 \
        algorithm=grpo,gigpo,hgpo,rloo,rloo+step,dapo,dapo+step
    gigpo sweep --config lock --seeds 8 --out OUT --name omega algorithm=gigpo \
        algorithm.step_weight=0.4,0.8,1.2,2.0        # ω = 0 is the grpo arm, ω = 1 the gigpo arm

One comparison of a study, with its statistics, in one command (it reuses the runs above by hash):

    gigpo sweep --config lock --seeds 8 --out OUT --name lock5 --paired grpo,gigpo algorithm=grpo,gigpo

Every arm of a study gets the same config except ``algorithm`` (and ω); DAPO's preset adds dynamic sampling,
which collects extra rounds, so its env steps per iteration are not equal to the others' (reported as such).

    python benchmarks/credit.py [--seeds 8] [--out runs/credit] [--studies lock5,lock8,omega,lock5c,lock8c,omega_c]
                                [--iterations N]
                                [--arms grpo,gigpo,...]   # run only these arms (the report pairs what exists)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from credit_bridge import HEADER, paired, row_md  # noqa: E402

from gigpo.envs.registry import get_spec  # noqa: E402
from gigpo.train.config import resolve_config_path  # noqa: E402
from gigpo.train.sweep import build_cells, run_sweep  # noqa: E402

ARMS = ["grpo", "gigpo", "hgpo", "rloo", "rloo+step", "dapo", "dapo+step", "graphgpo"]
PAIRS = [("grpo", "gigpo"), ("grpo", "hgpo"), ("gigpo", "hgpo"), ("rloo", "rloo+step"), ("dapo", "dapo+step"),
         ("grpo", "graphgpo"), ("gigpo", "graphgpo")]
STUDIES: dict[str, tuple[str, dict[str, list[str]], list[str]]] = {
    "lock5": ("lock", {"algorithm": ARMS}, []),
    "lock8": ("lock", {"algorithm": ARMS}, ["env.rooms=8", "env.max_steps=24"]),
    # constrained decoding: no invalid-token phase (docs/results/credit.md, cause 2); the grpo/gigpo cells are the
    # bridge's M3-constrained rung (same config, same hash: shared when OUT is the bridge's model/ folder)
    "lock5c": ("lock", {"algorithm": ARMS}, ["rollout.decoding=constrained"]),
    "omega": ("lock", {"algorithm": ["gigpo"], "algorithm.step_weight": ["0.4", "0.8", "1.2", "2.0"]}, []),
    # the same two studies with constrained decoding (no invalid-token phase); omega_c pairs against lock5c's grpo
    "lock8c": ("lock", {"algorithm": ARMS}, ["env.rooms=8", "env.max_steps=24", "rollout.decoding=constrained"]),
    "omega_c": ("lock", {"algorithm": ["gigpo"], "algorithm.step_weight": ["0.4", "0.8", "1.2", "2.0"]},
                ["rollout.decoding=constrained"]),
}
# an ω study is reported against the grpo arm (ω = 0) of the study with the same settings
OMEGA_BASE = {"omega": "lock5", "omega_c": "lock5c"}


def alfworld_study() -> tuple[str, dict[str, list[str]], list[str]] | None:
    """The alfworld-gen study when that env and its preset exist (built by another change), else None."""
    try:
        get_spec("alfworld-gen")
        config = str(resolve_config_path("alfworld-gen"))
    except Exception:  # not registered / no preset in this checkout
        return None
    return (config, {"algorithm": ARMS}, [])


def series(cell, key: str) -> dict[int, list[float]]:
    """Per seed of ``cell``, the values of metric ``key`` in its run's metrics.jsonl (runs without one: left out)."""
    out = {}
    for seed, run in cell.runs.items():
        f = Path(run) / "metrics.jsonl"
        if f.is_file():
            recs = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
            out[seed] = [r[key] for r in recs if key in r]
    return out


def curves(cell, iterations: int) -> dict[int, list[float]]:
    """Per seed, the first ``iterations`` values of sampled training success (runs that got that far)."""
    return {s: c[:iterations] for s, c in series(cell, "rollout/success_rate").items() if len(c) >= iterations}


def final_eval(cell) -> dict[int, list[float]]:
    """Per seed, the held-out success of the run's last evaluation (greedy unless train.eval_temperature is set),
    as a one-point curve: ``paired`` then compares final evaluations."""
    return {s: e[-1:] for s, e in series(cell, "eval/success_rate").items() if e}


OUTCOME_HEADER = ("| arm | solved (best 5-it. sampled success > 0.9) | collapsed after the solve (last 10 < 0.5) | "
                  "last-10 sampled ≥ 0.75 | greedy held-out 1.00 |\n|---|---|---|---|---|")


def outcomes(label: str, cell, iterations: int) -> str:
    """One row of the per-arm outcome table: per seed, whether the run solved the lock (a 5-iteration window of
    sampled success above 0.9; the window's last iteration is reported), lost it again (last-10 mean below 0.5),
    ended high (last-10 ≥ 0.75), and whether its final held-out evaluation was perfect."""
    runs, final = curves(cell, iterations), final_eval(cell)
    solved, collapsed, high = {}, [], []
    for seed, c in sorted(runs.items()):
        window = [sum(c[i - 4:i + 1]) / 5 for i in range(4, len(c))]
        first = next((i + 5 for i, w in enumerate(window) if w > 0.9), None)
        last10 = sum(c[-10:]) / len(c[-10:])
        if first is not None:
            solved[seed] = first
            if last10 < 0.5:
                collapsed.append(seed)
        high += [seed] if last10 >= 0.75 else []
    perfect = [s for s, e in sorted(final.items()) if e and e[-1] >= 1.0]
    n = len(runs)
    at = f" (iterations {min(solved.values())}–{max(solved.values())})" if solved else ""
    return (f"| {label} | {len(solved)}/{n}{at} | {len(collapsed)} {tuple(collapsed) if collapsed else ''} | "
            f"{len(high)}/{n} | {len(perfect)}/{len(final)} {tuple(perfect) if perfect else ''} |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/credit")
    p.add_argument("--seeds", type=int, default=8)
    p.add_argument("--studies", default="lock5,lock8,omega,alfworld")
    p.add_argument("--iterations", type=int, default=0, help="override train.iterations (0: the preset's)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--arms", default="", help="run only these algorithm arms (comma-separated; default all)")
    p.add_argument("--pythonpath", default=os.environ.get("CREDIT_PYTHONPATH", ""))
    p.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                   help="extra overrides of every run (e.g. train.eval_episodes=16: a final greedy evaluation, "
                        "reported as its own rows)")
    args = p.parse_args(argv)
    out = Path(args.out)
    studies = dict(STUDIES)
    alf = alfworld_study()
    if alf is not None:
        studies["alfworld"] = alf
    chosen = [s for s in args.studies.split(",") if s in studies]
    skipped = [s for s in args.studies.split(",") if s not in studies]
    extra = ([f"train.iterations={args.iterations}"] if args.iterations else []) + list(args.set)
    cells_of = {s: build_cells(studies[s][0], studies[s][1], studies[s][2] + extra) for s in chosen}
    only = set(args.arms.split(",")) if args.arms else None
    runnable = {s: [c for c in cs if only is None or c.grid.get("algorithm") in only] for s, cs in cells_of.items()}
    seeds = list(range(args.seeds))
    env = {"PYTHONPATH": args.pythonpath} if args.pythonpath else None
    for config in dict.fromkeys(studies[s][0] for s in chosen):  # one pool per config file, seed-major inside
        mine = [s for s in chosen if studies[s][0] == config]
        jobs = [(c, sd) for sd in seeds for s in mine for c in runnable[s]]
        cells = [c for s in mine for c in runnable[s]]
        results = run_sweep(config, cells, seeds, out, workers=args.workers, threads=1, extra_env=env, order=jobs)
        for r in results:
            if r.status == "failed":
                print(f"FAILED {r.cell.label} seed {r.seed}: {r.error[-300:]}", file=sys.stderr)
    for s in chosen:  # cells not run here (``--arms``): their runs are read where a sweep puts them
        for c in cells_of[s]:
            if not c.runs:
                c.runs = {sd: out / "cells" / c.key / f"seed{sd}" for sd in seeds}
    lines = [HEADER]
    for s in chosen:
        by_label = {c.label: c for c in cells_of[s]}
        its = cells_of[s][0].iterations
        arm = {c.grid.get("algorithm"): c for c in cells_of[s] if len(c.grid) == 1}
        for a, b in PAIRS if s not in OMEGA_BASE else []:
            if a in arm and b in arm and curves(arm[a], its) and curves(arm[b], its):  # arms without runs: no row
                lines.append(row_md(f"{s}: {a} → {b}", paired(curves(arm[a], its), curves(arm[b], its))))
                ea, eb = final_eval(arm[a]), final_eval(arm[b])
                if ea and eb:  # AUC and final of a one-point curve are both the final evaluation
                    lines.append(row_md(f"{s}: {a} → {b}, final held-out eval", paired(ea, eb)))
        if s in OMEGA_BASE and OMEGA_BASE[s] in cells_of:
            base = {c.grid["algorithm"]: c for c in cells_of[OMEGA_BASE[s]]}
            for label, c in by_label.items():
                lines.append(row_md(f"{s}: grpo → gigpo {label.split(', ')[-1]}",
                                    paired(curves(base["grpo"], its), curves(c, its))))
    for s in chosen:
        its = cells_of[s][0].iterations
        rows = [outcomes(f"{s}: {c.label}", c, its) for c in cells_of[s] if curves(c, its)]
        if rows and s not in OMEGA_BASE:
            lines += ["", OUTCOME_HEADER] + rows
    if skipped:
        lines.append(f"\nnot run (env not registered here or unknown study): {', '.join(skipped)}")
    text = "\n".join(lines)
    out.mkdir(parents=True, exist_ok=True)
    (out / "credit.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
