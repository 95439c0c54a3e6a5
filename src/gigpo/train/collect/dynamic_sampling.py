"""One iteration's training batch: collection rounds, DAPO dynamic sampling and overlong shaping, concat folding,
and the stop rule for runs whose envs fail every trajectory (:class:`RunFailed`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gigpo.rollout.batch import COLUMNS, RolloutBatch, id_span, merge_batches
from gigpo.rollout.concat import to_concat_batch
from gigpo.train.config import rng_streams
from gigpo.train.config.rng_streams import EVAL_SEED_BASE, train_seeds


class RunFailed(RuntimeError):
    """The run cannot make progress: every trajectory of ``train.max_failed_iterations`` consecutive iterations
    failed (env faults), or of every iteration of a shorter run. ``gigpo train`` reports it and exits 1."""


def round_seeds(seed: int, iteration: int, round_: int, n: int) -> list[int]:
    """Task seeds of collection round ``round_``: round 0 is exactly :func:`train_seeds` (so a run without dynamic
    sampling sees the same tasks); later rounds draw fresh train seeds from (seed, iteration, round)."""
    if round_ == 0:
        return train_seeds(seed, iteration, n)
    rng = np.random.default_rng([seed, iteration, rng_streams.TRAIN_TASKS, round_])
    return rng.integers(0, EVAL_SEED_BASE, size=n).tolist()


def overlong_penalty(lengths: Any, max_len: int, buffer_frac: float, penalty: float = 1.0) -> np.ndarray:
    """DAPO's soft overlong punishment per response, with L_max = ``max_len`` and L_cache = ⌊buffer_frac · L_max⌋:

    0 if |y| ≤ L_max − L_cache;  penalty · (L_max − L_cache − |y|) / L_cache inside the buffer;  −penalty beyond
    L_max. L_cache = 0 turns it off (all zeros).
    """
    n = np.asarray(lengths, dtype=np.float64)
    cache = int(buffer_frac * max_len)
    if cache <= 0:
        return np.zeros_like(n)
    start = max_len - cache
    ramp = np.clip((start - n) / cache, -1.0, 0.0)
    return float(penalty) * ramp


def shape_overlong(batch: RolloutBatch, max_len: int, buffer_frac: float, penalty: float) -> float:
    """Add :func:`overlong_penalty` of each step's response length to that step's training reward, in place.

    Trajectory summaries (success, env return) are left alone: this shapes what the learner sees, not the score.
    Returns the mean penalty per row (a metric).
    """
    if not len(batch):
        return 0.0
    pen = overlong_penalty([len(r) for r in batch.response_ids], max_len, buffer_frac, penalty)
    batch.reward = (np.asarray(batch.reward, dtype=np.float64) + pen).tolist()
    return float(pen.mean())


def informative_groups(batch: RolloutBatch, tol: float = 1e-9) -> list[int]:
    """Group ids (in first-appearance order) whose trajectories' returns Σ_t r_t are not all equal — the groups
    that carry a GRPO-style gradient. A group with one (surviving) trajectory is never informative."""
    if not len(batch):
        return []
    arr = batch.arrays()
    tids, t_inv = np.unique(arr["traj_id"], return_inverse=True)
    ret = np.bincount(t_inv, weights=arr["reward"], minlength=tids.size)
    grp = np.empty(tids.size, dtype=np.int64)
    grp[t_inv] = arr["group_id"]
    gids, g_inv = np.unique(grp, return_inverse=True)
    hi = np.full(gids.size, -np.inf)
    lo = np.full(gids.size, np.inf)
    np.maximum.at(hi, g_inv, ret)
    np.minimum.at(lo, g_inv, ret)
    spread = (hi - lo) > tol * np.maximum(1.0, np.abs(hi))
    ok = set(gids[spread].tolist())
    seen: list[int] = []
    for g in batch.group_id:
        if g in ok and g not in seen:
            seen.append(g)
    return seen


def select_groups(batch: RolloutBatch, groups: list[int]) -> RolloutBatch:
    """The rows and trajectories of ``groups`` only."""
    keep = set(groups)
    rows = [i for i, g in enumerate(batch.group_id) if g in keep]
    out = RolloutBatch(trajectories=[t for t in batch.trajectories if t.group_id in keep])
    for name in COLUMNS:
        col = getattr(batch, name)
        setattr(out, name, [col[i] for i in rows])
    return out


def group_starts(parts: list[RolloutBatch]) -> list[int]:
    """The first group id of each part in ``merge_batches(parts)``."""
    return np.concatenate([[0], np.cumsum([id_span(b, "group_id") for b in parts])[:-1]]).astype(int).tolist()


def dynamic_sample(
    collect_round: Callable[[int], RolloutBatch], target: int, max_rounds: int
) -> tuple[RolloutBatch, RolloutBatch, dict[str, float]]:
    """Collect rounds until exactly ``target`` informative groups are kept or ``max_rounds`` rounds ran.

    ``collect_round(k)`` returns round k's batch. The last round's surplus informative groups are discarded (the
    batch never holds more than ``target`` groups, keeping update cost and group count constant). Returns
    ``(kept, everything_collected, stats)``; stats: ``rounds``, ``kept_groups``, ``dropped_groups`` (all-equal),
    ``surplus_groups`` (informative but beyond ``target``), ``filled`` (1 when the target was reached).
    """
    kept: list[RolloutBatch] = []
    every: list[RolloutBatch] = []
    n_kept = dropped = surplus = 0
    rounds = 0
    while rounds < max_rounds and n_kept < target:
        b = collect_round(rounds)
        rounds += 1
        every.append(b)
        good = informative_groups(b)
        n_groups = len({t.group_id for t in b.trajectories})
        take = good[:target - n_kept]
        dropped += n_groups - len(good)
        surplus += len(good) - len(take)
        kept.append(select_groups(b, take))
        n_kept += len(take)
    stats = {"rounds": float(rounds), "kept_groups": float(n_kept), "dropped_groups": float(dropped),
             "surplus_groups": float(surplus), "filled": float(n_kept == target)}
    return merge_batches(kept), merge_batches(every), stats


@dataclass
class CollectedBatch:
    """What an iteration's rollout hands to the rest of it: the ``batch`` it trains on, its ``rollout/*`` metrics
    (``stats``, keys without the prefix), the shard of each row (``row_shard``: which data-parallel shard
    collected it, for the mini-batch partition) and, from an async rollout, its own ``metrics`` (prefixed)."""

    batch: RolloutBatch
    stats: dict[str, float]
    row_shard: np.ndarray
    metrics: dict[str, float] = field(default_factory=dict)


def collect_shards(collector: Any, cfg: Any, iteration: int, shards: list[int], n_shards: int) -> CollectedBatch:
    """The batch an iteration trains on, its ``rollout/*`` metrics and the shard of each row.

    The ``rollout.groups`` task seeds of the iteration are drawn whole, then cut into ``n_shards`` contiguous
    shards (:func:`gigpo.train.parallel.distributed.shard_slices`); this process collects ``shards`` (a data-parallel
    rank: its own; one process: all of them), each shard sampled from its own torch seed when ``n_shards`` > 1,
    so the trajectories depend on (seed, iteration, n_shards), not on how many ranks collect them.

    Per shard: :func:`collect_shard` (rounds, overlong shaping, dynamic sampling); then the run-failure rule
    (:func:`check_failed_iterations`, which may raise :class:`RunFailed`), the metrics over every trajectory
    collected (:func:`shard_metrics`), concat folding (:func:`fold_concat`) and the row shards (:func:`row_shards`).
    Failed trajectories (env faults, see :class:`gigpo.rollout.Collector`) have no rows, so they never count as
    informative groups and never reach the advantages; ``failed_trajectories`` counts them over all rounds.
    """
    from gigpo.train.parallel.distributed import shard_slices

    cut = shard_slices(cfg.rollout.groups, n_shards)
    kept_parts, every_parts, shard_stats = [], [], []
    for shard in shards:
        kept, every, st = collect_shard(collector, cfg, iteration, shard, cut[shard], n_shards)
        kept_parts.append(kept)
        every_parts.append(every)
        shard_stats.append(st)
    batch = merge_batches(kept_parts) if len(kept_parts) > 1 else kept_parts[0]
    every = merge_batches(every_parts) if len(every_parts) > 1 else every_parts[0]
    check_failed_iterations(collector, every, cfg, iteration)
    stats = {**every.summary(), **shard_metrics(shard_stats)}
    if cfg.rollout.mode == "concat":
        batch, concat_stats = fold_concat(batch)
        stats.update(concat_stats)
    return CollectedBatch(batch, stats, row_shards(kept_parts, shards, batch))


def collect_shard(collector: Any, cfg: Any, iteration: int, shard: int, part: slice, n_shards: int
                  ) -> tuple[RolloutBatch, RolloutBatch, dict[str, float]]:
    """One shard's ``(kept, every trajectory collected, stats)``: its groups × ``group_size`` from round 0, with
    the overlong penalty added when enabled; with ``rollout.dapo.dynamic_sampling`` refilled to its own group count
    by :func:`dynamic_sample`. ``stats``: the dynamic-sampling counts, ``overlong_penalty`` summed over rounds and
    ``_rounds`` (rounds run)."""
    from gigpo.train.parallel.distributed import shard_torch_seed

    r = cfg.rollout
    if n_shards > 1:
        import torch

        torch.manual_seed(shard_torch_seed(cfg.train.seed, iteration, shard))
    stats: dict[str, float] = {}

    def one_round(k: int) -> RolloutBatch:
        b = collector.collect(round_seeds(cfg.train.seed, iteration, k, r.groups)[part], r.group_size)
        if r.dapo.overlong_buffer > 0:
            stats["overlong_penalty"] = stats.get("overlong_penalty", 0.0) + shape_overlong(
                b, r.max_response_tokens, r.dapo.overlong_buffer, r.dapo.overlong_penalty)
        return b

    if not r.dapo.dynamic_sampling:
        b = one_round(0)
        return b, b, stats
    kept, every, ds = dynamic_sample(one_round, part.stop - part.start, r.dapo.max_rounds)
    return kept, every, {**stats, **ds, "_rounds": ds["rounds"]}


def shard_metrics(shard_stats: list[dict[str, float]]) -> dict[str, float]:
    """The shards' dynamic-sampling metrics as one: ``rounds`` the most any shard needed, ``filled`` whether every
    shard filled, the group counts summed; ``overlong_penalty`` per round (summed over rounds, / rounds run) with
    dynamic sampling, else summed over shards."""
    out: dict[str, float] = {}
    rounds_total = 0.0
    for st in shard_stats:
        for k, v in st.items():
            if k == "_rounds":
                rounds_total += v
            elif k == "rounds":
                out[k] = max(out.get(k, v), v)
            elif k == "filled":
                out[k] = min(out.get(k, v), v)
            else:
                out[k] = out.get(k, 0.0) + v
    if rounds_total and "overlong_penalty" in out:
        out["overlong_penalty"] /= rounds_total
    return out


def fold_concat(batch: RolloutBatch) -> tuple[RolloutBatch, dict[str, float]]:
    """``rollout.mode=concat``: the kept step rows folded into one row per trajectory
    (:func:`gigpo.rollout.concat.to_concat_batch`), after filtering, and its ``concat_rows`` / ``agent_tokens``."""
    folded = to_concat_batch(batch)
    return folded, {"concat_rows": float(len(folded)), "agent_tokens": float(folded.agent_tokens)}


def row_shards(kept_parts: list[RolloutBatch], shards: list[int], batch: RolloutBatch) -> np.ndarray:
    """The shard of each row of ``batch`` (merged from ``kept_parts``, one per shard of ``shards``): the group ids
    of part i start at ``group_starts[i]`` (merge_batches' renumbering) and rows keep their group id."""
    if not len(batch):
        return np.zeros(0, dtype=np.int64)
    starts = np.asarray(group_starts(kept_parts) if len(kept_parts) > 1 else [0])
    pos = np.searchsorted(starts, np.asarray(batch.group_id, dtype=np.int64), side="right") - 1
    return np.asarray(shards, dtype=np.int64)[pos]


def check_failed_iterations(collector: Any, every: RolloutBatch, cfg: Any, iteration: int) -> None:
    """Count iterations in which every collected trajectory failed; raise :class:`RunFailed` at
    ``train.max_failed_iterations`` in a row (≤ 0 disables the rule), or at the last iteration
    (``train.iterations``) when no iteration run by this process kept a single trajectory — a run that never
    trained must not end as a success. The counters live on the collector (``failed_streak``,
    ``iterations_collected``): one collector serves one training loop, and a resumed run starts them afresh."""
    n = len(every.trajectories)
    all_failed = n > 0 and all(t.failed for t in every.trajectories)
    collector.failed_streak = (getattr(collector, "failed_streak", 0) + 1) if all_failed else 0
    collector.iterations_collected = getattr(collector, "iterations_collected", 0) + 1
    if not all_failed:
        return
    limit = int(cfg.train.max_failed_iterations)
    streak = collector.failed_streak
    never_ok = streak == collector.iterations_collected and iteration >= cfg.train.iterations
    if (limit > 0 and streak >= limit) or never_ok:
        errors = list(dict.fromkeys(t.error for t in every.trajectories))  # distinct, in order
        shown = "; ".join(errors[:3]) + (f"; ... ({len(errors) - 3} more distinct errors)" if len(errors) > 3 else "")
        raise RunFailed(
            f"every trajectory failed in {streak} consecutive iteration(s) (through iteration {iteration}, "
            f"{n} trajectories in the last; env {cfg.env.name!r}); stopping, nothing can be trained. "
            f"Errors: {shown}. See the env warnings above; rollout.env_timeout_s bounds each env call, "
            f"train.max_failed_iterations sets how many such iterations are tolerated.")
