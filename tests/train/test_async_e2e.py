"""rollout.async end to end with the tiny model: the worker samples what the learner's engine would, every batch
is one policy version on the fixed-lag schedule, an interrupted run resumes exactly, a dying worker fails its
trajectories and the run goes on, PPO runs."""

import os
import signal
from pathlib import Path

import pytest
import torch
from trainer_interrupt import interrupt_at

from gigpo.rollout import HFEngine
from gigpo.rollout.engines.hf_worker import WorkerDied, WorkerEngine
from gigpo.train.async_rollout import _GuardedCollector
from gigpo.train.compose import build_collector
from gigpo.train.config import load_config
from gigpo.train.reporting.metrics import read_metrics
from gigpo.train.rundir.checkpoint import list_checkpoints
from gigpo.train.trainer import Trainer

SMALL = [
    "model.tiny={english_words: false, hidden_size: 32, intermediate_size: 64}",
    "optim.lr_schedule=constant", "env.size=3", "env.max_steps=4",
    "rollout.groups=2", "rollout.group_size=3",
    "optim.micro_batch_size=8", "optim.mini_batches=2", "optim.ppo_epochs=2",
    "train.eval_episodes=0", "train.progress=false", "train.threads=1",
    "rollout.async=true", "optim.offpolicy_correction=tis",
]


def small_cfg(run_dir: Path, *extra: str):
    return load_config(None, SMALL + [f"train.run_dir={run_dir}", *extra])


def _learning(path: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in read_metrics(path)]


@pytest.fixture(scope="module")
def bundle():
    from gigpo.models import load_model

    return load_model("tiny", device="cpu", seed=0, tiny={"english_words": False, "hidden_size": 32,
                                                            "intermediate_size": 64})


def test_worker_samples_exactly_what_the_local_engine_samples(bundle):
    torch.set_num_threads(1)
    local = HFEngine(bundle.model, bundle.tokenizer, "cpu")
    worker = WorkerEngine(bundle.model, bundle.tokenizer, engine_cls=HFEngine, threads=1)
    try:
        prompts = [[5, 6, 7], [8, 9], [5, 6, 7]]
        for temperature in (1.0, 0.0):
            worker.seed(123)
            torch.manual_seed(123)
            a = local.generate(prompts, max_new_tokens=4, temperature=temperature, top_p=1.0)
            b = worker.generate(prompts, max_new_tokens=4, temperature=temperature, top_p=1.0)
            assert [g.token_ids for g in a] == [g.token_ids for g in b]
            for ga, gb in zip(a, b):
                assert ga.logprobs == pytest.approx(gb.logprobs, abs=1e-5)
        # pushed weights are what it samples from: zeroed weights give the same greedy token for every prompt
        changed = type(bundle.model)(bundle.model.config)
        with torch.no_grad():
            for p in changed.parameters():
                p.zero_()
        worker.push_weights(changed, 1)
        greedy = worker.generate(prompts, max_new_tokens=1, temperature=0.0, top_p=1.0)
        assert len({tuple(g.token_ids) for g in greedy}) == 1 and worker.stats()["rollout/worker_version"] == 1
    finally:
        worker.close()


def test_a_dead_worker_fails_its_trajectories_and_is_restarted(bundle, tmp_path):
    cfg = small_cfg(tmp_path / "unused", "rollout.max_staleness=1")
    worker = WorkerEngine(bundle.model, bundle.tokenizer, engine_cls=HFEngine, threads=1)
    collector = _GuardedCollector(build_collector(cfg, worker, bundle.tokenizer), worker,
                                  lambda: worker.push_weights(bundle.model, 0))
    try:
        ok = collector.collect([1, 2], 3)
        assert len(ok) > 0 and not any(t.failed for t in ok.trajectories)
        os.kill(worker.pid, signal.SIGKILL)
        with pytest.raises(WorkerDied):
            worker.generate([[5]], max_new_tokens=1, temperature=1.0, top_p=1.0)
        lost = collector.collect([1, 2], 3)  # the engine is dead: every trajectory fails, none trains
        assert len(lost) == 0 and len(lost.trajectories) == 6
        assert all(t.failed and "rollout worker died" in t.error for t in lost.trajectories)
        assert worker.restarts == 1
        again = collector.collect([1, 2], 3)  # restarted: the run goes on
        assert len(again) > 0 and not any(t.failed for t in again.trajectories)
    finally:
        collector.collector.close()
        worker.close()


def test_each_batch_is_one_version_on_the_fixed_lag_and_resume_is_exact(tmp_path, monkeypatch):
    staleness = 2  # the checkpoint at 2 owes the batches of 3 and 4 (versions 0 and 1)
    extra = (f"rollout.max_staleness={staleness}", "train.iterations=5", "train.checkpoint_every=2")
    Trainer(small_cfg(tmp_path / "full", *extra)).train()
    full = _learning(tmp_path / "full" / "metrics.jsonl")
    assert [r["rollout/policy_version"] for r in full] == [max(0, k - 1 - staleness) for k in range(1, 6)]
    assert all(r[f"rollout/staleness_{min(k - 1, staleness)}"] == 1.0 for k, r in enumerate(full, 1))

    part = Trainer(small_cfg(tmp_path / "part", *extra))
    interrupt_at(monkeypatch, part, 3)
    with pytest.raises(KeyboardInterrupt):
        part.train()
    assert [c.name for c in list_checkpoints(tmp_path / "part")] == ["iter_000002"]
    assert (list_checkpoints(tmp_path / "part")[0] / "async_batches.json").exists()  # owed batches, in the manifest
    monkeypatch.undo()
    Trainer.resume(tmp_path / "part").train()
    assert _learning(tmp_path / "part" / "metrics.jsonl") == full
    wa = torch.load(list_checkpoints(tmp_path / "full")[-1] / "optimizer.pt", weights_only=True)
    wb = torch.load(list_checkpoints(tmp_path / "part")[-1] / "optimizer.pt", weights_only=True)
    for sa, sb in zip(wa["state"].values(), wb["state"].values()):
        assert torch.equal(sa["exp_avg"], sb["exp_avg"])


def test_ppo_runs_async(tmp_path):
    last = Trainer(small_cfg(tmp_path / "ppo", "algorithm=ppo", "rollout.max_staleness=1",
                             "train.iterations=2", "train.checkpoint_every=0")).train()
    assert last["rollout/staleness"] == 1.0 and "loss/value" in last and "offpolicy/is_weight_mean" in last
