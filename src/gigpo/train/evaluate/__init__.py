"""Held-out evaluation: gigpo eval of a checkpoint or a model, and scripted agents (oracle, random).

Evaluation of a checkpoint or model on held-out seeds: summaries, tables, checkpoint lookup. The wiring it
shares with the trainer (env factory, collector, preflight, task seeds) is :mod:`gigpo.train.compose`."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml

from gigpo.rollout import Collector, RolloutBatch
from gigpo.train.collect.remote import start_engine
from gigpo.train.compose import build_collector, build_engine, eval_seeds, preflight
from gigpo.train.config import (
    Config,
    apply_overrides,
    config_from_dict,
    load_config,
    validate,
)

#: summary key of an env whose start ignores the seed (:mod:`gigpo.train.preflight.heldout`); the table says so in words
SAME_START_KEY = "same_start_as_training"
#: Per-task-type columns in the GiGPO paper's ALFWorld order (envs report the type as ``data_source``).
TASK_COLUMNS = ("Pick", "Look", "Clean", "Heat", "Cool", "Pick2")


def evaluation_summary(batch: RolloutBatch) -> dict:
    """success/score/return/length/valid-rate, plus per-``data_source`` success and score when envs report one."""
    out = {k: v for k, v in batch.summary().items() if k not in ("steps", "response_tokens")}
    sources = sorted({t.data_source for t in batch.trajectories if t.data_source and not t.failed})
    for src in sources:
        ts = [t for t in batch.trajectories if t.data_source == src and not t.failed]
        out[f"{src}/success_rate"] = sum(t.won for t in ts) / len(ts)
        out[f"{src}/score"] = sum(t.score for t in ts) / len(ts)
        out[f"{src}/episodes"] = float(len(ts))
        if all("f1" in t.final_info for t in ts):
            out[f"{src}/f1"] = sum(float(t.final_info["f1"]) for t in ts) / len(ts)
    return out


def run_evaluation(collector: Collector, seed: int, episodes: int, temperature: float) -> tuple[dict, RolloutBatch]:
    batch = collector.collect(eval_seeds(seed, episodes), 1, temperature=temperature)
    return evaluation_summary(batch), batch


def locate_checkpoint(path: str | Path) -> tuple[Path, Config | None]:
    """``(model_dir, run_config)`` for a run dir (newest checkpoint), a checkpoint dir, or a plain model dir."""
    import warnings

    from gigpo.train.rundir.checkpoint import MANIFEST_FILE, newest_intact_checkpoint, verify_checkpoint

    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"checkpoint {str(p)!r} does not exist")
    if (p / "config.yaml").exists() and (p / "checkpoints").exists():
        # the same verification as resume: a truncated or tampered newest checkpoint is skipped, never loaded
        newest, skipped = newest_intact_checkpoint(p)
        for ckpt, why in skipped:
            warnings.warn(f"skipping checkpoint {ckpt}: {why}", stacklevel=2)
        if newest is None:
            raise FileNotFoundError(f"run directory {p} has no intact checkpoint")
        p = newest
    elif (p / MANIFEST_FILE).exists():  # a checkpoint directory given directly: it must verify too
        why = verify_checkpoint(p)
        if why is not None:
            raise FileNotFoundError(f"checkpoint {p} is damaged: {why}")
    if (p / "model").exists():
        run_cfg = p.parent.parent / "config.yaml"
        cfg = config_from_dict(yaml.safe_load(run_cfg.read_text())) if run_cfg.exists() else None
        return p / "model", cfg
    return p, None


def evaluate_model(
    checkpoint: str | None,
    *,
    model: str | None = None,
    config: str | None = None,
    overrides: list[str] | None = None,
    episodes: int = 64,
    temperature: float = 0.0,
    seed: int | None = None,
) -> tuple[dict, RolloutBatch]:
    """Evaluate a checkpoint (its run's config unless ``config``/``overrides`` change it) or a named model."""
    from gigpo.models import load_model

    cfg: Config | None = None
    if checkpoint:
        model_dir, cfg = locate_checkpoint(checkpoint)
        model_name = str(model_dir)
    else:
        model_name = model or "tiny"
    if cfg is None or config:
        cfg = load_config(config, None)
    if overrides:
        from gigpo.train.config import parse_cli_overrides
        from gigpo.train.config.load import fit_to_env

        config_env = cfg.env.name
        flat = parse_cli_overrides(overrides)
        apply_overrides(cfg, flat)
        validate(cfg)
        if fit_to_env(cfg, config_env, set(flat)):  # --env names another env: its actions' settings
            validate(cfg)
    fixed = preflight(cfg, model_name)  # a bad env option or device fails here, before the model loads
    bundle = load_model(model_name, device=cfg.model.device, dtype=cfg.model.dtype, seed=cfg.train.seed,
                        tiny=(cfg.model.tiny or None) if model_name == "tiny" else None)
    with tempfile.TemporaryDirectory(prefix="gigpo-eval-") as scratch:  # what an engine writes (pushed weights)
        engine = build_engine(cfg, bundle, Path(scratch))  # rollout.engine, as the run trained with it
        try:
            start_engine(engine, bundle.model, 0)  # reachable, sampling from these weights
            collector = build_collector(cfg, engine, bundle.tokenizer, split="test")
            try:
                summary, batch = first_episodes_checked(cfg, collector, cfg.train.seed if seed is None else seed,
                                                        episodes, temperature, bundle.tokenizer)
            finally:
                collector.close()
        finally:
            engine.close()
    if fixed:  # the env's start ignores the seed: these episodes replay the training start (gigpo.train.preflight.heldout)
        summary[SAME_START_KEY] = 1.0
    return summary, batch


def first_episodes_checked(cfg: Config, collector: Collector, seed: int, episodes: int,
                           temperature: float, tokenizer: object) -> tuple[dict, RolloutBatch]:
    """:func:`run_evaluation`, its first episodes collected first: when none of their steps was a valid action the
    evaluation stops there (:func:`gigpo.train.preflight.action_check.check_evaluation_start`). The seeds are those of one
    collection (``eval_seeds`` is a prefix-stable sequence), so the numbers are the same as without the check."""
    from gigpo.rollout.batch import merge_batches
    from gigpo.train.preflight.action_check import EVAL_FIRST_EPISODES, check_evaluation_start

    first = min(EVAL_FIRST_EPISODES, episodes)
    if not cfg.train.stop_without_valid_actions or first >= episodes:
        return run_evaluation(collector, seed, episodes, temperature)
    seeds = eval_seeds(seed, episodes)
    head = collector.collect(seeds[:first], 1, temperature=temperature)
    check_evaluation_start(cfg, evaluation_summary(head), first, episodes, tokenizer)
    batch = merge_batches([head, collector.collect(seeds[first:], 1, temperature=temperature)])
    return evaluation_summary(batch), batch


def success_label(sources: list[str], has_f1: bool) -> str:
    """What a success is called for these data sources: wins for games (TextArena's seats ``seat0``, ...), exact
    match for question answering (datasets that report F1, as search's do), else success."""
    if sources and all(s.startswith("seat") for s in sources):
        return "wins"
    return "EM" if has_f1 else "success"


def format_table(summary: dict, label: str = "agent") -> str:
    """Markdown: the overall metrics; with data sources, also one row in the GiGPO paper's layout (one column per
    data source, then the average over sources) for success/EM and, when reported, F1. When the sources are
    ALFWorld's task types, the columns follow the paper (:data:`TASK_COLUMNS`) and the last is "All", the rate over
    all episodes."""
    from gigpo.train.preflight.heldout import SAME_START

    overall = {k: v for k, v in summary.items() if "/" not in k and k != SAME_START_KEY}
    lines = [f"{SAME_START}:", ""] if summary.get(SAME_START_KEY) else []
    lines += ["| metric | value |", "|---|---|"]
    lines += [f"| {k} | {v:.4f} |" for k, v in overall.items()]
    sources = sorted({k.split("/")[0] for k in summary if "/" in k})
    # ALFWorld's task types: the paper's column order, and "All" = over episodes (not the mean of the columns)
    by_task = bool(sources) and set(sources) <= set(TASK_COLUMNS)
    if by_task:
        sources.sort(key=TASK_COLUMNS.index)
    if sources:
        head = "| metric | " + " | ".join(f"{s} (n={int(summary.get(f'{s}/episodes', 0))})" for s in sources)
        lines += ["", head + (" | All |" if by_task else " | avg |"), "|---" * (len(sources) + 2) + "|"]
        for key, name in (("success_rate", success_label(sources, all(f"{s}/f1" in summary for s in sources))), ("f1", "F1"), ("score", "score")):
            vals = [summary.get(f"{s}/{key}") for s in sources]
            if any(v is None for v in vals):
                continue
            cells = " | ".join(f"{100 * v:.1f}" for v in vals)
            if by_task:
                ns = [summary.get(f"{s}/episodes", 0) for s in sources]
                last = sum(v * n for v, n in zip(vals, ns)) / max(sum(ns), 1)
            else:
                last = sum(vals) / len(vals)
            lines.append(f"| {label} {name} | {cells} | {100 * last:.1f} |")
    return "\n".join(lines)
