"""Building a :class:`Config`: defaults ← algorithm preset ← YAML file ← ``key=value`` overrides, each value
coerced to its key's annotated type. Every mistake is a one-line :class:`ConfigError` naming the key or file."""

from __future__ import annotations

import dataclasses
import keyword
import typing
import warnings
from pathlib import Path
from typing import Any, get_origin

import yaml

from gigpo.train.config.algorithms import algorithm_names, preset_overrides
from gigpo.train.config.check import validate
from gigpo.train.config.coercion import coerce, parse_scalar, yaml_problem
from gigpo.train.config.error import ConfigError
from gigpo.train.config.presets import CONFIG_DIR
from gigpo.train.config.schema import SECTIONS, Config


def _section_types() -> dict[str, type]:
    hints = typing.get_type_hints(Config)
    return {name: hints[name] for name in SECTIONS}


def apply_overrides(cfg: Config, flat: dict[str, Any]) -> Config:
    """Apply ``{"section.key": value}`` (or ``{"section": name}`` shorthand) to ``cfg`` in place, validating."""
    types_ = _section_types()
    for key, value in flat.items():
        key = renamed_key(key)
        section, _, sub = key.partition(".")
        if section not in types_:
            raise ConfigError(f"unknown config key {key!r}; sections are: {', '.join(SECTIONS)}")
        obj = getattr(cfg, section)
        if not sub:
            # `env=sokoban`, `model=tiny`, `algorithm=grpo`: shorthand for the section's name.
            if isinstance(value, dict):
                apply_overrides(cfg, {f"{section}.{k}": v for k, v in value.items()})
                continue
            if not hasattr(obj, "name"):
                raise ConfigError(f"{key!r} is a section; set one of its keys, e.g. {section}.<key>=...")
            sub = "name"
        field_types = typing.get_type_hints(type(obj))
        if keyword.iskeyword(sub):  # `rollout.async`: a key that is a Python keyword is stored as field `async_`
            sub += "_"
        if sub.split(".")[0] not in field_types:
            if section == "env":  # env constructor options, checked against the env's signature later
                value = parse_scalar(value) if isinstance(value, str) else value
                head, dot, rest = sub.partition(".")
                if dot and rest:  # env.make_kwargs.is_slippery=false: a key of a mapping-valued option
                    inner = obj.options.get(head)
                    obj.options[head] = {**(inner if isinstance(inner, dict) else {}), rest: value}
                else:
                    obj.options[sub] = value
                continue
            raise ConfigError(
                f"unknown config key {key!r}; {section} keys are: {', '.join(sorted(field_types))}"
            )
        head, _, rest = sub.partition(".")
        tp = field_types[head]
        if dataclasses.is_dataclass(tp):  # an estimator's sub-section, e.g. algorithm.ppo.gae_lambda=0.9
            _set_in_subsection(cfg, key, obj, head, rest, value)
            continue
        if head == "name" and section in ("env", "model") and value != obj.name:
            # another env / model: the options set so far (e.g. by a preset) belong to the previous one
            (obj.options if section == "env" else obj.tiny).clear()
        if rest:  # dict-valued field, e.g. model.tiny.hidden_size=64
            if not (tp is dict or get_origin(tp) is dict):
                raise ConfigError(f"unknown config key {key!r}: {section}.{head} has no sub-keys")
            getattr(obj, head)[rest] = parse_scalar(value) if isinstance(value, str) else value
            continue
        setattr(obj, head, coerce(value, tp, key))
    return cfg


#: Old flat keys -> their sub-section (docs/configuration.md "Renamed keys"); old configs and run directories
#: keep loading, with a one-line deprecation note per key.
RENAMED_KEYS = {
    **{f"algorithm.{k}": f"algorithm.ppo.{k}" for k in ("critic", "gae_lambda", "value_coef", "value_clip",
                                                       "value_lr")},
    "algorithm.kl_reward_coef": "algorithm.reinforce_pp.kl_reward_coef",
    "algorithm.hgpo_levels": "algorithm.hgpo.levels",
    "algorithm.hgpo_alpha": "algorithm.hgpo.alpha",
    "algorithm.hgpo_episode": "algorithm.hgpo.episode",
    # the rollout section split by concern (gigpo.train.config.schema_rollout)
    "rollout.max_context_tokens": "rollout.concat.max_tokens",
    "rollout.context_limit_policy": "rollout.concat.limit_policy",
    **{f"rollout.{k}": f"rollout.dapo.{k}" for k in ("dynamic_sampling", "max_rounds", "overlong_buffer",
                                                   "overlong_penalty")},
    **{f"rollout.engine_{k}": f"rollout.openai.{k}" for k in ("urls", "model", "timeout_s", "max_retries",
                                                             "api_key")},
    "rollout.weights_dir": "rollout.openai.weights_dir",
    "rollout.weight_sync": "rollout.openai.weight_sync",
    "rollout.vllm_enforce_eager": "rollout.vllm.enforce_eager",
    "rollout.num_env_workers": "rollout.ray.num_actors",
    "rollout.ray_address": "rollout.ray.address",
}


def renamed_key(key: str) -> str:
    """``key``, or its new name (with a FutureWarning) when it is one of :data:`RENAMED_KEYS`."""
    new = RENAMED_KEYS.get(key)
    if new is None:
        return key
    warnings.warn(f"config key {key} is deprecated: it is now {new}", FutureWarning, stacklevel=2)
    return new


def rename_keys(flat: dict[str, Any], where: str) -> dict[str, Any]:
    """``flat`` with old key names replaced by their new ones (:func:`renamed_key`). One key given twice in one
    source, under its old and its new name (``rollout.engine_urls`` and ``rollout.openai.urls``, also inside a
    sub-section mapping ``rollout.openai: {urls: ...}``), is a ConfigError: which one was meant cannot be told,
    and the later would silently win."""
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}  # a leaf key -> how this source spelled it
    for k, v in flat.items():
        new = renamed_key(k) if k in RENAMED_KEYS else k
        leaves = {f"{new}.{sub}": f"{k}.{sub}" for sub in v} if isinstance(v, dict) else {new: k}
        for leaf, spelling in leaves.items():
            other = spelled.setdefault(leaf, spelling)
            if other != spelling:
                old_name = other if other in RENAMED_KEYS else spelling
                raise ConfigError(f"{other} and {spelling} are both set {where}, but they are one key ({old_name} "
                                  f"is the old name of {leaf}): set {leaf} only")
        out[new] = v
    return out


def _set_in_subsection(cfg: Config, key: str, parent: Any, head: str, rest: str, value: Any) -> None:
    """Set ``rest`` (a key, or empty with a mapping of keys) of sub-section ``parent.<head>``, named ``key``. The
    sub-section is replaced by an updated copy, so a frozen options dataclass (a user's estimator) works too."""
    obj = getattr(parent, head)
    if not rest:
        if not isinstance(value, dict):
            raise ConfigError(f"{key!r} is a sub-section; set one of its keys, e.g. {key}.<key>=...")
        apply_overrides(cfg, {f"{key}.{k}": v for k, v in value.items()})
        return
    types_ = typing.get_type_hints(type(obj))
    if rest not in types_:
        prefix = key[: -len(rest) - 1]
        raise ConfigError(f"unknown config key {key!r}; {prefix} keys are: {', '.join(sorted(types_))}")
    setattr(parent, head, dataclasses.replace(obj, **{rest: coerce(value, types_[rest], key)}))


def _flatten(data: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and (not prefix and k in SECTIONS):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def parse_cli_overrides(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"expected key=value, got {item!r}")
        out[key.strip()] = value
    return out


def resolve_config_path(path: str) -> Path:
    """A config file path, or the name of a preset in ``configs/`` (``quickstart`` → configs/quickstart.yaml)."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"config {path!r} is a directory; give a YAML file or a preset name")
    if p.exists():
        return p
    for candidate in (CONFIG_DIR / path, CONFIG_DIR / f"{path}.yaml"):
        if candidate.is_file():
            return candidate
    presets = sorted(q.stem for q in CONFIG_DIR.glob("*.yaml")) if CONFIG_DIR.exists() else []
    raise ConfigError(f"config file {path!r} not found (presets: {', '.join(presets) or 'none'})")


def read_config_file(file: Path) -> dict:
    """The top-level mapping of a YAML config file, every failure to read or parse it a ConfigError."""
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"config file {str(file)!r} is not UTF-8 text (byte {err.object[err.start]:#04x} at "
                          f"offset {err.start})") from None
    except OSError as err:
        raise ConfigError(f"config file {str(file)!r} cannot be read: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {str(file)!r} is not valid YAML: {yaml_problem(err)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(file)!r}: expected a mapping at the top level, got "
                          f"{type(data).__name__}")
    return data


def load_config(path: str | None = None, overrides: list[str] | dict | None = None) -> Config:
    """Defaults ← algorithm preset ← YAML file (``path``; default: the quickstart preset) ← overrides; then
    :func:`validate`."""
    cfg = Config()
    data = read_config_file(resolve_config_path(path or "quickstart"))
    # renamed once here, so each old key is one note although the file is applied twice (probe, then for real)
    file_flat = rename_keys(_flatten(data), f"in {path or 'quickstart'}")
    cli_flat = (parse_cli_overrides(overrides) if isinstance(overrides, list) else dict(overrides)) if overrides else {}
    cli_flat = rename_keys(cli_flat, "among the overrides")
    # First pass: which algorithm? Its preset (configs/algos/) then sits below the file and the CLI.
    probe = apply_overrides(Config(), file_flat)
    apply_overrides(probe, cli_flat)
    if probe.algorithm.name in algorithm_names():  # an unknown name is reported by validate, with the list of names
        apply_overrides(cfg, preset_overrides(probe.algorithm.name))
    apply_overrides(cfg, file_flat)
    apply_overrides(cfg, cli_flat)
    validate(cfg)
    # an env named without a preset of its own gets the settings its actions need (gigpo.train.config.env_settings)
    if fit_to_env(cfg, apply_overrides(Config(), dict(file_flat)).env.name, set(cli_flat)):
        validate(cfg)
    return cfg


def fit_to_env(cfg: Config, config_env: str, user_keys: set[str]) -> list[str]:
    """The rule of :mod:`gigpo.train.config.env_settings`: when ``cfg``'s env is not ``config_env`` (the env of the config
    file, or of the run it came from), apply the env's settings except ``user_keys``, with one note line; the
    ``key=value`` pairs changed. The caller validates again when any changed."""
    from gigpo.train.config.env_settings import EnvSettingsNote, fitted_settings

    if cfg.env.name == config_env:
        return []
    changed = fitted_settings(cfg, user_keys)
    apply_overrides(cfg, changed)
    notes = [f"{k}={v}" for k, v in changed.items()]
    if notes:
        warnings.warn(f"env {cfg.env.name!r} is not the env of the config ({config_env!r}): {', '.join(notes)} "
                      "fit its actions (set these keys to choose otherwise)", EnvSettingsNote, stacklevel=3)
    return notes


def config_from_dict(data: dict) -> Config:
    """Rebuild a Config from :meth:`Config.to_dict` output (e.g. a run directory's config.yaml). A config.yaml
    written by an older gigpo holds every key, so its renamed ones are one note, not one per key."""
    flat = _flatten(data)
    renamed = [k for k in flat if k in RENAMED_KEYS]  # old keys are always `section.key` (flattened one level)
    if renamed:
        many = len(renamed) > 1
        warnings.warn(f"this config was written by an older gigpo: {len(renamed)} key{'s' * many} "
                      f"{'were' if many else 'was'} renamed and load{'' if many else 's'} under the new name"
                      f"{'s' * many} ({', '.join(f'{k} -> {RENAMED_KEYS[k]}' for k in renamed[:3])}"
                      f"{', ...' if len(renamed) > 3 else ''}; docs/configuration.md)", FutureWarning, stacklevel=2)
    cfg = Config()
    apply_overrides(cfg, {RENAMED_KEYS.get(k, k): v for k, v in flat.items()})
    validate(cfg)
    return cfg
