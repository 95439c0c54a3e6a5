"""The training loop: rollout → advantages → PPO epochs, with evaluation, checkpoints, metrics and resume."""

from __future__ import annotations

import copy
import logging
import math
import sys
import time
import uuid
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gigpo.algo import similarity
from gigpo.rollout import RolloutBatch
from gigpo.train import distributed, rng_streams
from gigpo.train.action_check import check_training_start
from gigpo.train.algorithms import loss_of, needs_reference, spec_of
from gigpo.train.async_rollout import AsyncRollout
from gigpo.train.checkpoint import checkpoint_dir, list_checkpoints, restore_rng, save_checkpoint, set_aside
from gigpo.train.compose import build_collector, env_factory
from gigpo.train.config import Config
from gigpo.train.data_parallel import DataParallel
from gigpo.train.dynamic_sampling import collect_shards
from gigpo.train.estimate import row_advantages
from gigpo.train.evaluate import run_evaluation
from gigpo.train.loss_terms import policy_terms, value_terms
from gigpo.train.memory_estimate import warn_peak_memory
from gigpo.train.metrics import MetricsLog, plot_curves
from gigpo.train.passes import PolicyPasses, trainable_rows
from gigpo.train.remote import after_update, build_engine, start_engine
from gigpo.train.reporting import RunReporting
from gigpo.train.rundir import ResumePlan, check_fresh_run_dir, create_run_dir, plan_resume, write_run_records
from gigpo.train.samples import write_samples
from gigpo.train.schedule import lr_at
from gigpo.train.value import VALUE_HEAD_FILE, ValueHead, hidden_size_of, load_value_head, save_value_head

log = logging.getLogger(__name__)
__all__ = ["Trainer"]


class Trainer:
    """Composes env, model, collector and the algorithm. ``Trainer(cfg).train()`` or ``Trainer.resume(run_dir)``.

    A fresh Trainer refuses a ``run_dir`` that holds another run (see :mod:`gigpo.train.rundir`) before it
    loads anything, and creates the directory only once the model source is known to exist."""

    def __init__(self, cfg: Config, run_dir: str | Path | None = None, *, _resume: ResumePlan | None = None):
        from gigpo.models import load_model, resolve_model_source

        self.cfg = cfg
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        similarity.set_threads(cfg.train.threads)  # the compiled grouping's threads follow train.threads too
        if _resume is None:
            check_fresh_run_dir(cfg, run_dir)
        resolve_model_source(cfg.model.name)  # a missing model fails here, before anything heavy
        self.dist = distributed.current()  # rank 0 writes the run directory; every rank reads it
        if _resume is None:
            # identifies this run's checkpoints: keep-last-k never deletes another run's
            made = (str(create_run_dir(cfg, run_dir)), uuid.uuid4().hex) if self.dist.is_main else None
            made = self.dist.broadcast_from_main(made)
            self.run_dir, self.run_id = Path(made[0]), made[1]
            cfg.train.run_dir = str(self.run_dir)
        else:
            self.run_dir = _resume.run_dir
            self.run_id = str(_resume.state.get("run_id") or uuid.uuid4().hex)
        _resume_from = _resume.checkpoint if _resume is not None else None
        self.resumed_from = _resume_from
        self.start_iteration = 0
        lora = None
        if cfg.lora.enabled:
            lora = {k: getattr(cfg.lora, k) for k in ("r", "alpha", "dropout", "target_modules")}
        model_path = str(_resume_from / "model") if _resume_from else cfg.model.name
        self.bundle = load_model(
            model_path, device=self.dist.device(cfg.model.device), dtype=cfg.model.dtype,
            lora=lora if not _resume_from else None,
            seed=cfg.train.seed, tiny=(cfg.model.tiny or None) if not _resume_from else None,
        )
        self.model = self.bundle.model
        self.tok = self.bundle.tokenizer
        self.device = torch.device(self.bundle.device)
        if cfg.model.gradient_checkpointing:
            self.model.gradient_checkpointing_enable()
        self.pad_id = self.tok.pad_token_id
        self.spec = spec_of(cfg.algorithm.name)
        self.ref_model = None
        self.use_ref = needs_reference(cfg)
        if self.use_ref and not cfg.lora.enabled:  # copied before FSDP shards the policy
            self.ref_model = copy.deepcopy(self.model).eval().requires_grad_(False)
        self.dp = DataParallel(self.dist, self.model, self.device)  # DDP / FSDP2 / plain (one process)
        params = [p for p in self.model.parameters() if p.requires_grad]
        if not params:
            raise ValueError("the model has no trainable parameters")
        o = cfg.optim
        groups = [{"params": params}]
        self.value_head = None
        if self.spec.critic:  # a value head, its own param group; algorithm.ppo's keys (VALUE_HEAD_SECTION)
            self.value_head = ValueHead(hidden_size_of(self.model)).to(self.device)
            groups.append({"params": list(self.value_head.parameters()), "lr": cfg.algorithm.ppo.value_lr or o.lr,
                           "lr_scale": (cfg.algorithm.ppo.value_lr or o.lr) / o.lr})
        self.trainable = params + (list(self.value_head.parameters()) if self.value_head is not None else [])
        self.optimizer = torch.optim.AdamW(groups, lr=o.lr, betas=tuple(o.betas), weight_decay=o.weight_decay)
        # rollout.engine, from the engine registry (gigpo.rollout.engines): one contract for every engine
        self.engine = build_engine(cfg, self.bundle, self.run_dir)
        self.collector = build_collector(cfg, self.engine, self.tok, branch=True)
        self.eval_collector = build_collector(cfg, self.engine, self.tok, split="test")
        warn_peak_memory(cfg, self.model, self.collector.prompts, env_factory(cfg))  # the real model and prompts
        self.metrics = MetricsLog(self.run_dir)  # trackers (train.loggers, tensorboard too): self.reporting
        if _resume is not None:
            # optimizer and RNG states were read (weights_only / JSON) and verified by plan_resume
            self.dp.load_optimizer_state_dict(self.optimizer, _resume.optimizer_state)
            restore_rng(_resume.rng)
            if self.value_head is not None:
                load_value_head(self.value_head, _resume_from / VALUE_HEAD_FILE)
            self.start_iteration = _resume.iteration
            if self.ref_model is not None and (_resume_from / "reference").exists():
                ref = load_model(str(_resume_from / "reference"), device=str(self.device), dtype=cfg.model.dtype)
                self.ref_model = ref.model.eval().requires_grad_(False)
            for ckpt, _why in _resume.skipped if self.dist.is_main else ():  # out of the way of eval and prune
                log.warning("moved skipped checkpoint %s to %s", ckpt, set_aside(ckpt).name)
            if self.dist.is_main:
                self.metrics.truncate_after(self.start_iteration)
        self.dp.add_reference(self.ref_model, self.value_head)
        start_engine(self.engine, self.model, self.start_iteration)  # reachable, on these weights, before rollout
        self.passes = PolicyPasses(cfg, self.model, self.ref_model, self.value_head, self.pad_id, self.device,
                                   self.use_ref, distributed=self.dist.active)
        if self.dist.is_main:
            write_run_records(self.run_dir, cfg, self.start_iteration, str(self.device))
        # rollout.async: later iterations' batches are collected while this one updates (async_rollout.py)
        self.async_rollout = AsyncRollout.for_trainer(self) if cfg.rollout.async_ else None
        # samples/iter_N.jsonl, health alerts, trackers (rank 0)
        self.reporting = RunReporting(cfg, self.run_dir, self.start_iteration) if self.dist.is_main else None

    @classmethod
    def resume(cls, run_dir: str | Path, overrides: dict | None = None, *, allow_config_change: bool = False
               ) -> Trainer:
        """Continue a run from its newest intact checkpoint. ``overrides`` may change the keys in
        :data:`gigpo.train.rundir.SAFE_RESUME_KEYS`; others need ``allow_config_change``. Raises (before any
        model loads) as :func:`gigpo.train.rundir.plan_resume` does, e.g. NothingToDo for a finished run."""
        return cls.from_plan(plan_resume(run_dir, overrides, allow_config_change=allow_config_change))

    @classmethod
    def from_plan(cls, plan: ResumePlan) -> Trainer:
        return cls(plan.cfg, plan.run_dir, _resume=plan)

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
        cfg = self.cfg
        # Every random draw of an iteration derives from (seed, iteration): an interrupted and resumed run
        # replays exactly what an uninterrupted one does.
        torch_seed = np.random.default_rng([cfg.train.seed, it, rng_streams.TORCH_SEED]).integers(2**62)
        torch.manual_seed(int(torch_seed))
        lr = lr_at(cfg, it)
        for group in self.optimizer.param_groups:
            group["lr"] = lr * group.get("lr_scale", 1.0)
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        arec: dict[str, float] = {}
        with self.dp.full_weights():  # FSDP: generation runs on all-gathered weights
            if self.async_rollout is not None:  # collected, by an older policy version, while earlier updates ran
                batch, roll, self.row_shard, arec = self.async_rollout.next_batch(it)
            else:
                batch, roll, self.row_shard = collect_shards(self.collector, cfg, it, self.dist.shards,
                                                             self.dist.n_shards)
        timings["time/rollout"] = time.perf_counter() - t0
        rec: dict[str, Any] = {"iteration": it, "optim/lr": lr}
        rec.update({f"rollout/{k}": v for k, v in roll.items()})
        rec["time/tokens_per_s_rollout"] = rec["rollout/response_tokens"] / max(timings["time/rollout"], 1e-9)
        rec.update(arec)

        t0, c0 = time.perf_counter(), time.process_time()
        # old log-probs/values feed the estimator only with a critic or a KL reward (and the remote engine's
        # bookkeeping always): otherwise update() runs those passes itself, and only if the iteration has signal
        needed = self.value_head is not None or self.use_ref or not self.engine.shares_learner_weights
        prep = self.prepare(batch) if needed else None
        t_prep, c_prep = time.perf_counter() - t0, time.process_time() - c0

        t0 = time.perf_counter()
        adv, targets, adv_stats = row_advantages(self.cfg, batch, *((prep or {}).get(k) for k in ("values", "kl")))
        timings["time/advantages"] = time.perf_counter() - t0
        rec.update(adv_stats)

        t0, c0 = time.perf_counter(), time.process_time()
        rec.update(self.update(batch, adv, it, prep, targets), **self.passes.take_tally())
        timings["time/update"] = time.perf_counter() - t0 + t_prep
        timings["time/update_cpu"] = time.process_time() - c0 + c_prep  # all threads of this process
        if self.async_rollout is not None:  # version `it` exists: the batches owed to it may start
            self.async_rollout.after_update(it, self.model)
        rec["time/tokens_per_s_update"] = (
            rec["rollout/response_tokens"] * cfg.optim.ppo_epochs / max(timings["time/update"], 1e-9)
        )
        rec.update(after_update(self.engine, self.model, it, batch, prep))  # weight push, engine metrics
        rec.update(timings)
        rec = self.dist.mean_metrics(rec)
        if cfg.train.sample_trajectories and self.dist.is_main:  # rank 0's own groups
            write_samples(self.run_dir / "samples" / f"iter_{it:06d}.txt", batch, adv, cfg.train.sample_trajectories)
        if self.dist.is_main:
            self.reporting.samples(it, batch, adv)
        return rec

    # ------------------------------------------------------------------ update
    def prepare(self, batch: RolloutBatch) -> dict:
        """Old/reference log-probs, critic values and KL of ``batch`` (see :meth:`PolicyPasses.prepare`)."""
        with self.dp.full_weights():
            return self.passes.prepare(batch)

    def update(self, batch: RolloutBatch, adv: np.ndarray, it: int, prep: dict | None = None,
               targets: np.ndarray | None = None) -> dict:
        o = self.cfg.optim
        rows_all = trainable_rows(batch)
        if not (self.dist.all_sum([len(rows_all)])[0] if self.dist.active else rows_all):  # none on any rank
            warnings.warn("no trainable rows this iteration (all trajectories failed, or dynamic sampling kept no "
                          "group); update skipped", stacklevel=2)
            return {"update/skipped": 1.0}
        if (not o.entropy_coef and not o.kl_coef and self.value_head is None
                and not self.dist.all_max(float(np.any(np.asarray(adv) != 0)))):
            # every advantage 0 and no other loss term: the gradient would be exactly 0 (see _minibatch_step), so
            # the passes (the no-grad ones too, when not yet run) are skipped — often half of a sparse-reward run
            return {"update/no_signal_steps": 1.0, "update/grad_norm": 0.0}
        prep = prep if prep is not None else self.prepare(batch)
        adv_t = torch.as_tensor(adv, dtype=torch.float32)
        critic = None
        if self.value_head is not None:
            critic = (torch.as_tensor(prep["values"], dtype=torch.float32),
                      torch.as_tensor(targets, dtype=torch.float32))
        # [seed, it, MINIBATCH_ORDER(, shard)]: per-shard orders, so ranks hold parts of the same mini-batches
        epochs = distributed.minibatch_partition(getattr(self, "row_shard", np.zeros(len(batch), dtype=np.int64)),
                                                 rows_all, self.dist.n_shards, self.cfg.train.seed, it,
                                                 o.ppo_epochs, o.mini_batches)
        self.model.train()
        acc: dict[str, list[float]] = {}
        skipped = 0
        for minibatches in epochs:
            for mb in minibatches:
                if not mb and not self.dist.active:  # ranks step together: an empty part still takes part
                    continue
                stats = self._minibatch_step(batch, mb, prep.get("old", {}), prep.get("ref"), adv_t, critic)
                if stats is None:
                    skipped += 1
                    continue
                for k, v in stats.items():
                    acc.setdefault(k, []).append(v)
        self.model.eval()
        return {**{k: float(np.mean(v)) for k, v in acc.items()}, "update/skipped_steps": float(skipped),
                "update/sampler_logprob_gap": prep.get("sampler_gap", 0.0)}

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
            summary, _ = distributed.split_evaluation(self.dist, run_evaluation, self.eval_collector,
                                                      self.cfg.train.seed, episodes, self.cfg.train.eval_temperature)
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
