"""optim.shared_prefix through the trainer and the sampler: one update's parameter gradients (micro-batched,
step and concat rows) and the old log-probs equal ``optim.shared_prefix=off``; constrained generation with the
prefix prefill samples the same tokens with the same log-probs for the same seeds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gigpo.agent.constrained import ConstraintCache
from gigpo.rollout.engines.hf import HFEngine
from gigpo.train.config import load_config
from gigpo.train.trainer import Trainer, collect_shards

SMALL = ["env.size=3", "env.max_steps=4", "rollout.groups=2", "rollout.group_size=3", "optim.micro_batch_size=3",
         "optim.mini_batches=2", "optim.ppo_epochs=1", "train.iterations=1", "train.eval_episodes=0",
         "train.progress=false", "train.threads=1", "train.sample_trajectories=0", "rollout.decoding=constrained"]


def _grads_of_one_update(cfg, batch, adv):
    tr = Trainer(cfg)
    seen = []

    def capture():  # the first optimizer step's gradients, then step as usual
        if not seen:
            seen.append([p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in tr.trainable])

    tr.optimizer.register_step_pre_hook(lambda *_: capture())
    prep = tr.prepare(batch)
    tr.update(batch, adv, 1, prep)
    tally = tr.passes.take_tally()
    tr.collector.close()
    return seen[0], prep.old, tally


@pytest.mark.parametrize("mode", ["step", "concat"])
def test_update_gradients_equal_with_and_without_shared_prefixes(tmp_path, mode):
    over = [*SMALL, f"rollout.mode={mode}", "optim.shared_prefix_min_tokens=8",
            *(["algorithm.name=grpo"] if mode == "concat" else [])]
    cfg_on = load_config(None, [*over, f"train.run_dir={tmp_path / 'on'}"])
    cfg_off = load_config(None, [*over, f"train.run_dir={tmp_path / 'off'}", "optim.shared_prefix=off"])
    with torch.random.fork_rng(devices=[]):
        tr = Trainer(cfg_off)
        batch = collect_shards(tr.collector, cfg_off, 1, tr.dist.shards, tr.dist.n_shards).batch
        tr.collector.close()
    adv = np.random.default_rng(0).normal(size=len(batch))
    with torch.random.fork_rng(devices=[]):
        g_off, old_off, t_off = _grads_of_one_update(cfg_off, batch, adv)
    with torch.random.fork_rng(devices=[]):
        g_on, old_on, t_on = _grads_of_one_update(cfg_on, batch, adv)
    assert t_on["update/tokens_forwarded"] < t_off["update/tokens_forwarded"] == t_off["update/tokens_unique_rows"]
    assert t_on["update/tokens_rows"] == t_off["update/tokens_rows"]
    for r in old_off:
        assert torch.allclose(old_off[r], old_on[r], atol=1e-5)
    total = torch.sqrt(sum((a ** 2).sum() for a in g_off))
    assert total > 0
    for a, b in zip(g_off, g_on):
        assert (a - b).norm() <= 1e-4 * a.norm() + 1e-6 * total


def test_constrained_prefill_over_shared_prefixes_samples_the_same(tmp_path):
    cfg = load_config(None, [*SMALL, f"train.run_dir={tmp_path}"])
    tr = Trainer(cfg)
    tok, model = tr.tok, tr.model
    rules = tok("you are in a grid . move to the goal . answer with one word : up down left right",
                add_special_tokens=False)["input_ids"]
    prompts = [rules + tok(o, add_special_tokens=False)["input_ids"]
               for o in ("goal is up", "goal is left", "goal is up", "wall", "goal is down right")] + [rules[:5]]
    words = ["up", "down", "left", "right"]
    cache = ConstraintCache(tok, HFEngine(model, tok, "cpu").eos_ids, "plain")
    outs = []
    for share in (0, 8):
        engine = HFEngine(model, tok, "cpu", share_prefix_min_tokens=share)
        calls: list[tuple] = []

        def record(_m, _a, kw, calls=calls):  # bound now: each arm records its own forwards
            calls.append(tuple(kw["input_ids"].shape))

        h = model.register_forward_pre_hook(record, with_kwargs=True)
        try:
            torch.manual_seed(3)
            outs.append((engine.generate(prompts * 3, max_new_tokens=3, temperature=1.0, top_p=1.0,
                                         constraints=[cache.get(words) for _ in prompts * 3]), calls))
        finally:
            h.remove()
    (flat, flat_calls), (shared, shared_calls) = outs
    assert shared_calls[0][0] == 1 and shared_calls[0][1] >= len(rules) - 1  # the rules forwarded once
    assert flat_calls[0][0] == 5  # the distinct prompts, whole
    for a, b in zip(flat, shared):
        assert a.token_ids == b.token_ids and a.action == b.action
        assert np.allclose(a.logprobs, b.logprobs, atol=1e-5)
    tr.collector.close()
