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


def _preset_params() -> list:
    """Every preset, marked with the optional peer its env's adapter needs (so it skips naming it without)."""
    import yaml

    from gigpo.envs.registry import list_prefixes

    prefixes = list_prefixes()
    params = []
    for path in sorted(CONFIG_DIR.glob("*.yaml")):
        env = str((yaml.safe_load(path.read_text()) or {}).get("env", {}).get("name", ""))
        spec = prefixes.get(env.partition(":")[0]) if ":" in env else None
        marks = [pytest.mark.peers(spec.package)] if spec is not None and spec.prefix != "gym" else []
        params.append(pytest.param(path.stem, marks=marks))
    return params


@pytest.mark.parametrize("preset", _preset_params())
def test_every_preset_loads_and_validates(preset):
    cfg = load_config(preset)
    assert cfg.env.name and cfg.model.name


def test_help_shows_whole_multi_line_comments():
    text = " ".join(describe().split())  # wrapping may break lines anywhere
    # prompt.instructions is documented by three `#:` lines above it
    assert ("include the env's rules as the system message (a random-init model cannot read them; dropping the "
            "constant text makes its steps several times cheaper)") in text.replace(" # ", " ")
    assert "train.threads = 0" in text and "Tiny models on small CPUs run faster on 1 thread" in text


def test_field_comments_join_every_line():
    from gigpo.train.config import PromptConfig, TrainConfig, field_comments

    prompt = field_comments(PromptConfig)
    assert prompt["instructions"].startswith("include the env's rules") and prompt["instructions"].endswith(
        "several times cheaper)")
    assert prompt["history_length"] == "last-k (observation, action) pairs shown in the prompt (>= 0)"
    assert field_comments(TrainConfig)["threads"].startswith("torch CPU threads (>= 0; 0 = torch's default).")


def test_describe_lists_the_algorithm_table():
    from gigpo.train.config.algorithms import SPECS

    text = describe()
    for name, spec in SPECS.items():
        assert f"  {name} " in text and spec.description in text


def test_model_tiny_follows_the_model():
    cfg = load_config(None, ["model=smollm2-135m"])
    assert cfg.model.name == "smollm2-135m" and cfg.model.tiny == {}  # the quickstart's tiny options dropped
    assert load_config().model.tiny == {"english_words": False}
    cfg = load_config(None, ["model.tiny.hidden_size=32"])
    assert cfg.model.tiny == {"english_words": False, "hidden_size": 32}
    with pytest.raises(ConfigError, match="model.tiny"):
        load_config(None, ["model=smollm2-135m", "model.tiny.hidden_size=32"])


def test_yaml_values_are_copied_not_shared(tmp_path):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text("model:\n  name: tiny\n  tiny: {hidden_size: 32}\n")
    a = load_config(str(cfg_file), ["model.tiny.num_hidden_layers=1"])
    b = load_config(str(cfg_file))
    assert a.model.tiny == {"hidden_size": 32, "num_hidden_layers": 1} and b.model.tiny == {"hidden_size": 32}


def test_every_key_has_a_description_and_allowed_values_in_help():
    """Descriptions are data on the schema: a key added without one fails here."""
    import typing

    from gigpo.train.config.help import allowed_values, iter_keys
    from gigpo.train.config.schema import SECTIONS

    hints = typing.get_type_hints(Config)
    keys = [k for s in SECTIONS for k in iter_keys(hints[s], s)]
    assert len(keys) > 90
    bare = [key for key, _, _, doc in keys if len(doc.strip()) < 8]
    assert not bare, f"keys without a description: {bare}"
    text = describe()
    for key, tp, _, _ in keys:
        assert f"  {key} = " in text and f"[{allowed_values(tp)}]" in text
    assert "[mean_std | mean]" in text and "[exact | state_key | observation | ro | indel | minhash]" in text


def test_unknown_top_level_key_in_a_file_is_an_error(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("base: quickstart\nrollout:\n  groups: 2\n")
    with pytest.raises(ConfigError, match="unknown config key 'base'"):
        load_config(str(f))
