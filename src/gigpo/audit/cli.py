"""``gigpo audit RUN_DIR|CHECKPOINT``: the credit audit's command line and its table (gigpo.audit.run)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from gigpo.audit.estimators import ARMS


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gigpo audit", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Does an estimator's credit point at the steps that matter? Samples steps from fresh rollouts\n"
                    "of a checkpoint's policy, estimates the reference advantage A* = Q - V at each by Monte-Carlo\n"
                    "continuations (the env restored by verified replay), and scores every estimator's advantage\n"
                    "on the same steps: Spearman rank correlation with A*, sign agreement where |A*| > 2 SE, and\n"
                    "the fraction of steps with a step-level signal, each with a bootstrap 95% CI. e.g.\n"
                    "  gigpo audit runs/quickstart --states 48 --continuations 8")
    p.add_argument("path", metavar="RUN_DIR", help="a run directory (its newest checkpoint, or --iteration) or a "
                                                   "checkpoint directory")
    p.add_argument("--iteration", type=int, default=None, help="audit the run's checkpoint of this iteration")
    p.add_argument("--states", type=int, default=48, help="steps sampled per collection (default 48)")
    p.add_argument("--continuations", type=int, default=8, help="Monte-Carlo continuations K per state and per "
                                                                "action (default 8)")
    p.add_argument("--estimators", default=",".join(ARMS), help=f"comma-separated, of: {', '.join(ARMS)}")
    p.add_argument("--seed", type=int, default=0, help="task seeds and step sampling")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples (default 2000)")
    p.add_argument("--branch-every", type=int, default=0, help="branched GiGPO: branch at steps K, 2K, ... "
                                                               "(default: the run's, else cap // 4)")
    p.add_argument("--siblings", type=int, default=0, help="branched GiGPO: members per branch state (default 2)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--import", dest="imports", action="append", metavar="MODULE",
                   help="import MODULE first (repeatable): a module that registers the run's env or estimators")
    return p


def _ci(score: dict, digits: int = 2) -> str:
    v, lo, hi = score["value"], score["lo"], score["hi"]
    if not math.isfinite(v):
        return "n/a"
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"{v:.{digits}f}"
    return f"{v:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def format_table(result: dict) -> str:
    """The audit as a Markdown table (one row per estimator) and a line per collection."""
    lines = [f"gigpo audit: {result['checkpoint']} (iteration {result['iteration']}, env {result['env']}, "
             f"{result['states']} states x {result['continuations']} continuations, gamma {result['gamma']})",
             "", "| estimator | Spearman rho with A* [95% CI] | sign agreement, |A*| > 2 SE [95% CI] | clear rows "
             "| step-signal fraction [95% CI] |", "|---|---|---|---|---|"]
    for e in result["estimators"]:
        lines.append(f"| {e['label']} | {_ci(e['spearman'])} | {_ci(e['sign_agreement'])} | "
                     f"{int(e['clear_rows']['value'])} | {_ci(e['step_signal'])} |")
    for label, c in result["collections"].items():
        lines.append(f"\n{label} collection: {c['trajectories']} trajectories, {c['rows']} rows, success "
                     f"{c['won']:.2f}; {c['sampled']} sampled rows, mean |A*| {c['mean_abs_reference']:.3f}, "
                     f"mean SE {c['mean_se']:.3f}")
    lines.append(f"\nCPU time {result['cpu_seconds']:.0f} s" + (f"; written to {result['written']}"
                                                                  if result.get("written") else ""))
    return "\n".join(lines)


def audit_main(argv: list[str]) -> int:
    from gigpo.audit.run import AuditOptions, run_audit
    from gigpo.envs.base import EnvError
    from gigpo.envs.registry import EnvImportError, import_env_modules
    from gigpo.train.config import ConfigError
    from gigpo.train.rundir.provenance import import_recorded

    args = build_parser().parse_args(argv)
    options = AuditOptions(states=args.states, continuations=args.continuations,
                           estimators=[e.strip() for e in args.estimators.split(",") if e.strip()], seed=args.seed,
                           resamples=args.resamples, branch_every=args.branch_every, siblings=args.siblings,
                           progress=not args.no_progress)
    try:
        import_env_modules(args.imports or [])
        if Path(args.path).exists():
            import_recorded(args.path, args.imports or [])
        result = run_audit(args.path, options, args.iteration)
    except (ConfigError, FileNotFoundError, ValueError, EnvError, EnvImportError) as err:
        print(f"gigpo audit: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    print(format_table(result))
    return 0
