"""Config: presets load, overrides coerce types, every wrong key or value is one clear ConfigError."""

import pytest

from gigpo.train.config import CONFIG_DIR, Config, ConfigError, config_from_dict, describe, load_config


def test_quickstart_preset_loads():
    cfg = load_config()
    assert cfg.env.name == "gridgoal"
    assert cfg.model.name == "tiny"


def test_overrides_coerce_types():
    cfg = load_config(None, ["rollout.groups=3", "optim.lr=5e-4", "train.progress=false", "algorithm=grpo",
                             "env=sokoban", "env.size=6", "model.tiny.hidden_size=32", "optim.betas=[0.8, 0.9]"])
    assert cfg.rollout.groups == 3 and isinstance(cfg.rollout.groups, int)
    assert cfg.optim.lr == 5e-4
    assert cfg.train.progress is False
    assert cfg.algorithm.name == "grpo"
    assert cfg.env.name == "sokoban" and cfg.env.options == {"size": 6}  # the preset's gridgoal options are dropped
    assert cfg.model.tiny["hidden_size"] == 32
    assert cfg.optim.betas == (0.8, 0.9)


@pytest.mark.parametrize(
    "override, fragment",
    [
        ("nosuch=1", "unknown config key 'nosuch'"),
        ("rollout.nosuch=1", "rollout keys are"),
        ("rollout.groups=many", "expected an integer"),
        ("rollout.groups=0", "rollout.groups must be >= 1"),
        ("rollout.top_p=1.5", "top_p"),
        ("env=nowhere", "unknown env 'nowhere'"),
        ("env.bogus=1", "does not accept bogus"),
        ("algorithm=nope", "algorithm.name"),
        ("grouping.metric=cosine", "grouping.metric"),
        ("grouping.threshold=0", "grouping.threshold"),
        ("train.progress=maybe", "expected true/false"),
        ("rollout", "expected key=value"),
    ],
)
def test_bad_values_are_clear_errors(override, fragment):
    with pytest.raises(ConfigError, match=fragment.replace("(", r"\(")):
        load_config(None, [override])


def test_missing_config_file():
    with pytest.raises(ConfigError, match="not found"):
        load_config("does/not/exist.yaml")


def test_round_trip_through_dict():
    cfg = load_config(None, ["rollout.groups=5", "env.size=5"])
    again = config_from_dict(cfg.to_dict())
    assert again == cfg
    assert isinstance(again, Config)


def test_describe_lists_every_section():
    text = describe()
    for key in ("env.name", "rollout.group_size", "algorithm.step_weight", "grouping.threshold", "optim.clip_high",
                "train.iterations", "lora.r", "prompt.history_length"):
        assert key in text


@pytest.mark.parametrize("preset", sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))
def test_every_preset_loads_and_validates(preset):
    cfg = load_config(preset)
    assert cfg.env.name and cfg.model.name
