"""Asynchronous rollout: a worker that collects the next batch while the learner updates, with bounded staleness.

``rollout.async``: the rollout of the next iterations runs while the learner updates, with bounded lag.

**The schedule (fixed lag, reproducible).** With ``s = rollout.max_staleness`` the batch of iteration k is
sampled by policy version

    v(k) = max(0, k − 1 − s)          (version j = the weights after j updates; the learner updates from k − 1)

so the learner trains on data exactly ``min(k − 1, s)`` versions old. A fixed lag, not "the newest weights that
happen to be ready": the batch of every iteration, and so every number of the run, depends on (seed, s) only,
never on timing — a resumed run replays an uninterrupted one (prime-rl's ``async_level`` makes the same
choice). Throughput is the same as "newest available" once rollout and update take similar time; s = 2 absorbs
jitter when they do not.

**One version per group.** Each iteration's batch is collected whole by one version (the rollout thread pushes
v(k) to the engine between batches, never inside one), so a GiGPO group's trajectories and its anchor step
groups compare like with like. Every row's version is recorded (``batch.policy_version``) and the iteration
logs ``rollout/policy_version``, ``rollout/staleness`` and the staleness histogram ``rollout/staleness_<d>``
(share of rows d versions old, d = 0..s).

**Moving parts.** A rollout thread in the learner's process runs the ordinary collector (envs, prompts, the env
guard) against an engine that does not share the learner's weights, as the engine's
``capabilities.async_rollout`` says (:mod:`gigpo.rollout.engines`): ``rollout.engine=hf`` ("worker") becomes a
:class:`gigpo.rollout.engines.hf_worker.WorkerEngine` (a worker process with its own CPU copy of the policy and
its own torch threads); ``rollout.engine=openai`` keeps the trainer's own
:class:`gigpo.rollout.engines.openai.CompletionsEngine` (`gigpo serve`, vLLM servers). The learner publishes
each new version to a :class:`WeightStore` of s + 1 snapshots; the thread waits for v(k), then — holding the
engine lock — pushes it (only if the engine holds another version), seeds the worker's sampler from (seed, k)
as a synchronous run seeds its own, collects, and queues the batch. Generation never reads weights the learner
is changing.

**Servers** (``rollout.engine=openai``, "pinned"). The engine is *pinned* (``pinned_version``): the trainer's per-update
push is skipped (:func:`gigpo.train.collect.remote.after_update`); the thread's pushes, between batches, are the only
ones and are required (a server left on another version cannot serve the batch); a response reporting another
version is a :class:`~gigpo.rollout.engines.RemoteEngineError`, as is a server gone after its retries (the
run stops, last checkpoint intact, as a synchronous run does). An evaluation takes the engine lock too and
pushes the learner's newest version, as a synchronous run evaluates. Servers sample unseeded: at temperature
> 0 the batches after a resume differ from an uninterrupted run's (the owed ones are replayed exactly).
``rollout.engine=vllm`` (in-process, "none") stays refused: its generation would share the learner's process.

**Checkpoints.** At a checkpoint after iteration k the batches of k+1 … k+s are already owed to versions that
exist, so they are *finished into the checkpoint* (``async_batches.json``: plain JSON, no pickle, listed in the
manifest) and a resume trains on them before the thread starts on k+s+1 from the restored weights (version k).
Resume is therefore exact (tested). The thread never collects past ``train.iterations``, so the final
checkpoint owes nothing: a finished run resumed with more iterations (or a synchronous run resumed with async
on) starts the schedule afresh at the resumed version — its first s batches are sampled by the resumed weights
themselves (lag 0), a valid continuation but not the one a longer run would have taken.

**A dying worker** (killed, out of memory) fails the trajectories it was generating — the iteration is
counted by the failed-iterations rule like an env fault — is restarted on the version it was serving, and the
run goes on.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gigpo.rollout.batch import RolloutBatch, Trajectory
from gigpo.train.async_rollout.batches import ASYNC_FILE, load_batches, save_batches
from gigpo.train.collect.dynamic_sampling import CollectedBatch, collect_shards
from gigpo.train.config import rng_streams

log = logging.getLogger(__name__)


def sampled_version(iteration: int, max_staleness: int, start_version: int = 0) -> int:
    """v(k) = max(start, k − 1 − s): the policy version that samples iteration ``iteration``'s batch."""
    return max(int(start_version), int(iteration) - 1 - int(max_staleness))


class WeightStore:
    """The last ``keep`` policy versions as CPU module replicas (slot = version mod keep).

    Safe with keep = s + 1: publishing version k overwrites k − s − 1, which only the batch of iteration k used,
    and that batch was trained on before k existed. Reads and writes take the store's lock anyway."""

    def __init__(self, model: Any, keep: int):
        self.keep = int(keep)
        self._slots = [copy.deepcopy(model).cpu().eval().requires_grad_(False) for _ in range(self.keep)]
        self._versions = [-1] * self.keep
        self._cond = threading.Condition()

    @torch.no_grad()
    def publish(self, version: int, model: Any) -> None:
        with self._cond:
            slot = self._slots[version % self.keep]
            src = dict(model.named_parameters())
            src.update(dict(model.named_buffers()))
            for name, dst in [*slot.named_parameters(), *slot.named_buffers()]:
                dst.copy_(src[name].detach().to("cpu", dst.dtype))
            self._versions[version % self.keep] = int(version)
            self._cond.notify_all()

    def wait(self, version: int, stop: threading.Event) -> bool:
        """Block until ``version`` is published (True), or ``stop`` is set first (False)."""
        with self._cond:
            while self._versions[version % self.keep] != version:
                if stop.is_set():
                    return False
                if self._versions[version % self.keep] > version:
                    raise RuntimeError(f"policy version {version} was overwritten before use (store of {self.keep})")
                self._cond.wait(0.2)
            return True

    def use(self, version: int, fn: Any, stop: threading.Event) -> tuple | None:
        """``(fn(model_at_version),)`` under the lock once ``version`` is published; None if ``stop`` is set
        first."""
        with self._cond:
            if not self.wait(version, stop):  # the Condition's lock is re-entrant
                return None
            return (fn(self._slots[version % self.keep]),)


def check_snapshot_memory(model: Any, keep: int) -> None:
    """ConfigError when ``keep`` CPU copies of ``model`` (the weight store of ``rollout.max_staleness`` + 1
    versions) do not fit in this machine's memory: one line before the store is built, not a climb to swap."""
    from gigpo.train.config.bounds import snapshot_bytes
    from gigpo.train.config.error import ConfigError
    from gigpo.train.preflight.memory_estimate import human_bytes, memory_limit_bytes

    need, limit = snapshot_bytes(model, keep), memory_limit_bytes()
    if limit is not None and need > limit:
        raise ConfigError(f"rollout.max_staleness={keep - 1} keeps {keep} CPU copies of the model for the async "
                          f"rollout ({human_bytes(need)}), more than this machine's {human_bytes(limit)} of memory; "
                          "lower rollout.max_staleness")


class _GuardedCollector:
    """The collector, with a dead rollout worker turned into failed trajectories (the env-fault contract) and
    the worker restarted on the version it served. Keeps the failed-iteration counters of the run."""

    def __init__(self, collector: Any, engine: Any, repush: Any, stopping: threading.Event | None = None):
        self.collector, self.engine, self.repush = collector, engine, repush
        self.stopping = stopping or threading.Event()  # set: the run is shutting down (Ctrl-C, the end)
        self.failed_streak = 0
        self.iterations_collected = 0

    def collect(self, seeds: list[int], group_size: int, temperature: float | None = None) -> RolloutBatch:
        from gigpo.rollout.engines.hf_worker import WorkerDied

        try:
            return self.collector.collect(seeds, group_size, temperature)
        except WorkerDied as e:
            if self.stopping.is_set():  # closed under it by a stopping run: no restart, nothing to report
                raise
            log.warning("%s; its %d trajectories fail, the worker is restarted and the run goes on", e,
                        len(seeds) * group_size)
            self.engine.restart()
            self.repush()
            trajs = [Trajectory(traj_id=g * group_size + j, group_id=g, seed=int(s), failed=True,
                                error=f"rollout worker died: {e}")
                     for g, s in enumerate(seeds) for j in range(group_size)]
            return RolloutBatch(trajectories=trajs)


class AsyncRollout:
    """Drives the rollout thread for a :class:`gigpo.train.trainer.Trainer` (module docstring); built by
    :func:`gigpo.train.compose.build_async_rollout`."""

    def __init__(self, cfg: Any, model: Any, engine: Any, collector: Any, start_iteration: int,
                 resumed_from: Path | None = None, *, pushed_version: int | None = None, owns_engine: bool = True):
        """``pushed_version``: the version ``engine`` already holds (the trainer's engine, pushed by
        ``start_engine``); ``owns_engine``: :meth:`close` closes it."""
        self.cfg = cfg
        # a batch is at most train.iterations - 1 versions old: more slots than that would hold copies never read
        self.s = min(int(cfg.rollout.max_staleness), max(1, int(cfg.train.iterations)))
        check_snapshot_memory(model, self.s + 1)
        self.engine = engine
        self.owns_engine = owns_engine
        self.start_version = self.min_version = int(start_iteration)  # min: no older version exists here
        self.latest = int(start_iteration)  # the learner's newest version (what an evaluation samples from)
        self.store = WeightStore(model, self.s + 1)
        self.store.publish(self.start_version, model)
        # a push and the batch it serves, or an evaluation: one at a time on the engine
        self.engine_lock = threading.Lock()
        self._pushed = -1 if pushed_version is None else int(pushed_version)
        self._pins = hasattr(engine, "pinned_version")  # a server engine: every response must be the batch's
        if self._pins:
            engine.pinned_version = self._pushed
        self._push_recs: dict[int, dict[str, float]] = {}  # iteration -> weights/* of the push before its batch
        self._ready: dict[int, tuple] = {}  # iteration -> (batch, stats, row_shard, version, collect seconds)
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        first = start_iteration + 1
        if resumed_from is not None and (resumed_from / ASYNC_FILE).exists():
            saved, self.start_version = load_batches(resumed_from / ASYNC_FILE)
            self._ready.update(saved)
            first = max([start_iteration, *saved]) + 1
        self._collector = _GuardedCollector(collector, engine, self._repush, self._stop)
        self._thread = threading.Thread(target=self._run, args=(first,), name="gigpo-async-rollout", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the rollout thread
    def push_locked(self, version: int, model: Any = None) -> dict[str, float] | None:
        """With :attr:`engine_lock` held: the engine on ``version`` (``model``, else the store's snapshot of it);
        its ``weights/*`` ({} when it already held it), None if stopped while waiting."""
        if self._pushed == version:
            return {}
        if model is not None:
            rec = self.engine.push_weights(model, version, required=True)
        else:
            done = self.store.use(version, lambda m: self.engine.push_weights(m, version, required=True), self._stop)
            if done is None:
                return None
            rec = done[0]
        self._pushed = version
        if self._pins:
            self.engine.pinned_version = version
        return dict(rec or {})

    def _repush(self) -> None:
        """A restarted worker, re-pushed the version it served (called inside a collect: the lock is held)."""
        v, self._pushed = self._pushed, -1
        if v >= 0:
            self.push_locked(v)

    def _run(self, first: int) -> None:
        cfg = self.cfg
        it = first
        try:
            while not self._stop.is_set() and it <= cfg.train.iterations:
                v = max(sampled_version(it, self.s, self.start_version), self.min_version)
                # wait for the learner outside the engine lock: an evaluation between updates needs that lock
                if not self.store.wait(v, self._stop):
                    return  # stopped while waiting for the learner
                with self.engine_lock:  # the push and the whole batch: no other version in between
                    push_rec = self.push_locked(v)
                    if push_rec is None:
                        return
                    torch_seed = np.random.default_rng([cfg.train.seed, it, rng_streams.TORCH_SEED]).integers(2**62)
                    if hasattr(self.engine, "seed"):
                        self.engine.seed(int(torch_seed))
                    t0 = time.perf_counter()
                    got = collect_shards(self._collector, cfg, it, [0], 1)
                    batch, stats, row_shard = got.batch, got.stats, got.row_shard
                    seconds = time.perf_counter() - t0
                batch.policy_version = [v] * len(batch)
                with self._cond:
                    self._ready[it] = (batch, stats, row_shard, v, seconds)
                    self._push_recs[it] = push_rec
                    self._cond.notify_all()
                it += 1
        except BaseException as e:  # handed to the learner, which raises it in its own thread
            with self._cond:
                self._error = e
                self._cond.notify_all()

    # ------------------------------------------------------------------ the learner's side
    def _wait_for(self, it: int) -> tuple:
        with self._cond:
            while it not in self._ready:
                if self._error is not None:
                    raise self._error
                if not self._thread.is_alive():
                    raise RuntimeError("the async rollout thread stopped")
                self._cond.wait(0.2)
            return self._ready[it]

    def next_batch(self, it: int) -> CollectedBatch:
        """Iteration ``it``'s batch, its ``rollout/*`` stats, row shards, and (``metrics``) the async metrics of the
        wait."""
        t0 = time.perf_counter()
        self._wait_for(it)
        with self._cond:
            batch, stats, row_shard, v, seconds = self._ready.pop(it)
            push_rec = self._push_recs.pop(it, {})  # none for a batch replayed from a checkpoint
        wait = time.perf_counter() - t0
        lag = (it - 1) - v
        rec = {"rollout/policy_version": float(v), "rollout/staleness": float(lag),
               "time/rollout_wait": wait, "time/rollout_collect": seconds,
               "time/tokens_per_s_rollout": float(stats.get("response_tokens", 0.0)) / max(seconds, 1e-9)}
        for d in range(self.s + 1):  # histogram over rows: one version per batch, so one bin holds them all
            rec[f"rollout/staleness_{d}"] = float(d == lag) if len(batch) else 0.0
        rec["rollout/worker_restarts"] = float(getattr(self.engine, "restarts", 0))
        rec.update(push_rec)  # a server engine: weights/* of the push this batch was sampled after
        return CollectedBatch(batch, stats, row_shard, rec)

    def after_update(self, it: int, model: Any) -> None:
        """Version ``it`` exists: the batches that wait for it may start."""
        self.store.publish(it, model)
        self.latest = int(it)

    def save_inflight(self, ckpt_dir: Path, it: int) -> None:
        """Finish iterations it+1 … it+s (their versions exist) and write them into the checkpoint."""
        last = min(it + self.s, self.cfg.train.iterations)
        owed = {}
        for j in range(it + 1, last + 1):
            owed[j] = self._wait_for(j)
        save_batches(ckpt_dir / ASYNC_FILE, owed, self.start_version)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._collector.collector.close()
        if self.owns_engine:
            self.engine.close()


class LatestVersionCollector:
    """The trainer's eval collector over a pinned server engine: each ``collect`` runs between batches (the
    engine lock) on the learner's current weights, pushed as the newest version — what a synchronous run
    evaluates. Call it from the learner's thread only (its model must not change meanwhile)."""

    def __init__(self, collector: Any, rollout: AsyncRollout, model: Any):
        self.collector, self.rollout, self.model = collector, rollout, model

    def collect(self, seeds: list[int], group_size: int, temperature: float | None = None) -> RolloutBatch:
        r = self.rollout
        with r.engine_lock:
            r.push_locked(r.latest, self.model)
            return self.collector.collect(seeds, group_size, temperature)

    def __getattr__(self, name: str) -> Any:  # close() and the rest: the collector's own
        return getattr(self.collector, name)


__all__ = ["ASYNC_FILE", "AsyncRollout", "LatestVersionCollector", "WeightStore", "load_batches", "sampled_version",
           "save_batches"]


