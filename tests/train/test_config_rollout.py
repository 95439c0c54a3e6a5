"""The rollout section split by concern (issue 30): old flat keys land in their sub-section with one FutureWarning,
an older run's config.yaml still resumes, and docs/configuration.md lists the whole mapping."""

from __future__ import annotations

import json
import re
import typing
import warnings
from pathlib import Path
from typing import Literal, get_args, get_origin

import pytest
import yaml

from gigpo.train.config import Config, ConfigError, apply_overrides, load_config
from gigpo.train.config.help import describe
from gigpo.train.config.load import RENAMED_KEYS

ROOT = Path(__file__).resolve().parents[2]
ROLLOUT_RENAMES = {old: new for old, new in RENAMED_KEYS.items() if old.startswith("rollout.")}


def _type_at(dotted: str) -> tuple[object, type]:
    """(default value, annotated type) of a dotted key of a default Config."""
    obj, *path, leaf = dotted.split(".")
    node = getattr(Config(), obj)
    for part in path:
        node = getattr(node, part)
    return getattr(node, leaf), typing.get_type_hints(type(node))[leaf]


def _other_value(default: object, tp: type) -> object:
    """A value of type ``tp`` that is not ``default``."""
    if get_origin(tp) is Literal:
        return next(c for c in get_args(tp) if c != default)
    if tp is bool:
        return not default
    if tp is int:
        return int(default) + 3
    if tp is float:
        return float(default) + 0.25
    return f"x-{default}"


@pytest.mark.parametrize("old, new", sorted(ROLLOUT_RENAMES.items()))
def test_an_old_flat_key_sets_its_new_key_with_one_note(old, new):
    default, tp = _type_at(new)
    value = _other_value(default, tp)
    with pytest.warns(FutureWarning, match=rf"^config key {re.escape(old)} is deprecated: it is now "
                                           rf"{re.escape(new)}$") as notes:
        cfg = apply_overrides(Config(), {old: str(value).lower() if tp is bool else str(value)})
    assert len(notes) == 1
    assert _value_at(cfg, new) == value
    # the same key in a YAML mapping (a config file, an old run's config.yaml)
    section, name = old.split(".")
    with pytest.warns(FutureWarning):
        cfg = apply_overrides(Config(), {section: {name: value}})
    assert _value_at(cfg, new) == value


def _value_at(cfg: Config, dotted: str) -> object:
    node = cfg
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def test_the_new_keys_load_without_a_note_and_sub_sections_are_not_keys():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = load_config(None, ["rollout.engine=hf", "rollout.dapo.max_rounds=6", "rollout.ray.num_actors=0",
                                 "algorithm=grpo", "rollout.mode=concat", "rollout.concat.limit_policy=truncate"])
    assert (cfg.rollout.dapo.max_rounds, cfg.rollout.concat.limit_policy) == (6, "truncate")
    # a choice's options while another is chosen would be ignored: one line naming them
    with pytest.raises(ConfigError, match=r"^rollout.vllm.enforce_eager is set but rollout.engine='hf': "
                                          r"rollout.vllm holds the options of rollout.engine=vllm$"):
        load_config(None, ["rollout.vllm.enforce_eager=true"])
    with pytest.raises(ConfigError, match=r"^rollout.openai.model, rollout.openai.timeout_s are set but "
                                          r"rollout.engine='hf'"):
        load_config(None, ["rollout.openai.timeout_s=9", "rollout.openai.model=m"])
    with pytest.raises(ConfigError, match="rollout.concat.max_tokens is set but rollout.mode='step'"):
        load_config(None, ["rollout.concat.max_tokens=512"])
    with pytest.raises(ConfigError, match="'rollout.openai' is a sub-section; set one of its keys"):
        load_config(None, ["rollout.openai=http://x"])
    with pytest.raises(ConfigError, match="rollout.openai keys are: api_key, max_retries, model, timeout_s, urls"):
        load_config(None, ["rollout.openai.url=http://x"])
    with pytest.raises(ConfigError, match="rollout.openai.urls is set but rollout.engine='hf'"):
        load_config(None, ["rollout.openai.urls=http://127.0.0.1:1/v1"])
    help_text = describe()
    for key in ("rollout.openai.urls", "rollout.concat.max_tokens", "rollout.ray.num_actors",
                "rollout.dapo.dynamic_sampling", "rollout.vllm.enforce_eager"):
        assert f"  {key} = " in help_text


def test_docs_list_every_renamed_key():
    text = (ROOT / "docs/configuration.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([\w.]+)` \| `([\w.]+)` \|$", text, flags=re.M))
    assert rows == set(RENAMED_KEYS.items())


def _to_old_layout(data: dict) -> dict:
    """A config.yaml as gigpo wrote it before the rollout split: every renamed rollout key flat again."""
    rollout = data["rollout"]
    for old, new in ROLLOUT_RENAMES.items():
        _, sub, leaf = new.split(".")
        rollout[old.split(".")[1]] = rollout[sub].pop(leaf)
    for sub in ("concat", "dapo", "openai", "vllm", "ray"):
        assert rollout.pop(sub) == {}
    return data


def test_a_run_written_before_the_split_resumes(tmp_path):
    from gigpo.cli import main

    run = tmp_path / "run"
    common = ["train.progress=false", "train.eval_episodes=0", "rollout.groups=2"]
    assert main(["train", "train.iterations=1", f"train.run_dir={run}", *common]) == 0
    cfg_file = run / "config.yaml"
    old = _to_old_layout(yaml.safe_load(cfg_file.read_text()))
    assert "engine_urls" in old["rollout"] and "dynamic_sampling" in old["rollout"]
    cfg_file.write_text(yaml.safe_dump(old, sort_keys=False))
    with pytest.warns(FutureWarning, match=rf"written by an older gigpo: {len(ROLLOUT_RENAMES)} keys were "
                                           r"renamed .*rollout.max_context_tokens -> rollout.concat.max_tokens") as notes:
        assert main(["train", "--resume", str(run), "train.iterations=2"]) == 0
    assert len([n for n in notes if issubclass(n.category, FutureWarning)]) == 1  # one note, not one per key
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2]
    assert "openai" in yaml.safe_load(cfg_file.read_text())["rollout"]  # rewritten in the new layout


def test_the_cli_prints_a_deprecation_as_one_line(tmp_path):
    import subprocess
    import sys

    old = tmp_path / "old.yaml"
    old.write_text("rollout:\n  max_rounds: 7\n  groups: 2\n")
    done = subprocess.run([sys.executable, "-m", "gigpo", "train", "--config", str(old), "--print-config"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["gigpo: FutureWarning: config key rollout.max_rounds is deprecated: "
                                        "it is now rollout.dapo.max_rounds"]
    assert yaml.safe_load(done.stdout)["rollout"]["dapo"]["max_rounds"] == 7
