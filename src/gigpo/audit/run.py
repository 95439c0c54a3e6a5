"""``gigpo audit``: does an estimator's credit point at the steps that matter? (docs/design.md "Credit audit")

1. Load a checkpoint's policy and its run's config (:func:`gigpo.train.evaluate.locate_checkpoint`).
2. Collect fresh groups with it, as training does (``rollout.groups`` × ``rollout.group_size``, task seeds of the
   audit's own stream), recording every row's state; sample ``states`` rows uniformly.
3. For each sampled row, the Monte-Carlo reference A* = Q − V with its standard error from K continuations
   (:mod:`gigpo.audit.reference`).
4. Every chosen estimator's advantage on the same rows (:mod:`gigpo.audit.estimators`); branched GiGPO is scored
   on a second collection grown with ``rollout.branch=every`` at the same budget, with its own sampled rows and
   reference (its rows are other rows: it needs the tree).
5. Per estimator: Spearman ρ with A*, sign agreement where |A*| > 2 SE, fraction of rows with a step-level
   signal, each with a bootstrap 95% CI (:mod:`gigpo.audit.stats`). Written as JSON under ``RUN_DIR/audit/``,
   where ``gigpo view`` finds it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gigpo.audit.estimators import ARMS, Arm, arm_advantages
from gigpo.audit.reference import collect_recorded, reference_advantages, stderr_bar
from gigpo.audit.stats import bootstrap_index, credit_scores
from gigpo.train.config import ConfigError

#: task-seed stream of the audit's collections (apart from training's and evaluation's)
AUDIT_STREAM = 0x41554449
MAX_STATES, MAX_CONTINUATIONS = 10_000, 1_000


@dataclass
class AuditOptions:
    """``states`` rows sampled per collection, ``continuations`` K per state, ``estimators`` (names of
    :data:`gigpo.audit.estimators.ARMS`), ``seed`` (task seeds and row sampling), ``resamples`` of the bootstrap,
    ``branch_every`` / ``siblings`` of branched GiGPO's collection (0: the run's own, else every cap // 4, M = 2)."""

    states: int = 48
    continuations: int = 8
    estimators: list[str] = field(default_factory=lambda: list(ARMS))
    seed: int = 0
    resamples: int = 2000
    branch_every: int = 0
    siblings: int = 0
    progress: bool = True

    def problem(self) -> str | None:
        """None when the options are in range, else the one line that says which is not."""
        if not 1 <= self.states <= MAX_STATES:
            return f"--states must be in [1, {MAX_STATES}], got {self.states}"
        if not 2 <= self.continuations <= MAX_CONTINUATIONS:
            return f"--continuations must be in [2, {MAX_CONTINUATIONS}] (a standard error needs two), got " \
                   f"{self.continuations}"
        unknown = [e for e in self.estimators if e not in ARMS]
        if unknown or not self.estimators:
            return f"--estimators: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(ARMS)}"
        if self.resamples < 100:
            return f"--resamples must be >= 100, got {self.resamples}"
        return None


def find_checkpoint(path: str | Path, iteration: int | None) -> Path:
    """The checkpoint to audit: ``path`` itself (a checkpoint dir), or a run dir's checkpoint of ``iteration``
    (None: the newest intact one). A run dir without one is a FileNotFoundError with one line."""
    from gigpo.train.rundir.checkpoint import checkpoint_dir, list_checkpoints

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{str(p)!r} does not exist")
    if (p / "config.yaml").is_file() and not (p / "model").exists():  # a run dir
        found = list_checkpoints(p) if (p / "checkpoints").is_dir() else []
        if not found:
            raise FileNotFoundError(f"run directory {p} has no checkpoint to audit (train.checkpoint_every was 0, or "
                                    "the run stopped before its first); give a run with checkpoints")
        if iteration is None:
            return p
        ckpt = checkpoint_dir(p, iteration)
        if not ckpt.is_dir():
            have = ", ".join(str(_iteration(c)) for c in found)
            raise FileNotFoundError(f"run directory {p} has no checkpoint of iteration {iteration} (it has: {have})")
        return ckpt
    if iteration is not None:
        raise ValueError("--iteration needs a run directory, not a checkpoint or model directory")
    if not (p / "model").is_dir():
        raise FileNotFoundError(f"{p} is neither a run directory nor a checkpoint (no model/ inside)")
    return p


def _iteration(ckpt: Path) -> int:
    from gigpo.train.rundir.checkpoint import iteration_of

    return iteration_of(ckpt)


def branched_config(cfg: Any, options: AuditOptions, cap: int) -> Any:
    """The run's config with ``rollout.branch=every`` (the run's own branching settings when it had them)."""
    import copy

    from gigpo.rollout.branching import BranchSpec, budget_problem

    out = copy.deepcopy(cfg)
    r = out.rollout
    if r.branch == "off" or options.branch_every or options.siblings:
        r.branch = "every"
        r.branching.every = options.branch_every or (r.branching.every if cfg.rollout.branch == "every"
                                                     else max(1, cap // 4))
        r.branching.siblings = options.siblings or 2
    try:
        spec = BranchSpec(r.branch, r.branching.siblings, r.branching.every)
    except ValueError as err:
        raise ConfigError(f"branched GiGPO: {err}") from None
    problem = budget_problem(spec, r.group_size, cap)
    if problem:
        raise ConfigError(f"branched GiGPO: {problem}")
    return out


def check_env(cfg: Any) -> int:
    """What the audit needs of the run's env, each a ConfigError (one line): step mode, one game per trajectory,
    replay determinism. Returns the episode cap."""
    from gigpo.envs.multiseat import is_multiseat
    from gigpo.envs.restore import determinism_problem
    from gigpo.train.compose import EVAL_SEED_BASE, env_factory

    if cfg.rollout.mode != "step":
        raise ConfigError("gigpo audit needs rollout.mode=step (a concatenated trajectory cannot be restored "
                          "mid-episode)")
    factory = env_factory(cfg)
    env = factory()
    try:
        _, info = env.reset(EVAL_SEED_BASE)
        if isinstance(info, dict) and is_multiseat(info):
            raise ConfigError(f"env {cfg.env.name!r} is a multi-seat (self-play) game; the audit restores one game "
                              "per trajectory: audit a run against a fixed opponent")
        cap = int(getattr(env, "max_steps", 0) or 0)
    finally:
        env.close()
    problem = determinism_problem(factory, cfg.env.name)
    if problem:
        raise ConfigError(problem.replace("(rollout.branch=off)", "(it cannot be audited)"))
    m = cfg.rollout.max_steps
    return (min(cap, m) if cap else m) if m else (cap or 50)


def audit_seeds(seed: int, n: int) -> list[int]:
    return np.random.default_rng([seed, AUDIT_STREAM]).integers(0, 2**30, size=n).tolist()


def score_collection(cfg: Any, collector: Any, arms: list[Arm], options: AuditOptions, rng: np.random.Generator,
                     label: str) -> tuple[list[dict], dict]:
    """Collect, sample rows, compute the reference and score ``arms`` on them."""
    seeds = audit_seeds(options.seed + (1 if label == "branched" else 0), cfg.rollout.groups)
    batch, states = collect_recorded(collector, seeds, cfg.rollout.group_size)
    if len(batch) == 0:
        raise ValueError("the audit's collection has no rows (every trajectory failed)")
    rows = np.sort(rng.choice(len(batch), size=min(options.states, len(batch)), replace=False))
    has_next = sum((t, s + 1) in states for t, s in zip(np.asarray(batch.traj_id)[rows], np.asarray(batch.step)[rows]))
    advance, close = stderr_bar(len(rows) + has_next, f"audit {label}: continuing states", options.progress)
    try:
        ref = reference_advantages(collector, batch, states, rows, options.continuations, cfg.algorithm.gamma,
                                   progress=advance)
    finally:
        close()
    keep = np.isfinite(ref.advantage) & np.isfinite(ref.se)
    index = bootstrap_index(int(keep.sum()), options.resamples, rng)
    results = []
    for arm in arms:
        adv, step = arm_advantages(cfg, arm, batch)
        scores = credit_scores(adv[rows][keep], None if step is None else step[rows][keep], ref.advantage[keep],
                               ref.se[keep], index)
        results.append({"name": next(k for k, v in ARMS.items() if v == arm), "label": arm.label, **scores})
    summary = {"rows": len(batch), "trajectories": len(batch.trajectories), "sampled": int(keep.sum()),
               "mean_abs_reference": float(np.mean(np.abs(ref.advantage[keep]))) if keep.any() else float("nan"),
               "mean_se": float(np.mean(ref.se[keep])) if keep.any() else float("nan"),
               "won": float(np.mean([t.won for t in batch.trajectories]))}
    return results, summary


def run_audit(path: str | Path, options: AuditOptions, iteration: int | None = None) -> dict:
    """The audit of one checkpoint (module docstring): a JSON-ready dict, also written under ``RUN_DIR/audit/``."""
    from gigpo.models import load_model
    from gigpo.rollout import HFEngine
    from gigpo.train.compose import build_collector, check_model_options
    from gigpo.train.evaluate import locate_checkpoint

    problem = options.problem()
    if problem:
        raise ConfigError(problem)
    ckpt = find_checkpoint(path, iteration)
    model_dir, cfg = locate_checkpoint(ckpt)
    if cfg is None:
        raise FileNotFoundError(f"{ckpt} has no run config (config.yaml of its run); audit a run's checkpoint")
    cap = check_env(cfg)
    arms = [ARMS[e] for e in options.estimators]
    plain, branched = [a for a in arms if not a.branched], [a for a in arms if a.branched]
    cfg_branch = branched_config(cfg, options, cap) if branched else None
    check_model_options(cfg, str(model_dir))
    started = time.process_time()
    bundle = load_model(str(model_dir), device=cfg.model.device, dtype=cfg.model.dtype, seed=cfg.train.seed,
                        tiny=None)
    engine = HFEngine(bundle.model, bundle.tokenizer, bundle.device)
    rng = np.random.default_rng([options.seed, AUDIT_STREAM, 1])
    out: dict[str, Any] = {"checkpoint": str(model_dir.parent), "iteration": _iteration(model_dir.parent),
                           "env": cfg.env.name, "states": options.states, "continuations": options.continuations,
                           "gamma": cfg.algorithm.gamma, "estimators": [], "collections": {}}
    for label, arms_here, c in (("plain", plain, cfg), ("branched", branched, cfg_branch)):
        if not arms_here:
            continue
        collector = build_collector(c, engine, bundle.tokenizer, branch=label == "branched")
        try:
            results, summary = score_collection(c, collector, arms_here, options, rng, label)
        finally:
            collector.close()
        out["estimators"] += results
        out["collections"][label] = summary
    out["cpu_seconds"] = round(time.process_time() - started, 1)
    run_dir = model_dir.parent.parent.parent
    if (run_dir / "config.yaml").is_file():
        dest = run_dir / "audit" / f"audit_{out['iteration']:06d}.json"
        dest.parent.mkdir(exist_ok=True)
        dest.write_text(json.dumps(out, indent=1, allow_nan=True))
        out["written"] = str(dest)
    return out
