"""The trainer under rollout.decoding=constrained: every action valid, the learner's recomputed log-probs equal
the sampler's (the same masks; a gap would mean the PPO ratio compares different distributions), and the
config errors of constrained decoding."""

import pytest
import torch

from gigpo.train.config import ConfigError, load_config
from gigpo.train.trainer import Trainer

SMALL = ["model.tiny={english_words: false, hidden_size: 32, intermediate_size: 64}", "env.size=3", "env.max_steps=4", "rollout.groups=2",
         "rollout.group_size=3", "optim.micro_batch_size=4", "train.iterations=1", "train.eval_episodes=2",
         "train.progress=false", "train.threads=1", "rollout.decoding=constrained", "optim.mini_batches=1",
         "optim.ppo_epochs=1"]


@pytest.mark.parametrize("fmt", ["plain", "think-action"])
def test_constrained_iteration_has_no_sampler_gap(tmp_path, fmt):
    cfg = load_config(None, [*SMALL, f"train.run_dir={tmp_path / fmt}", f"prompt.format={fmt}",
                             "rollout.max_response_tokens=6"])
    with torch.random.fork_rng(devices=[]):
        rec = Trainer(cfg).train()
    if fmt == "plain":  # the random tiny model never opens <action> by itself: think-action is just free text
        assert rec["rollout/valid_action_rate"] == 1.0
        assert rec["eval/valid_action_rate"] == 1.0
    assert rec["update/sampler_logprob_gap"] < 1e-5
    assert abs(rec["loss/approx_kl"]) < 1e-5 and rec["loss/clip_frac"] == 0.0  # first mini-batch: ratio 1


def test_constrained_on_a_vllm_engine_needs_xgrammar():
    """Over vLLM the allowed sets are rebuilt with xgrammar (gigpo.rollout.engines.vllm_choice; tests/vllm/ runs it)."""
    import importlib.util

    over = ["rollout.decoding=constrained", "rollout.engine=openai", "rollout.openai.urls=http://127.0.0.1:9/v1"]
    if importlib.util.find_spec("xgrammar") is None:
        with pytest.raises(ConfigError, match="rollout.engine=openai rebuilds vLLM's allowed token sets with xgrammar"):
            load_config(None, over)
    else:
        assert load_config(None, over).rollout.decoding == "constrained"
