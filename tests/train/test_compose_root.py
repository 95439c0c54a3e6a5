"""One composition root (issue 40): compose.build_run builds every object of a run; the Trainer receives them and
builds none; the loop's phases hand typed data on; collect_shards' shard metrics combine as before."""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

from gigpo.train import compose
from gigpo.train.collect.dynamic_sampling import CollectedBatch, shard_metrics
from gigpo.train.config import load_config
from gigpo.train.trainer import Trainer
from gigpo.train.update.estimate import Advantages
from gigpo.train.update.passes import PassResults

SMALL = ["model.tiny={english_words: false, hidden_size: 32, intermediate_size: 64}", "env.size=3", "env.max_steps=4",
         "rollout.groups=2", "rollout.group_size=3", "optim.micro_batch_size=8", "optim.mini_batches=2",
         "train.eval_episodes=2", "train.eval_every=1", "train.progress=false", "train.iterations=2",
         "train.threads=1"]

BUILDERS = ("build_run", "build_model", "build_reference", "build_value_head", "build_optimizer", "build_engine",
            "build_collector", "build_prompt_builder", "build_async_rollout", "env_factory")


@pytest.mark.parametrize("algo", ["gigpo", "ppo"])
def test_the_trainer_receives_every_part_and_builds_none(tmp_path, monkeypatch, algo):
    parts = compose.build_run(load_config(None, [*SMALL, f"algorithm={algo}", f"train.run_dir={tmp_path / 'run'}"]))
    assert (parts.value_head is not None) == (algo == "ppo")  # the critic's head, built by the root

    def refuse(*a, **k):
        raise AssertionError("the trainer built a part it was given")

    for name in BUILDERS:
        monkeypatch.setattr(compose, name, refuse)
    monkeypatch.setattr("gigpo.train.trainer.build_run", refuse)
    trainer = Trainer(parts)
    assert all(getattr(trainer, f.name) is getattr(parts, f.name) for f in fields(parts))
    seen = {}
    real_rollout, real_prepare = trainer.rollout, trainer.prepare

    def rollout(it):
        seen["rollout"] = real_rollout(it)
        return seen["rollout"]

    def prepare(batch):
        seen["prepare"] = real_prepare(batch)
        return seen["prepare"]

    monkeypatch.setattr(trainer, "rollout", rollout)
    monkeypatch.setattr(trainer, "prepare", prepare)
    last = trainer.train()  # two iterations and their evaluations, on the given parts alone
    assert last["iteration"] == 2 and "eval/success_rate" in last
    assert isinstance(seen["rollout"], CollectedBatch) and len(seen["rollout"].row_shard) == len(seen["rollout"].batch)
    if algo == "ppo":  # a critic: the no-grad passes run before the advantages, typed
        assert isinstance(seen["prepare"], PassResults) and seen["prepare"].values is not None
    assert (tmp_path / "run" / "checkpoints").is_dir()


def test_row_advantages_is_typed_and_unpacks(tmp_path):
    from gigpo.rollout.batch import RolloutBatch
    from gigpo.train.update.estimate import row_advantages
    from gigpo.train.update.grouping import grouping_spec

    cfg = load_config(None, [*SMALL, f"train.run_dir={tmp_path}"])
    out = row_advantages(cfg, RolloutBatch(), grouping_spec(cfg))
    assert isinstance(out, Advantages) and out.advantages.shape == (0,) and out.value_targets is None
    adv, targets, stats = out
    assert stats == {} and targets is None


def test_grouping_spec_is_built_from_the_config_once_checked():
    from gigpo.algo import GroupingSpec
    from gigpo.train.config import ConfigError
    from gigpo.train.update.grouping import grouping_spec

    assert grouping_spec(load_config(None, ["grouping.metric=exact"])) is None
    assert grouping_spec(load_config(None, ["grouping.metric=observation"])) is None
    spec = grouping_spec(load_config(None, ["grouping.metric=indel", "grouping.threshold=0.7"]))
    assert spec == GroupingSpec("indel", 0.7)
    with pytest.raises(ConfigError, match=r"grouping.threshold: similarity threshold must be in \(0, 1\]"):
        load_config(None, ["grouping.metric=ro", "grouping.threshold=1.5"])


def test_shard_metrics_combine_shards_as_one_batch():
    """rounds: the most any shard needed; filled: every shard filled; counts summed; the overlong penalty per round
    with dynamic sampling (summed over rounds, / rounds run), else summed over shards."""
    a = {"overlong_penalty": -0.2, "rounds": 2.0, "kept_groups": 3.0, "dropped_groups": 1.0, "surplus_groups": 0.0,
         "filled": 1.0, "_rounds": 2.0}
    b = {"overlong_penalty": -0.1, "rounds": 1.0, "kept_groups": 2.0, "dropped_groups": 0.0, "surplus_groups": 1.0,
         "filled": 0.0, "_rounds": 1.0}
    got = shard_metrics([a, b])
    assert got == {"overlong_penalty": pytest.approx(-0.1), "rounds": 2.0, "kept_groups": 5.0, "dropped_groups": 1.0,
                   "surplus_groups": 1.0, "filled": 0.0}
    assert shard_metrics([{"overlong_penalty": -0.2}, {"overlong_penalty": -0.1}]) == {
        "overlong_penalty": pytest.approx(-0.3)}
    assert shard_metrics([{}]) == {}
    assert np.isfinite(list(got.values())).all()
