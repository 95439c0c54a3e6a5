"""End to end on CPU with the tiny model: train, checkpoints, resume equivalence, eval CLI, failure handling."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from trainer_interrupt import interrupt_at

from gigpo.cli import main as cli_main
from gigpo.train.config import load_config
from gigpo.train.reporting.metrics import read_metrics
from gigpo.train.rundir.checkpoint import list_checkpoints
from gigpo.train.trainer import Trainer
from gigpo.train.update.estimate import Advantages

SMALL = [
    "model.tiny={english_words: false, hidden_size: 32, intermediate_size: 64}",
    # constant: a decaying schedule depends on train.iterations, which the resume test changes
    "optim.lr_schedule=constant",
    "env.size=3", "env.max_steps=4",
    "rollout.groups=2", "rollout.group_size=3",
    "optim.micro_batch_size=8", "optim.mini_batches=2", "optim.ppo_epochs=2",
    "train.eval_episodes=4", "train.eval_every=2", "train.progress=false",
]


def small_cfg(tmp_path: Path, *extra: str):
    return load_config(None, SMALL + [f"train.run_dir={tmp_path}", *extra])


def _learning_metrics(path: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in read_metrics(path)]


def test_two_iterations_write_a_complete_run_dir(tmp_path):
    cfg = small_cfg(tmp_path / "run", "train.iterations=2", "train.checkpoint_every=1", "train.keep_checkpoints=1")
    last = Trainer(cfg).train()
    run = tmp_path / "run"
    assert (run / "config.yaml").exists() and (run / "curves.png").exists()
    rows = read_metrics(run / "metrics.jsonl")
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    for key in ("rollout/success_rate", "rollout/valid_action_rate", "grouping/step_group/mean_size",
                "loss/policy", "loss/clip_frac", "loss/entropy", "update/grad_norm", "time/rollout",
                "time/update", "time/tokens_per_s_rollout", "eval/success_rate"):
        assert key in rows[-1], key
    assert last["iteration"] == 2
    ckpts = list_checkpoints(run)
    assert [c.name for c in ckpts] == ["iter_000002"]  # keep_checkpoints=1
    assert (ckpts[0] / "model" / "model.safetensors").exists() and (ckpts[0] / "optimizer.pt").exists()
    assert (run / "samples" / "iter_000002.txt").read_text().startswith("=== trajectory")


def test_resume_matches_uninterrupted_run(tmp_path):
    full = small_cfg(tmp_path / "full", "train.iterations=4", "train.checkpoint_every=2")
    Trainer(full).train()
    part = small_cfg(tmp_path / "part", "train.iterations=2", "train.checkpoint_every=2")
    Trainer(part).train()
    Trainer.resume(tmp_path / "part", {"train.iterations": 4}).train()
    a = _learning_metrics(tmp_path / "full" / "metrics.jsonl")
    b = _learning_metrics(tmp_path / "part" / "metrics.jsonl")
    assert [r["iteration"] for r in b] == [0, 1, 2, 3, 4]
    assert a == b
    starts = json.loads((tmp_path / "part" / "environment.json").read_text())  # one record per start
    assert [r["start_iteration"] for r in starts] == [0, 2]
    assert starts[0]["cpu_capability"] == torch.backends.cpu.get_cpu_capability() == starts[1]["cpu_capability"]
    wa = torch.load(list_checkpoints(tmp_path / "full")[-1] / "optimizer.pt", weights_only=True)
    wb = torch.load(list_checkpoints(tmp_path / "part")[-1] / "optimizer.pt", weights_only=True)
    for sa, sb in zip(wa["state"].values(), wb["state"].values()):
        assert torch.equal(sa["exp_avg"], sb["exp_avg"])


def test_interrupt_leaves_last_checkpoint_intact(tmp_path, monkeypatch):
    cfg = small_cfg(tmp_path / "run", "train.iterations=5", "train.checkpoint_every=2")
    trainer = Trainer(cfg)
    interrupt_at(monkeypatch, trainer, 3)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    ckpts = list_checkpoints(tmp_path / "run")
    assert [c.name for c in ckpts] == ["iter_000002"]
    assert not list((tmp_path / "run" / "checkpoints").glob(".tmp-*"))
    resumed = Trainer.resume(tmp_path / "run")
    assert resumed.start_iteration == 2


def test_non_finite_loss_skips_the_update(tmp_path, monkeypatch):
    cfg = small_cfg(tmp_path / "run", "train.iterations=1", "train.eval_episodes=0")
    trainer = Trainer(cfg)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    monkeypatch.setattr("gigpo.train.trainer.row_advantages",
                        lambda cfg, batch, *a, **k: Advantages(np.full(len(batch), np.nan), None, {}))
    with pytest.warns(UserWarning, match="non-finite loss; update skipped"):
        rec = trainer.train()
    assert rec["update/skipped_steps"] > 0
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))


def test_an_iteration_without_signal_leaves_the_weights_alone(tmp_path, monkeypatch):
    """All advantages 0 (e.g. every trajectory of every group won): the policy gradient is exactly 0, and an AdamW
    step would still move the weights by its momentum from the previous iteration. It must not."""
    cfg = small_cfg(tmp_path / "run", "train.iterations=1", "train.eval_episodes=0")
    trainer = Trainer(cfg)
    trainer.iteration(1)  # a normal iteration: AdamW now holds momentum
    assert any(float(st["exp_avg"].abs().max()) > 0 for st in trainer.optimizer.state.values())
    before = [p.detach().clone() for p in trainer.model.parameters()]
    seen = {"prepare": 0}

    def zero_advantages(cfg, batch, *a, **k):
        seen["batch"] = batch
        return Advantages(np.zeros(len(batch)), None, {})

    monkeypatch.setattr("gigpo.train.trainer.row_advantages", zero_advantages)
    prepare = trainer.prepare

    def counting_prepare(batch):
        seen["prepare"] += 1
        return prepare(batch)

    monkeypatch.setattr(trainer, "prepare", counting_prepare)
    rec = trainer.iteration(2)  # the whole update is skipped: no pass could produce a gradient
    assert rec["update/no_signal_steps"] == 1.0 and rec["update/grad_norm"] == 0.0
    assert seen["prepare"] == 0  # no critic, no KL: not even the no-grad log-prob passes run
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
    # One mini-batch without signal inside an update that has some: its passes run, its AdamW step does not.
    batch = seen["batch"]
    prep = prepare(batch)
    stats = trainer._minibatch_step(batch, prep.rows, prep.old, None, torch.zeros(len(batch)))
    assert stats["update/no_signal_steps"] == 1.0 and stats["update/grad_norm"] == 0.0
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))


def test_missing_model_is_a_clear_error(tmp_path):
    cfg = small_cfg(tmp_path / "run", "model=/nonexistent/model/dir")
    with pytest.raises((FileNotFoundError, ValueError), match="/nonexistent/model/dir"):
        Trainer(cfg)


def test_cli_train_eval_and_bad_input(tmp_path, capsys):
    run = tmp_path / "run"
    assert cli_main(["train", *SMALL, "train.iterations=1", f"train.run_dir={run}"]) == 0
    out = tmp_path / "eval.json"
    assert cli_main(["eval", "--checkpoint", str(run), "--episodes", "3", "--output", str(out)]) == 0
    res = json.loads(out.read_text())
    assert len(res["trajectories"]) == 3 and "success_rate" in res["summary"]
    t = res["trajectories"][0]  # every step's observation, response, action and reward
    assert len(t["steps"]) == t["length"] and set(t["steps"][0]) == {"observation", "response", "action", "reward"}
    assert "| success_rate |" in capsys.readouterr().out
    # bad input: one clear error, exit code 2, nothing trained
    assert cli_main(["train", "env=nowhere"]) == 2
    assert cli_main(["train", "rollout.groups=zero"]) == 2
    err = capsys.readouterr().err
    assert "unknown env 'nowhere'" in err and "expected an integer" in err
    assert cli_main(["eval", "--checkpoint", str(tmp_path / "missing")]) == 2


def test_cli_train_missing_env_data_fails_before_the_model_loads(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GIGPO_WEBSHOP_DATA", raising=False)
    run = tmp_path / "run"
    argv = ["train", "--config", "webshop", "env.name=webshop-original", f"train.run_dir={run}"]
    assert cli_main(argv) == 2
    assert "setup.sh" in capsys.readouterr().err
    assert not run.exists()  # no run directory, no model: nothing to clean up


def test_grouping_quality_is_logged_under_noise(tmp_path):
    cfg = small_cfg(tmp_path / "run", "env=gridgoal-noisy", "env.size=3", "env.max_steps=3", "env.ad_rate=1.0",
                    "grouping.metric=ro", "grouping.threshold=0.5", "train.iterations=1", "train.eval_episodes=0")
    rec = Trainer(cfg).train()
    for key in ("grouping/precision", "grouping/recall", "grouping/f1"):
        assert 0.0 <= rec[key] <= 1.0
