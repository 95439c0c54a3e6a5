"""Algorithm presets, the algorithm table, and bad combinations → one ConfigError before anything loads."""

import numpy as np
import pytest

from gigpo.train.config import ALGORITHMS, ConfigError, load_config
from gigpo.train.config.algorithms import SPECS


def test_every_algorithm_has_a_spec_and_loads():
    assert set(SPECS) == set(ALGORITHMS)
    for name in ALGORITHMS:
        assert load_config(None, [f"algorithm={name}"]).algorithm.name == name


def test_default_quickstart_is_untouched_by_presets():
    cfg = load_config()
    assert (cfg.optim.clip_low, cfg.optim.clip_high, cfg.optim.loss_agg) == (0.2, 0.2, "token-mean")
    assert not cfg.rollout.dapo.dynamic_sampling and cfg.rollout.dapo.overlong_buffer == 0 and cfg.rollout.mode == "step"
    assert cfg.algorithm.reinforce_pp.kl_reward_coef == 0


def test_dapo_preset_and_explicit_keys_win():
    cfg = load_config(None, ["algorithm=dapo+step"])
    assert cfg.optim.clip_high == 0.28 and cfg.optim.clip_low == 0.2 and cfg.optim.loss_agg == "token-mean"
    assert cfg.rollout.dapo.dynamic_sampling and cfg.rollout.dapo.overlong_buffer == 0.2
    cfg = load_config(None, ["optim.clip_high=0.3", "algorithm=dapo", "rollout.dapo.dynamic_sampling=false"])
    assert cfg.optim.clip_high == 0.3 and not cfg.rollout.dapo.dynamic_sampling


def test_gspo_ppo_reinforce_presets():
    g = load_config(None, ["algorithm=gspo"])
    assert g.optim.clip_low == 3e-4 and g.optim.loss_agg == "seq-mean-token-mean"
    assert load_config(None, ["algorithm=ppo+step"]).algorithm.ppo.critic == "value_head"
    assert load_config(None, ["algorithm=reinforce++"]).algorithm.reinforce_pp.kl_reward_coef == 0.01


def test_old_flat_keys_load_into_their_sub_section_with_a_note():
    with pytest.warns(FutureWarning, match="algorithm.gae_lambda is deprecated: it is now algorithm.ppo.gae_lambda"):
        cfg = load_config(None, ["algorithm=ppo", "algorithm.gae_lambda=0.8", "algorithm.value_lr=0.01"])
    assert cfg.algorithm.ppo.gae_lambda == 0.8 and cfg.algorithm.ppo.value_lr == 0.01
    with pytest.warns(FutureWarning, match="algorithm.hgpo.levels"):
        cfg = load_config(None, ["algorithm=hgpo", "algorithm.hgpo_levels=3", "algorithm.hgpo_episode=false"])
    assert (cfg.algorithm.hgpo.levels, cfg.algorithm.hgpo.episode) == (3, False)
    # a run directory's config.yaml written before the rename still loads
    from gigpo.train.config import config_from_dict

    old = cfg.to_dict()
    old["algorithm"].pop("hgpo")
    old["algorithm"].update(hgpo_levels=3, hgpo_alpha=1.0, hgpo_episode=False)
    with pytest.warns(FutureWarning):
        assert config_from_dict(old) == cfg


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        (["algorithm=ppo", "algorithm.ppo.critic=none"], "needs a critic"),
        (["algorithm=ppo", "algorithm.ppo.value_coef=0"], "value_coef"),
        (["algorithm=grpo", "algorithm.ppo.critic=value_head"], "algorithm.ppo.critic is read by algorithm ppo only"),
        (["algorithm=ppo", "algorithm.ppo.gae_lambda=1.5"], "gae_lambda"),
        (["algorithm=grpo", "algorithm.reinforce_pp.kl_reward_coef=0.1"], "read by algorithm reinforce\\+\\+ only"),
        (["algorithm=hgpo", "algorithm.hgpo.levels=-1"], "algorithm.hgpo \\(hgpo\\): levels must be"),
        (["algorithm.hgpo.nosuch=1"], "algorithm.hgpo keys are: alpha, episode, levels"),
        (["algorithm=ppo", "algorithm.compat=verl-agent"], "compat=verl-agent reproduces"),
        (["algorithm=dapo", "rollout.group_size=1"], "group_size >= 2"),
        (["rollout.dapo.max_rounds=0"], "max_rounds"),
        (["rollout.dapo.overlong_buffer=1.0"], "overlong_buffer"),
        (["algorithm=gigpo", "rollout.mode=concat"], "step-level term"),
        (["algorithm=dapo+step", "rollout.mode=concat"], "step-level term"),
        (["algorithm=grpo", "rollout.mode=concat", "rollout.concat.max_tokens=10"], "too small for one turn"),
        (["rollout.mode=tree"], "rollout.mode"),
        (["rollout.concat.limit_policy=wrap"], "rollout.concat.limit_policy"),
        (["algorithm=ppo++"], "algorithm.name"),
    ],
)
def test_bad_combinations(overrides, fragment):
    with pytest.raises(ConfigError, match=fragment):
        load_config(None, overrides)


def test_concat_context_beyond_the_model_is_an_error():
    from gigpo.models import load_model
    from gigpo.train.config.algorithms import context_limit

    model = load_model("tiny").model
    cfg = load_config(None, ["algorithm=grpo", "rollout.mode=concat"])
    assert context_limit(cfg, model) == model.config.max_position_embeddings
    # the tiny model's context is known before it loads: the config is refused when it is read (issue 39)
    with pytest.raises(ConfigError, match=r"above the context length of model tiny \(1024 tokens\)"):
        load_config(None, ["algorithm=grpo", "rollout.mode=concat", "rollout.concat.max_tokens=100000"])
    cfg.rollout.concat.max_tokens = 100000  # a model whose context is known only once loaded: checked then
    with pytest.raises(ConfigError, match="exceeds"):
        context_limit(cfg, model)


def test_the_table_names_callable_functions():
    import inspect

    for name, spec in SPECS.items():
        adv = inspect.signature(spec.est.fn).parameters
        assert list(adv)[:3] == ["batch", "common", "options"], name
        loss = inspect.signature(spec.loss_fn).parameters
        assert {"logp", "old_logp", "advantages", "mask", "clip_low", "clip_high", "agg"} <= set(loss), name
        assert spec.description, name
    assert SPECS["gspo"].loss_fn.__name__ == "gspo_loss" and SPECS["ppo"].critic and SPECS["reinforce++"].kl_reward


def test_adding_an_algorithm_is_one_entry(monkeypatch):
    """A table entry naming a registered estimator is accepted by validation, listed in --help, gets its preset,
    and row_advantages calls its estimator."""
    from gigpo.algo import registry
    from gigpo.algo.registry import Estimate, register_estimator
    from gigpo.rollout.batch import RolloutBatch
    from gigpo.train.config import describe
    from gigpo.train.config.algorithms import AlgoSpec
    from gigpo.train.update.estimate import row_advantages
    from gigpo.train.update.grouping import grouping_spec

    calls = []
    monkeypatch.setattr(registry, "_ESTIMATORS", dict(registry._ESTIMATORS))

    @register_estimator("const-test", description="constant advantages (test only)")
    def constant(batch, common, options):
        calls.append(len(batch))
        return Estimate(np.full(len(batch), 0.5))

    monkeypatch.setitem(SPECS, "const", AlgoSpec("constant advantages (test only)", estimator="const-test",
                                                 preset="dapo"))
    cfg = load_config(None, ["algorithm=const"])
    assert cfg.optim.clip_high == 0.28  # the entry's preset applied
    assert "const" in describe() and "constant advantages (test only)" in describe()
    batch = RolloutBatch(group_id=[0, 0], traj_id=[0, 1], step=[0, 0], reward=[1.0, 0.0], done=[True, True],
                         action_valid=[True, True], observation=["a", "a"], state_key=[0, 0])
    adv, targets, stats = row_advantages(cfg, batch, grouping_spec(cfg))
    assert calls == [2] and adv.tolist() == [0.5, 0.5] and targets is None and stats["adv/mean"] == 0.5


def test_a_missing_preset_file_is_an_error_not_silence(monkeypatch, tmp_path):
    """A packaging mistake must not silently run dapo without clip-higher."""
    monkeypatch.setattr("gigpo.train.config.algorithms.ALGO_PRESET_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="preset .*dapo.yaml is missing"):
        load_config(None, ["algorithm=dapo"])
    assert load_config(None, ["algorithm=grpo"]).algorithm.name == "grpo"  # no preset: nothing to miss


@pytest.mark.parametrize("module", ["gigpo.train.config.algorithms", "gigpo.train.config"])
def test_config_layers_import_no_torch_and_no_cycle(module):
    import subprocess
    import sys
    from pathlib import Path

    # neither the algorithm table nor the config pulls in torch, model code, the estimator or the trainer
    code = (f"import sys, {module}; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith(('gigpo.models', "
            "'gigpo.train.update.estimate', 'gigpo.train.trainer'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    # the table sits below the rest of the config (it may use only the shared ConfigError type and where presets live): the config
    # imports it, never the other way round (read off the file: importing any config module runs the package's
    # front door, config/__init__.py, first)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from test_layers import PKG, import_edges

    table = PKG / "train" / "config" / "algorithms.py"
    config_files = {t.name for t in import_edges()[table] if t.parent == PKG / "train" / "config"}
    assert config_files <= {"error.py", "presets.py"}, config_files  # two leaves: the error type, the preset folder
