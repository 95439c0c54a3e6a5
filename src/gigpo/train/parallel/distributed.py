"""Data-parallel training on ``torch.distributed`` (launched by ``torchrun``): ranks, process group, sharding.

One process per rank; ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` come from the launcher (torchrun sets them, and
so does ``accelerate launch``). The rollout's ``rollout.groups`` task groups are cut into ``S`` contiguous
*shards* (``train.rollout_shards``, 0 = one per rank); rank r collects shards ``[r·S/K, (r+1)·S/K)``, each with
its own torch sampling seed drawn from (seed, iteration, shard). The tasks of an iteration are the same for every
K (all B seeds are drawn, then sliced), and the sampled trajectories depend on (seed, iteration, S) only, so one
process with ``train.rollout_shards=S`` collects exactly what S ranks collect.

Exactness of the update (see docs/scaling.md): mini-batch j of an epoch is the union over shards of shard s's
chunk j, where each shard permutes its own rows with the stream [seed, iteration, MINIBATCH_ORDER, s]. Every
rank therefore holds its part of the same global mini-batch. The loss of a mini-batch is normalised by global
counts: with n_r the rank's and N = Σ_r n_r the all-reduced count (response tokens for ``token-mean``, rows for
every other ``optim.loss_agg``), each micro-batch's loss is weighted K · n_micro / N; DDP / FSDP average the
gradients over the K ranks, so the optimiser sees Σ_micro (n_micro / N) ∇L_micro — the 1-process gradient.
Every rank runs the same number of micro-batches (padded with zero-weight ones) so that their collectives pair.
"""

from __future__ import annotations

import gc
import logging
import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import torch

from gigpo.train.config import rng_streams

log = logging.getLogger(__name__)

#: the data-parallel engines; "auto" is ddp under a launcher with WORLD_SIZE > 1, none in one process
PARALLEL_MODES = ("auto", "none", "ddp", "fsdp")


def world_from_env(environ: Any = None) -> tuple[int, int, int]:
    """``(rank, world_size, local_rank)`` from the launcher's variables; ``(0, 1, 0)`` outside a launcher."""
    env = os.environ if environ is None else environ

    def num(key: str, default: int) -> int:
        raw = env.get(key, "")
        try:
            return int(raw) if raw.strip() else default
        except ValueError:
            raise ValueError(f"environment variable {key}={raw!r} is not an integer (set by torchrun)") from None
    world = num("WORLD_SIZE", 1)
    rank = num("RANK", 0)
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"RANK={rank} WORLD_SIZE={world}: need 0 <= RANK < WORLD_SIZE")
    return rank, world, num("LOCAL_RANK", rank)


def resolve_parallel(mode: str, world: int) -> str:
    """The engine a run uses: one process → "none" whatever was asked; "auto" with K > 1 → "ddp"."""
    if world <= 1:
        return "none"
    return "ddp" if mode == "auto" else mode


def num_shards(rollout_shards: int, world: int) -> int:
    """S: ``train.rollout_shards``, or one shard per rank when it is 0."""
    return int(rollout_shards) or int(world)


def shard_slices(n_groups: int, n_shards: int) -> list[slice]:
    """Contiguous group slices of the S shards, sizes as ``np.array_split`` (the first ``B mod S`` one larger)."""
    sizes = [len(a) for a in np.array_split(np.arange(n_groups), n_shards)]
    starts = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    return [slice(a, b) for a, b in zip(starts[:-1], starts[1:])]


def shards_of_rank(n_shards: int, world: int, rank: int) -> list[int]:
    """Rank r's shards: the r-th of K equal contiguous blocks (config_check requires S to be a multiple of K)."""
    per = n_shards // world
    return list(range(rank * per, (rank + 1) * per))


def shard_torch_seed(seed: int, iteration: int, shard: int) -> int:
    """Torch's sampling seed for one shard's collection (only used when S > 1; S = 1 keeps the per-iteration
    seed, so single-process runs are unchanged)."""
    return int(np.random.default_rng([seed, iteration, rng_streams.ROLLOUT_SHARD, shard]).integers(2**62))


def minibatch_partition(row_shard: np.ndarray, rows: list[int], n_shards: int, seed: int, iteration: int,
                        epochs: int, mini_batches: int) -> list[list[list[int]]]:
    """``[epoch][j] -> rows`` of mini-batch j (``row_shard[r]``: the shard of row r).

    One shard: one permutation of all rows per epoch from [seed, iteration, MINIBATCH_ORDER], split into
    ``mini_batches`` (the single-process order). S shards: shard s permutes its own rows from
    [seed, iteration, MINIBATCH_ORDER, s] and contributes its j-th chunk to mini-batch j, so ranks holding
    complementary shards hold complementary parts of every mini-batch, and their union is what one process
    with the same S trains on."""
    rows_arr = np.asarray(rows, dtype=np.int64)
    if n_shards == 1:
        gen = np.random.default_rng([seed, iteration, rng_streams.MINIBATCH_ORDER])
        return [[mb.tolist() for mb in np.array_split(rows_arr[gen.permutation(len(rows_arr))], mini_batches)]
                for _ in range(epochs)]
    shard_ids = sorted(set(np.asarray(row_shard)[rows_arr].tolist()))
    gens = {s: np.random.default_rng([seed, iteration, rng_streams.MINIBATCH_ORDER, s]) for s in shard_ids}
    own = {s: rows_arr[np.asarray(row_shard)[rows_arr] == s] for s in shard_ids}
    out = []
    for _ in range(epochs):
        parts: list[list[int]] = [[] for _ in range(mini_batches)]
        for s in shard_ids:
            for j, chunk in enumerate(np.array_split(own[s][gens[s].permutation(len(own[s]))], mini_batches)):
                parts[j].extend(chunk.tolist())
        out.append(parts)
    return out


@dataclass
class DistContext:
    """This process's place in the job. ``world_size == 1``: no process group, every helper is the identity."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    parallel: str = "none"
    backend: str | None = None
    n_shards: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @property
    def shards(self) -> list[int]:
        return shards_of_rank(self.n_shards, self.world_size, self.rank)

    def device(self, requested: str) -> str:
        """``model.device`` for this rank: auto/cuda become ``cuda:LOCAL_RANK`` under a launcher on GPUs."""
        if self.active and requested in ("auto", "cuda") and torch.cuda.is_available():
            return f"cuda:{self.local_rank}"
        return requested

    def _comm(self) -> torch.device:
        return torch.device("cuda", torch.cuda.current_device()) if self.backend == "nccl" else torch.device("cpu")

    def all_sum(self, values: list[float]) -> list[float]:
        """Element-wise Σ over ranks (float64)."""
        if not self.active:
            return [float(v) for v in values]
        t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=self._comm())
        torch.distributed.all_reduce(t)
        return t.cpu().tolist()

    def all_max(self, value: float) -> float:
        if not self.active:
            return float(value)
        t = torch.tensor([float(value)], dtype=torch.float64, device=self._comm())
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        return float(t.item())

    def gather_objects(self, obj: Any) -> list[Any]:
        """Every rank's ``obj`` (picklable), in rank order, on every rank."""
        if not self.active:
            return [obj]
        out: list[Any] = [None] * self.world_size
        torch.distributed.all_gather_object(out, obj)
        return out

    def broadcast_from_main(self, obj: Any) -> Any:
        if not self.active:
            return obj
        box = [obj if self.is_main else None]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        if self.active:
            torch.distributed.barrier()

    def mean_metrics(self, rec: dict) -> dict:
        """Each numeric metric averaged over the ranks that report it (counts such as ``rollout/response_tokens``
        and ``time/*`` too: a per-rank mean). Non-numeric values are rank 0's."""
        if not self.active:
            return rec
        recs = self.gather_objects(rec)
        out = dict(recs[0])
        for k in {k for r in recs for k in r}:
            vals = [r[k] for r in recs if isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool)]
            if vals and k != "iteration":
                out[k] = float(np.mean(vals))
        return out

    def all_reduce_grads(self, params: list[torch.nn.Parameter]) -> None:
        """Average the gradients of replicated parameters that no engine wraps (the PPO value head)."""
        if not self.active:
            return
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            torch.distributed.all_reduce(p.grad, op=torch.distributed.ReduceOp.AVG if self.backend == "nccl"
                                         else torch.distributed.ReduceOp.SUM)
            if self.backend != "nccl":  # gloo has no AVG
                p.grad.div_(self.world_size)


_CTX = DistContext()


def current() -> DistContext:
    """The context set by :func:`init` (a single-process one before, and in plain ``gigpo train``)."""
    return _CTX


def init(cfg: Any) -> DistContext:
    """Join the job's process group when launched with WORLD_SIZE > 1 (gloo on CPU, NCCL when this rank's
    device is a GPU), with ``train.dist_timeout_s`` on every collective so a dead peer ends the job instead of
    hanging it. Returns and records the context; in one process it only records S."""
    global _CTX
    rank, world, local = world_from_env()
    ctx = DistContext(rank, world, local, resolve_parallel(cfg.train.parallel, world), None,
                      num_shards(cfg.train.rollout_shards, world))
    if world > 1:
        use_cuda = ctx.device(cfg.model.device).startswith("cuda") and torch.cuda.is_available()
        if use_cuda:
            torch.cuda.set_device(local)
        ctx.backend = "nccl" if use_cuda else "gloo"
        if not torch.distributed.is_initialized():
            torch.distributed.init_process_group(ctx.backend, timeout=timedelta(seconds=cfg.train.dist_timeout_s))
        log.info("rank %d of %d (%s, %s, %d rollout shards)", rank, world, ctx.backend, ctx.parallel, ctx.n_shards)
    _CTX = ctx
    return ctx


def shutdown(synchronize: bool = False) -> None:
    """Leave the process group (idempotent). ``synchronize`` (a run that ended well on this rank): wait at a barrier
    first, so no rank tears its group down while a peer still writes its last files (an error there is logged,
    never raised: the run's work is done)."""
    global _CTX
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # Objects left in reference cycles (a finished run's DDP/FSDP wrapper) keep the gloo group's worker threads
        # alive; freed only at interpreter exit, they can abort the process after the work is done (a torchrun job
        # of 4 finished runs once ended in "terminate called without an active exception", SIGABRT, on rank 1).
        # Collect them while the group and the interpreter are both whole.
        gc.collect()
        if synchronize:
            try:
                torch.distributed.barrier()
            except Exception as err:  # a peer that already left: nothing to wait for
                log.warning("leaving the process group without the final barrier: %s", err)
        torch.distributed.destroy_process_group()
    _CTX = DistContext()


def split_evaluation(ctx: DistContext, run_evaluation: Any, summarize: Any, collector: Any, seed: int, episodes: int,
                     temperature: float) -> tuple[dict, Any]:
    """Evaluation of the held-out seeds ``eval_seeds(seed, episodes)`` split over the ranks (contiguous,
    ``np.array_split``), the batches gathered and summarised as one by ``summarize`` — the summary of the same seeds
    one process evaluates. One process: ``run_evaluation(collector, seed, episodes, temperature)``."""
    if not ctx.active:
        return run_evaluation(collector, seed, episodes, temperature)
    from gigpo.rollout.batch import merge_batches
    from gigpo.train.config.rng_streams import eval_seeds

    mine = np.array_split(np.asarray(eval_seeds(seed, episodes), dtype=np.int64), ctx.world_size)[ctx.rank]
    batch = collector.collect(mine.tolist(), 1, temperature=temperature)
    merged = merge_batches(ctx.gather_objects(batch))
    return summarize(merged), merged


_PEER_SIGNS = ("connection closed by peer", "connection reset by peer", "broken pipe", "timed out", "nccl")


def is_peer_failure(err: BaseException) -> bool:
    """Whether ``err`` is what a collective raises on this rank because another rank died or hung: a
    ``torch.distributed.DistError``, or gloo's RuntimeError ("Connection closed by peer", a timeout)."""
    if isinstance(err, getattr(torch.distributed, "DistError", ())):
        return True
    return isinstance(err, RuntimeError) and any(s in str(err).lower() for s in _PEER_SIGNS)
