"""Every algorithm variant trains end to end (2 iterations, tiny model, tiny batch) and logs what it should."""

import json
import math

import pytest

from gigpo.train.config import ALGORITHMS, load_config

SMALL = ["rollout.groups=2", "rollout.group_size=2", "env.max_steps=3", "train.iterations=2", "train.eval_every=0",
         "train.eval_episodes=2", "train.progress=false", "train.sample_trajectories=1", "optim.ppo_epochs=1",
         "optim.mini_batches=1", "rollout.dapo.max_rounds=2"]
VARIANTS = [[f"algorithm={a}"] for a in ALGORITHMS] + [
    ["algorithm=grpo", "rollout.mode=concat"],
    ["algorithm=ppo", "rollout.mode=concat", "rollout.concat.limit_policy=truncate"],
]


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(x.split("=")[1] for x in v))
def test_variant_trains(variant, tmp_path):
    from gigpo.train.trainer import Trainer

    cfg = load_config(None, [*variant, *SMALL])
    Trainer(cfg, tmp_path).train()
    recs = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    last = recs[-1]
    assert last["iteration"] == 2 and "eval/success_rate" in last
    assert all(math.isfinite(v) for v in last.values() if isinstance(v, float))
    name = cfg.algorithm.name
    if cfg.rollout.dapo.dynamic_sampling:
        assert 1 <= last["rollout/rounds"] <= 2
    if name.startswith("ppo"):
        assert "loss/value" in last and (tmp_path / "checkpoints" / "iter_000002" / "value_head.safetensors").exists()
    if name == "reinforce++":
        assert "reinforce++/kl_mean" in last
    if cfg.rollout.mode == "concat":
        assert last["rollout/concat_rows"] >= 4
