"""The training loop: rollout → advantages → PPO epochs, with evaluation, checkpoints, metrics and resume. Every
object of a run is built by :func:`gigpo.train.compose.build_run`; the trainer only runs them."""

from __future__ import annotations

import logging
import math
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import fields
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gigpo.rollout import RolloutBatch
from gigpo.train.collect.dynamic_sampling import CollectedBatch, collect_shards
from gigpo.train.collect.remote import after_update
from gigpo.train.compose import RunParts, build_run
from gigpo.train.config import Config, rng_streams
from gigpo.train.config.algorithms import loss_of
from gigpo.train.evaluate import evaluation_summary, run_evaluation
from gigpo.train.parallel import distributed
from gigpo.train.preflight.action_check import check_training_start
from gigpo.train.reporting.metrics import plot_curves
from gigpo.train.reporting.samples import write_samples
from gigpo.train.rundir import ResumePlan, plan_resume
from gigpo.train.rundir.checkpoint import checkpoint_dir, list_checkpoints, save_checkpoint
from gigpo.train.update.estimate import Advantages, row_advantages
from gigpo.train.update.loss_terms import policy_terms, value_terms
from gigpo.train.update.passes import PassResults, trainable_rows
from gigpo.train.update.schedule import lr_at
from gigpo.train.update.value import VALUE_HEAD_FILE, save_value_head

log = logging.getLogger(__name__)
__all__ = ["Trainer"]


class Trainer:
    """Runs a training run's parts (:class:`gigpo.train.compose.RunParts`, each one an attribute of the trainer:
    ``model``, ``optimizer``, ``engine``, ``collector``, ...). ``Trainer(cfg).train()`` builds them first with
    :func:`gigpo.train.compose.build_run`; ``Trainer.resume(run_dir)`` continues a run.

    A fresh run refuses a ``run_dir`` that holds another run (see :mod:`gigpo.train.rundir`) before it loads
    anything, and creates the directory only once the model source is known to exist."""

    def __init__(self, run: RunParts | Config, run_dir: str | Path | None = None):
        parts = run if isinstance(run, RunParts) else build_run(run, run_dir)
        for f in fields(parts):
            setattr(self, f.name, getattr(parts, f.name))
        self.pad_id = self.tok.pad_token_id
        # old log-probs/values feed the estimator only with a critic or a KL reward (and the remote engine's
        # bookkeeping always): otherwise update() runs those passes itself, and only if the iteration has signal
        self.passes_before_advantages = (self.value_head is not None or self.use_ref
                                         or not self.engine.shares_learner_weights)

    @classmethod
    def resume(cls, run_dir: str | Path, overrides: dict | None = None, *, allow_config_change: bool = False
               ) -> Trainer:
        """Continue a run from its newest intact checkpoint. ``overrides`` may change the keys in
        :data:`gigpo.train.rundir.SAFE_RESUME_KEYS`; others need ``allow_config_change``. Raises (before any
        model loads) as :func:`gigpo.train.rundir.plan_resume` does, e.g. NothingToDo for a finished run."""
        return cls.from_plan(plan_resume(run_dir, overrides, allow_config_change=allow_config_change))

    @classmethod
    def from_plan(cls, plan: ResumePlan) -> Trainer:
        return cls(build_run(plan.cfg, plan.run_dir, resume=plan))

    # ------------------------------------------------------------------ loop
    def train(self) -> dict:
        t = self.cfg.train
        last: dict = {}
        bar = None
        main = self.dist.is_main  # one progress bar, one metrics file, one set of curves: rank 0's
        if t.progress and main:
            from tqdm.auto import tqdm

            bar = tqdm(total=t.iterations, initial=self.start_iteration, desc="gigpo", unit="it", dynamic_ncols=True)
        if self.start_iteration == 0 and t.eval_episodes and t.eval_every:
            last_eval = self.evaluate(t.eval_episodes)
            if main:
                self.metrics.write(rec0 := {"iteration": 0, **{f"eval/{k}": v for k, v in last_eval.items()}})
                self.reporting.record(rec0)
        it, start_valid = self.start_iteration, []
        try:
            for it in range(self.start_iteration + 1, t.iterations + 1):
                last = self.iteration(it)
                if t.eval_episodes and ((t.eval_every and it % t.eval_every == 0) or it == t.iterations):
                    ev = self.evaluate(t.eval_episodes)
                    last.update({f"eval/{k}": v for k, v in ev.items()})
                if main:
                    self.metrics.write(last)
                    self.reporting.record(last)
                check_training_start(self.cfg, it, last, start_valid, self.tok)  # a run that cannot act stops
                if (t.checkpoint_every and it % t.checkpoint_every == 0) or it == t.iterations:
                    self.save(it)
                if bar is not None:
                    post = {"success": f"{last['rollout/success_rate']:.2f}", "ret": f"{last['rollout/episode_return']:.2f}"}
                    if "eval/success_rate" in last:
                        post["eval"] = f"{last['eval/success_rate']:.2f}"
                    bar.set_postfix(post, refresh=False)  # one redraw per iteration: update() draws it
                    bar.update(1)
        except KeyboardInterrupt:
            done = list_checkpoints(self.run_dir)
            msg = f"interrupted at iteration {it}; last checkpoint: {done[-1] if done else 'none'} (intact)"
            log.info(msg)  # below the default WARNING level: the line is printed once, here
            print(msg, flush=True)
            raise
        finally:
            if bar is not None:
                bar.close()
            self.collector.close()
            self.eval_collector.close()
            if self.async_rollout is not None:
                self.async_rollout.close()
            if main and sys.exc_info()[0] is not None:
                self.reporting.finish(None, ok=False)
            self.engine.close()
        if main and (self.run_dir / "metrics.jsonl").exists():
            self.reporting.finish(plot_curves(self.run_dir / "metrics.jsonl", self.run_dir / "curves.png"))
        return last

    def iteration(self, it: int) -> dict:
        """One iteration, top to bottom: rollout → (no-grad passes) → advantages → update → log."""
        lr = self.start_iteration_at(it)
        timer = PhaseTimer()
        with timer("rollout"):
            rollout = self.rollout(it)
        with timer("update", cpu=True):  # the no-grad passes count as update time
            prep = self.prepare(rollout.batch) if self.passes_before_advantages else None
        with timer("advantages"):  # a critic's values and the KL reward come from the passes
            values, kl = (prep.values, prep.kl) if prep is not None else (None, None)
            adv = row_advantages(self.cfg, rollout.batch, self.grouping, values, kl)
        with timer("update", cpu=True):
            update_rec = self.update(rollout.batch, adv.advantages, it, prep, adv.value_targets, rollout.row_shard)
            update_rec.update(self.passes.take_tally())
        if self.async_rollout is not None:  # version `it` exists: the batches owed to it may start
            self.async_rollout.after_update(it, self.model)
        engine_rec = after_update(self.engine, self.model, it, rollout.batch, prep)  # weight push, engine metrics
        return self.log(it, lr, rollout, adv, update_rec, engine_rec, timer.seconds)

    def start_iteration_at(self, it: int) -> float:
        """Seed torch and set the learning rate for iteration ``it``; returns the lr. Every random draw of an
        iteration derives from (seed, iteration): an interrupted and resumed run replays an uninterrupted one."""
        torch.manual_seed(int(np.random.default_rng([self.cfg.train.seed, it, rng_streams.TORCH_SEED]).integers(2**62)))
        lr = lr_at(self.cfg, it)
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)
        return lr

    def rollout(self, it: int) -> CollectedBatch:
        """The batch iteration ``it`` trains on: from the async rollout (collected by an older policy version while
        earlier updates ran), else collected now — this process's shards, on all-gathered weights under FSDP."""
        with self.dp.full_weights():
            if self.async_rollout is not None:
                return self.async_rollout.next_batch(it)
            return collect_shards(self.collector, self.cfg, it, self.dist.shards, self.dist.n_shards)

    def log(self, it: int, lr: float, rollout: CollectedBatch, adv: Advantages, update_rec: dict,
            engine_rec: dict, seconds: dict[str, float]) -> dict:
        """The iteration's metrics record (averaged over ranks), and rank 0's samples of its groups."""
        rec: dict[str, Any] = {"iteration": it, "optim/lr": lr, **{f"rollout/{k}": v for k, v in rollout.stats.items()}}
        tokens = rec["rollout/response_tokens"]
        rec["time/tokens_per_s_rollout"] = tokens / max(seconds["time/rollout"], 1e-9)
        rec.update(rollout.metrics)  # async: its own time/tokens_per_s_rollout (collection time, not the wait)
        rec.update(adv.stats)
        rec.update(update_rec)
        rec["time/tokens_per_s_update"] = tokens * self.cfg.optim.ppo_epochs / max(seconds["time/update"], 1e-9)
        rec.update(engine_rec)
        rec.update(seconds)
        rec = self.dist.mean_metrics(rec)
        if self.dist.is_main:  # rank 0's own groups
            if self.cfg.train.sample_trajectories:
                write_samples(self.run_dir / "samples" / f"iter_{it:06d}.txt", rollout.batch, adv.advantages,
                              self.cfg.train.sample_trajectories)
            self.reporting.samples(it, rollout.batch, adv.advantages)
        return rec

    # ------------------------------------------------------------------ update
    def prepare(self, batch: RolloutBatch) -> PassResults:
        """Old/reference log-probs, critic values and KL of ``batch`` (see :meth:`PolicyPasses.prepare`)."""
        with self.dp.full_weights():
            return self.passes.prepare(batch)

    def update(self, batch: RolloutBatch, adv: np.ndarray, it: int, prep: PassResults | None = None,
               targets: np.ndarray | None = None, row_shard: np.ndarray | None = None) -> dict:
        """``optim.ppo_epochs`` epochs of ``optim.mini_batches`` PPO steps over the trainable rows of ``batch``
        (``row_shard``: each row's data-parallel shard; one process: all 0); the ``update/*`` metrics."""
        o = self.cfg.optim
        rows_all = trainable_rows(batch)
        skipped = self.skip_update(rows_all, adv)
        if skipped is not None:
            return skipped
        prep = prep if prep is not None else self.prepare(batch)
        adv_t = torch.as_tensor(adv, dtype=torch.float32)
        critic = None
        if self.value_head is not None:
            critic = (torch.as_tensor(prep.values, dtype=torch.float32), torch.as_tensor(targets, dtype=torch.float32))
        # [seed, it, MINIBATCH_ORDER(, shard)]: per-shard orders, so ranks hold parts of the same mini-batches
        epochs = distributed.minibatch_partition(row_shard if row_shard is not None else np.zeros(len(batch), np.int64),
                                                 rows_all, self.dist.n_shards, self.cfg.train.seed, it,
                                                 o.ppo_epochs, o.mini_batches)
        self.model.train()
        acc: dict[str, list[float]] = {}
        skipped_steps = 0
        for minibatches in epochs:
            for mb in minibatches:
                if not mb and not self.dist.active:  # ranks step together: an empty part still takes part
                    continue
                stats = self._minibatch_step(batch, mb, prep.old, prep.ref, adv_t, critic)
                if stats is None:
                    skipped_steps += 1
                    continue
                for k, v in stats.items():
                    acc.setdefault(k, []).append(v)
        self.model.eval()
        return {**{k: float(np.mean(v)) for k, v in acc.items()}, "update/skipped_steps": float(skipped_steps),
                "update/sampler_logprob_gap": prep.sampler_gap}

    def skip_update(self, rows: list[int], adv: np.ndarray) -> dict | None:
        """The record of an update that cannot change the weights, decided over every rank (None: update):
        no trainable row anywhere, or every advantage 0 with no other loss term (the gradient would be exactly
        0, see :meth:`_minibatch_step`; its passes — the no-grad ones too, when not yet run — are skipped: often
        half of a sparse-reward run)."""
        o = self.cfg.optim
        if not (self.dist.all_sum([len(rows)])[0] if self.dist.active else rows):
            warnings.warn("no trainable rows this iteration (all trajectories failed, or dynamic sampling kept no "
                          "group); update skipped", stacklevel=3)
            return {"update/skipped": 1.0}
        if (not o.entropy_coef and not o.kl_coef and self.value_head is None
                and not self.dist.all_max(float(np.any(np.asarray(adv) != 0)))):
            return {"update/no_signal_steps": 1.0, "update/grad_norm": 0.0}
        return None

    def _minibatch_step(self, batch, mb, old, ref, adv_t, critic=None) -> dict | None:
        o, a = self.cfg.optim, self.cfg.algorithm
        lm = getattr(batch, "loss_mask", None)
        tokens_local = sum(sum(lm[r]) if lm is not None else len(batch.response_ids[r]) for r in mb)
        # length-bucketed micro-batches: rows of similar length share a pass, so little compute goes to padding
        # (the accumulation below weights each micro-batch by its own counts: the sum is order-free)
        mb = sorted(mb, key=lambda r: len(batch.prompt_ids[r]) + len(batch.response_ids[r]))
        micro = [mb[i:i + o.micro_batch_size] for i in range(0, len(mb), o.micro_batch_size)]
        # the mini-batch's denominators over all ranks; k = K because DDP/FSDP average gradients over ranks
        tokens_total, rows_total, n_micro = self.dp.global_counts(tokens_local, len(mb), len(micro))
        if not rows_total:
            return {}
        k = self.dist.world_size
        micro += [[]] * (n_micro - len(micro))  # padding steps: every rank runs the same collectives
        loss_fn = loss_of(self.cfg).fn()  # algorithm.loss, else the algorithm's own (a registered loss name)
        self.optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = {}
        bad = False
        for i, rows in enumerate(micro):
            self.dp.set_sync(last=i == len(micro) - 1)
            if not rows:
                self.dp.padding_step(self.pad_id, self.device)
                continue
            logp, mask, ent, values = self.passes.logprobs(self.dp.train_model, rows, batch, with_entropy=True,
                                                            head=self.value_head)
            loss, logs = policy_terms(self.cfg, loss_fn, batch, rows, logp, mask, ent, old, ref, adv_t)
            # Exact gradient accumulation: weight each micro-batch by its share of the mini-batch's denominator.
            weight = k * (mask.sum().item() / max(tokens_total, 1) if o.loss_agg == "token-mean"
                          else len(rows) / rows_total)
            total = loss * weight
            if critic is not None:  # the value loss is a mean over rows, whatever the policy loss aggregation
                vl, vlogs = value_terms(self.cfg, values, critic, rows)
                total = total + a.ppo.value_coef * vl * (k * len(rows) / rows_total)
                logs += vlogs
            if not torch.isfinite(total):
                warnings.warn("non-finite loss; update skipped", stacklevel=2)
                if not self.dist.active:
                    self.optimizer.zero_grad(set_to_none=True)
                    return None
                bad = True  # the other ranks still wait for this micro-batch's collectives
                self.dp.padding_step(self.pad_id, self.device)
                continue
            total.backward()
            for key, v in (*logs, ("loss/total", loss.item())):
                sums[key] = sums.get(key, 0.0) + float(v) * (weight if not key.startswith(("loss/value", "value/"))
                                                             else k * len(rows) / rows_total)
        if self.dist.active and self.dist.all_max(float(bad)):
            self.optimizer.zero_grad(set_to_none=True)
            return None
        self.dp.finish_gradients()
        grad_norm = self.dp.clip_grad_norm(self.trainable, self.cfg.optim.grad_clip or float("inf"))
        if not math.isfinite(float(grad_norm)):
            warnings.warn("non-finite gradient norm; update skipped", stacklevel=2)
            self.optimizer.zero_grad(set_to_none=True)
            return None
        sums["update/grad_norm"] = float(grad_norm)
        sums["update/no_signal_steps"] = float(grad_norm == 0)
        if grad_norm == 0:
            # Nothing to learn (every advantage 0, no entropy/KL/value term): AdamW would still move the weights by
            # its momentum. Measured: a solved lock policy collapsed in such an iteration (docs/results/credit.md).
            self.optimizer.zero_grad(set_to_none=True)
            return sums
        self.optimizer.step()
        return sums

    # ------------------------------------------------------------------ eval / save
    def evaluate(self, episodes: int) -> dict:
        """Held-out seeds (and the env's test split when it has one), one trajectory each."""
        with self.dp.full_weights():  # K ranks: the episodes split over ranks, the summary of all of them
            summary, _ = distributed.split_evaluation(self.dist, run_evaluation, evaluation_summary,
                                                      self.eval_collector, self.cfg.train.seed, episodes,
                                                      self.cfg.train.eval_temperature)
        return summary

    def save(self, it: int) -> Path:
        from gigpo.models import save_pretrained

        extra = {"run_id": self.run_id, "seed": self.cfg.train.seed,
                 "saved_at": datetime.now().isoformat(timespec="seconds")}
        # FSDP: weights and optimiser state gathered from every rank (collectives); rank 0 writes the checkpoint
        full_state = self.dp.model_state_dict()
        optimizer_state = self.dp.optimizer_state_dict(self.optimizer)

        def save_model(p: Path) -> None:
            save_pretrained(self.bundle, p, state_dict=full_state)
            if self.value_head is not None:  # next to model/ inside the (atomic) checkpoint directory
                save_value_head(self.value_head, p.parent / VALUE_HEAD_FILE)
            if self.async_rollout is not None:  # the batches owed to existing versions (exact resume)
                self.async_rollout.save_inflight(p.parent, it)

        path = checkpoint_dir(self.run_dir, it)
        if self.dist.is_main:
            path = save_checkpoint(self.run_dir, it, save_model, self.optimizer, extra,
                                   self.cfg.train.keep_checkpoints, optimizer_state=optimizer_state)
        self.dist.barrier()  # nobody runs ahead of a checkpoint that is still being written
        return path


class PhaseTimer:
    """Seconds per phase of an iteration (``time/<phase>``; ``cpu``: also ``time/<phase>_cpu``, the process's CPU
    time over all threads), summed over the phase's blocks."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str, cpu: bool = False):
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self._add(f"time/{phase}", time.perf_counter() - t0)
            if cpu:
                self._add(f"time/{phase}_cpu", time.process_time() - c0)

    def _add(self, key: str, seconds: float) -> None:
        self.seconds[key] = self.seconds.get(key, 0.0) + seconds
