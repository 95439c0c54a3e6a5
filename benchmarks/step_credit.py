"""Benchmark: does step-level credit help? GiGPO vs GRPO vs RLOO (± step) and the ω sweep, on bench-sokoban.

Runs every (cell, seed) of both studies in ONE pool (so the workers never idle between them), through the same
machinery as `gigpo sweep` (gigpo.train.sweep: subprocess per run, resumable, failures reported), then writes two
aggregates into OUT (``arms.*`` and ``omega.*``: CSV, markdown, PNGs) and the report docs/results/step_credit.md
with the plots copied next to it. Equivalent `gigpo sweep` commands (sharing OUT, so runs are reused by hash):

    gigpo sweep --config bench-sokoban --seeds 3 --workers 2 --out OUT --name arms algorithm=grpo,rloo,gigpo,rloo+step
    gigpo sweep --config bench-sokoban --seeds 3 --workers 2 --out OUT --name omega algorithm=gigpo \
        algorithm.step_weight=0,0.2,0.4,0.8,1.2,2.0

ω = 0 is not trained again: gigpo with ω = 0 computes A = A_E + 0·A_S = A_E, exactly GRPO's advantage, so the
ω = 0 point is the grpo arm (same seeds, same config otherwise). ω = 1.0 is the gigpo arm.

    python benchmarks/step_credit.py [--out runs/step_credit] [--workers 2] [--seeds 3] [--docs docs/results]
        [key=value ...]   # extra fixed overrides, e.g. train.iterations=10 for a smoke run
"""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from gigpo.train.config import resolve_config_path
from gigpo.train.rundir.provenance import cpu_model
from gigpo.train.sweep import _find_existing, build_cells, run_finished, run_sweep
from gigpo.train.sweep.aggregation import aggregate, markdown_table, write_outputs

ARMS = ["grpo", "rloo", "gigpo", "rloo+step"]
OMEGAS = ["0.2", "0.4", "0.8", "1.2", "2.0"]  # plus 0 (= grpo arm) and 1.0 (= gigpo arm)


def freeze_code(dst: Path) -> Path:
    """Copy the repository's src/ (presets included: they live in src/gigpo/configs) to ``dst`` once (kept if
    present, so a resumed benchmark keeps its code); returns the src dir to put first on PYTHONPATH."""
    root = Path(__file__).resolve().parents[1]
    if not (dst / "src" / "gigpo").exists():
        shutil.copytree(root / "src", dst / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return (dst / "src").resolve()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="bench-sokoban")
    p.add_argument("--out", default="runs/step_credit")
    p.add_argument("--docs", default="docs/results", help="where step_credit.md and its PNGs go ('' = skip)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--last-k", type=int, default=10)
    p.add_argument("--smooth", type=int, default=5)
    p.add_argument("--snapshot", default="",
                   help="copy src/ (with the presets) here first and run every cell on that frozen copy (PYTHONPATH), "
                        "so edits to the working tree during a long benchmark cannot mix code versions")
    p.add_argument("--aggregate-only", action="store_true",
                   help="train nothing: aggregate the finished runs and list the missing ones")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    args = p.parse_args(argv)
    extra_env = None
    if args.snapshot:
        extra_env = {"PYTHONPATH": str(freeze_code(Path(args.snapshot)))}

    config = str(resolve_config_path(args.config).resolve())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.seeds))
    fixed = list(args.overrides)
    arms = build_cells(config, {"algorithm": ARMS}, fixed)
    omega = build_cells(config, {"algorithm.step_weight": OMEGAS}, [*fixed, "algorithm=gigpo"])
    started = datetime.now(timezone.utc)
    t0 = time.perf_counter()
    # Arms first (all seeds), then the ω cells seed-major: if the budget runs out, the main comparison is
    # complete and every ω value has as many seeds as possible.
    jobs = [(c, s) for c in arms for s in seeds] + [(c, s) for s in seeds for c in omega]
    if args.aggregate_only:
        for c in arms + omega:
            for s in seeds:
                c.runs[s] = _find_existing(out, c, s) or out / "cells" / c.key / f"seed{s}"
        results = []
    else:
        results = run_sweep(config, arms + omega, seeds, out, args.workers, extra_env=extra_env, order=jobs)
    wall = time.perf_counter() - t0
    failed = [r for r in results if r.status == "failed"]
    missing = [(c, s) for c, s in jobs if not run_finished(c.runs[s], c.iterations)
               and not any(r.cell is c and r.seed == s for r in failed)]
    finished = [c.runs[s] for c, s in jobs if run_finished(c.runs[s], c.iterations)]
    if finished:  # span of the benchmark from its run directories (also right for --aggregate-only)
        first = min((d / "config.yaml").stat().st_mtime for d in finished)
        last = max((d / "metrics.jsonl").stat().st_mtime for d in finished)
        started = datetime.fromtimestamp(first, timezone.utc)
        wall = last - first
    fixed_txt = (" " + " ".join(fixed)) if fixed else ""
    cmd_arms = (f"gigpo sweep --config {args.config} --seeds {args.seeds} --workers {args.workers} --out {out} "
                f"--name arms --last-k {args.last_k} --smooth {args.smooth}{fixed_txt} algorithm={','.join(ARMS)}")
    cmd_omega = (f"gigpo sweep --config {args.config} --seeds {args.seeds} --workers {args.workers} --out {out} "
                 f"--name omega --last-k {args.last_k} --smooth {args.smooth}{fixed_txt} algorithm=gigpo "
                 f"algorithm.step_weight={','.join(OMEGAS)}")

    agg_arms = aggregate(arms, seeds, args.last_k)
    f_arms = write_outputs(out, "arms", agg_arms, {"algorithm": ARMS}, [r for r in failed if r.cell in arms],
                           cmd_arms, args.last_k, args.smooth)
    # The ω view: ω=0 is the grpo arm, ω=1.0 the gigpo arm (see the module docstring).
    by_name = {c.grid["algorithm"]: c for c in arms}
    w0 = by_name["grpo"]
    w1 = by_name["gigpo"]
    from gigpo.train.sweep import Cell

    view = [Cell({"algorithm.step_weight": "0"}, w0.overrides, w0.iterations, w0.key, dict(w0.runs))]
    for c in omega:
        view.append(c)
    view.append(Cell({"algorithm.step_weight": "1.0"}, w1.overrides, w1.iterations, w1.key, dict(w1.runs)))
    view.sort(key=lambda c: float(c.grid["algorithm.step_weight"]))
    view = [v for i, v in enumerate(view) if i == 0 or v.grid != view[i - 1].grid]  # 1.0 may already be in OMEGAS
    agg_omega = aggregate(view, seeds, args.last_k)
    grid_omega = {"algorithm.step_weight": [c.grid["algorithm.step_weight"] for c in view]}
    f_omega = write_outputs(out, "omega", agg_omega, grid_omega, [r for r in failed if r.cell in omega],
                            cmd_omega, args.last_k, args.smooth)
    for f in f_arms + f_omega:
        print(f"wrote {f}")
    print(f"wall {wall:.0f}s, {len(failed)} failed run(s)")
    if args.docs:
        write_report(Path(args.docs), out, args, config, agg_arms, agg_omega, f_arms + f_omega, failed, started,
                     wall, cmd_arms, cmd_omega, missing)
    return 1 if failed else 0


def _findings(docs: Path) -> list[str]:
    """The hand-written analysis (docs/results/step_credit_findings.md), kept separate so a rerun keeps it."""
    f = docs / "step_credit_findings.md"
    return [f.read_text().rstrip(), ""] if f.exists() else []


def write_report(docs: Path, out: Path, args, config: str, agg_arms, agg_omega, files, failed, started, wall,
                 cmd_arms: str, cmd_omega: str, missing: list) -> None:
    """docs/results/step_credit.md: machine, date, commands, both tables, the plots (copied), failures."""
    from gigpo.train.config import load_config

    cfg = load_config(config, list(args.overrides))
    docs.mkdir(parents=True, exist_ok=True)
    pngs = []
    for f in files:
        if f.suffix == ".png":
            dst = docs / f"step_credit_{f.name}"
            shutil.copyfile(f, dst)
            pngs.append(dst.name)
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    except OSError:
        rev = ""
    import os

    lines = [
        "# Step-level credit on Sokoban: GiGPO vs GRPO vs RLOO (± step), and the ω sweep",
        "",
        f"- date (UTC, start): {started.strftime('%Y-%m-%d %H:%M')}; wall time {wall / 60:.1f} min "
        f"with {args.workers} worker(s) (first run started → last run finished)",
        f"- machine: {os.cpu_count()} cores (`nproc`), {cpu_model()}, Python {platform.python_version()}; "
        "the machine was shared with other jobs during the run",
        f"- code: git {rev or '?'} plus the uncommitted working tree"
        + (f", frozen at the start into `{args.snapshot}` (all runs used that copy)" if args.snapshot else ""),
        f"- config: `configs/{Path(config).name}`; seeds 0..{args.seeds - 1}",
        f"- command: `python benchmarks/step_credit.py --out {out} --workers {args.workers} --seeds {args.seeds}"
        + (f" --snapshot {args.snapshot}" if args.snapshot else "")
        + (" " + " ".join(args.overrides) if args.overrides else "") + "`, equivalent to",
        f"  - `{cmd_arms}`",
        f"  - `{cmd_omega}` (ω = 0 taken from the grpo arm, ω = 1.0 from the gigpo arm: identical configs)",
        "",
        f"**Definitions.** `final_success` = mean of the training batches' success rate over each run's last "
        f"{args.last_k} iterations (sampled at temperature {cfg.rollout.temperature:g}, "
        f"{cfg.rollout.groups * cfg.rollout.group_size} episodes per iteration), then mean ± sample std "
        f"over seeds; `final_eval_success` = success on {cfg.train.eval_episodes} held-out rooms (temperature "
        f"{cfg.train.eval_temperature:g}, i.e. greedy) after the last iteration; "
        "`singleton_frac` = fraction of step rows alone in their step group (last iterations); `env_steps` = "
        "agent steps over the run; `seconds` = rollout + advantage + update time per run.",
        "",
        *_findings(docs),
        "## Arms (equal iterations, groups × group size, and therefore equal episodes)",
        "",
        markdown_table(agg_arms, ["algorithm"]),
        "",
        "## ω sweep (gigpo, A = A_E + ω A_S)",
        "",
        markdown_table(agg_omega, ["algorithm.step_weight"]),
        "",
        "## Plots",
        "",
    ]
    lines += [f"![{n}]({n})" for n in pngs]
    lines.append("")
    if failed:
        lines += [f"## Failed runs ({len(failed)})", ""]
        lines += [f"- {r.cell.label} seed={r.seed}: {r.error.splitlines()[0] if r.error else ''}" for r in failed]
        lines.append("")
    if missing:
        lines += [f"## Not run ({len(missing)}: out of the time budget; rerun the command to complete them)", ""]
        lines += [f"- {c.label} seed={s}" for c, s in missing]
        lines.append("")
    lines += ["## Per-seed numbers (final_success / final_eval_success)", ""]
    arm_keys = {a["cell"].key for a in agg_arms}
    for a in agg_arms + [a for a in agg_omega if a["cell"].key not in arm_keys]:  # ω = 0, 1.0 are arms
        parts = [f"seed {s}: {f.get('final_success', float('nan')):.3f} / {f.get('final_eval_success', float('nan')):.3f}"
                 for s, f in sorted(a["per_seed"].items())]
        lines.append(f"- {a['cell'].label}: " + ("; ".join(parts) or "no finished run"))
    lines += ["", "Per-iteration mean, std and n over seeds of every logged metric: step_credit_arms.csv, "
              "step_credit_omega.csv (copies of the sweep's CSVs).", ""]
    for name in ("arms.csv", "omega.csv"):
        if (out / name).exists():
            shutil.copyfile(out / name, docs / f"step_credit_{name}")
    (docs / "step_credit.md").write_text("\n".join(lines))
    print(f"wrote {docs / 'step_credit.md'}")


if __name__ == "__main__":
    sys.exit(main())
