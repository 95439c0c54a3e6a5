"""Algorithm presets, the algorithm table, and bad combinations → one ConfigError before anything loads."""

import pytest

from gigpo.train.algorithms import SPECS
from gigpo.train.config import ALGORITHMS, ConfigError, load_config


def test_every_algorithm_has_a_spec_and_loads():
    assert set(SPECS) == set(ALGORITHMS)
    for name in ALGORITHMS:
        assert load_config(None, [f"algorithm={name}"]).algorithm.name == name


def test_default_quickstart_is_untouched_by_presets():
    cfg = load_config()
    assert (cfg.optim.clip_low, cfg.optim.clip_high, cfg.optim.loss_agg) == (0.2, 0.2, "token-mean")
    assert not cfg.rollout.dynamic_sampling and cfg.rollout.overlong_buffer == 0 and cfg.rollout.mode == "step"
    assert cfg.algorithm.kl_reward_coef == 0


def test_dapo_preset_and_explicit_keys_win():
    cfg = load_config(None, ["algorithm=dapo+step"])
    assert cfg.optim.clip_high == 0.28 and cfg.optim.clip_low == 0.2 and cfg.optim.loss_agg == "token-mean"
    assert cfg.rollout.dynamic_sampling and cfg.rollout.overlong_buffer == 0.2
    cfg = load_config(None, ["optim.clip_high=0.3", "algorithm=dapo", "rollout.dynamic_sampling=false"])
    assert cfg.optim.clip_high == 0.3 and not cfg.rollout.dynamic_sampling


def test_gspo_ppo_reinforce_presets():
    g = load_config(None, ["algorithm=gspo"])
    assert g.optim.clip_low == 3e-4 and g.optim.loss_agg == "seq-mean-token-mean"
    assert load_config(None, ["algorithm=ppo+step"]).algorithm.critic == "value_head"
    assert load_config(None, ["algorithm=reinforce++"]).algorithm.kl_reward_coef == 0.01


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (["algorithm=ppo", "algorithm.critic=none"], "needs a critic"),
        (["algorithm=ppo", "algorithm.value_coef=0"], "value_coef"),
        (["algorithm=grpo", "algorithm.critic=value_head"], "only used by ppo"),
        (["algorithm=ppo", "algorithm.gae_lambda=1.5"], "gae_lambda"),
        (["algorithm=grpo", "algorithm.kl_reward_coef=0.1"], "reinforce\\+\\+ only"),
        (["algorithm=dapo", "rollout.group_size=1"], "group_size >= 2"),
        (["rollout.max_rounds=0"], "max_rounds"),
        (["rollout.overlong_buffer=1.0"], "overlong_buffer"),
        (["algorithm=gigpo", "rollout.mode=concat"], "step-level term"),
        (["algorithm=dapo+step", "rollout.mode=concat"], "step-level term"),
        (["algorithm=grpo", "rollout.mode=concat", "rollout.max_context_tokens=10"], "too small for one turn"),
        (["rollout.mode=tree"], "rollout.mode"),
        (["rollout.context_limit_policy=wrap"], "context_limit_policy"),
        (["algorithm=ppo++"], "algorithm.name"),
    ],
)
def test_bad_combinations(overrides, fragment):
    with pytest.raises(ConfigError, match=fragment):
        load_config(None, overrides)


def test_concat_context_beyond_the_model_is_an_error():
    from gigpo.models import load_model
    from gigpo.train.algorithms import context_limit

    model = load_model("tiny").model
    cfg = load_config(None, ["algorithm=grpo", "rollout.mode=concat"])
    assert context_limit(cfg, model) == model.config.max_position_embeddings
    cfg = load_config(None, ["algorithm=grpo", "rollout.mode=concat", "rollout.max_context_tokens=100000"])
    with pytest.raises(ConfigError, match="exceeds"):
        context_limit(cfg, model)
