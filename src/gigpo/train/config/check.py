"""Checks of a whole :class:`Config` before anything heavy runs: every key's type (all floats finite, all ints in
64 bits, Literals among their choices), per-key ranges, cross-field rules, and the env's constructor options
against its signature and annotations. Imports no model code and no torch."""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
import re
import types
import typing
from typing import Any, Literal, get_args, get_origin

from gigpo.algo.grouping import GroupingSpec
from gigpo.train.config.algorithms import algorithm_names, check_algorithm, spec_of
from gigpo.train.config.bounds import check_async_staleness, check_secrets, check_token_caps, known_context
from gigpo.train.config.coercion import INT_LIMIT, coerce
from gigpo.train.config.error import ConfigError
from gigpo.train.config.rollout import check_async_engine, check_rollout_engines
from gigpo.train.config.schema import Config
from gigpo.train.preflight.memory_estimate import check_rollout_memory
from gigpo.train.reporting.health import check_health_config
from gigpo.train.reporting.trackers import check_loggers

#: model.device: what :func:`gigpo.models.devices.resolve_device` can mean (availability is checked at load).
DEVICE_PATTERN = re.compile(r"auto|cpu|mps|cuda(:\d+)?")


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)


def _check_types(cfg: Config) -> None:
    """Every typed key holds a value of its type: catches what Python code (not the loader) put into a Config,
    e.g. ``cfg.optim.lr = float("inf")``; the loader's coercion already enforces the same rules."""
    sections = [(f.name, getattr(cfg, f.name)) for f in dataclasses.fields(cfg)]
    for prefix, obj in sections:
        for name, tp in typing.get_type_hints(type(obj)).items():
            key, value = f"{prefix}.{name}", getattr(obj, name)
            if dataclasses.is_dataclass(tp):  # a sub-section (algorithm.ppo, ...): its keys are checked too
                sections.append((key, value))
            elif tp is bool:
                _check(isinstance(value, bool), f"{key}: expected true/false, got {value!r}")
            elif tp is int:
                _check(isinstance(value, int) and not isinstance(value, bool), f"{key}: expected an integer, "
                       f"got {value!r}")
                _check(abs(value) < INT_LIMIT, f"{key}: {value!r} is out of range for an integer (|x| < 2^63)")
            elif tp is float:
                _check(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
                       f"{key}: expected a finite number, got {value!r}")
            elif tp is tuple:
                _check(isinstance(value, tuple) and all(isinstance(v, (int, float)) and math.isfinite(v)
                                                        for v in value), f"{key}: expected finite numbers, "
                                                                         f"got {value!r}")
            elif get_origin(tp) is Literal:
                _check(value in get_args(tp), f"{key}: {value!r} is not one of "
                                              f"{', '.join(map(repr, get_args(tp)))}")


def _check_env_options(cfg: Config) -> None:
    """Unknown options are errors; options whose constructor parameter is annotated with a simple type (int,
    float, bool, str, a Literal) are coerced to it, so ``env.size=abc`` is one error here rather than a
    TypeError inside the env."""
    from gigpo.envs.registry import env_kwargs_check, get_spec

    try:
        env_kwargs_check(cfg.env.name, cfg.env.options)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    factory = get_spec(cfg.env.name).load()
    try:  # a class's parameters are annotated on its __init__ (its own hints are its attributes')
        hints = typing.get_type_hints(factory.__init__ if inspect.isclass(factory) else factory)
    except Exception:  # noqa: BLE001 - unresolvable annotations: the env's own checks still run in probe_env
        return
    for name, value in cfg.env.options.items():
        tp = hints.get(name)
        args = [a for a in get_args(tp) if a is not type(None)] if get_origin(tp) in (typing.Union, types.UnionType) else []
        simple = tp in (int, float, bool, str) or get_origin(tp) is Literal
        if simple or (len(args) == 1 and args[0] in (int, float, bool, str) and value is not None):
            cfg.env.options[name] = coerce(value, args[0] if args else tp, f"env.{name}")


def validate(cfg: Config) -> None:
    """Types, ranges and cross-field checks, and the env's constructor options. Imports no model code."""
    _check_types(cfg)
    _check_env_options(cfg)
    m, r, a, o, t = cfg.model, cfg.rollout, cfg.algorithm, cfg.optim, cfg.train
    _check(a.name in algorithm_names(), f"algorithm.name: {a.name!r} is not one of {', '.join(algorithm_names())}")
    _check(bool(m.name.strip()), "model.name must not be empty")
    _check(DEVICE_PATTERN.fullmatch(m.device) is not None,
           f"model.device: {m.device!r} is not a device; use auto, cpu, cuda, cuda:N or mps")
    _check(not m.tiny or m.name == "tiny",
           f"model.tiny: options of the tiny model given, but model.name is {m.name!r}")
    _check(r.groups >= 1, "rollout.groups must be >= 1")
    _check(r.group_size >= 1, "rollout.group_size must be >= 1")
    _check(r.max_steps >= 0, "rollout.max_steps must be >= 0 (0 = the env's cap)")
    _check(r.max_response_tokens >= 1, "rollout.max_response_tokens must be >= 1")
    _check(r.concat.max_tokens >= 0, "rollout.concat.max_tokens must be >= 0 (0 = the model's positions)")
    _check(r.temperature >= 0, "rollout.temperature must be >= 0")
    _check(0 < r.top_p <= 1, "rollout.top_p must be in (0, 1]")
    _check(r.env_timeout_s > 0, "rollout.env_timeout_s must be > 0")
    if r.async_:  # rollout.async: gigpo.train.async_rollout (before the engines' checks: refused whether or not
        # the refused engine is installed)
        check_async_staleness(cfg)  # >= 1, and no more than the run can use (gigpo.train.config.bounds)
        check_async_engine(cfg)
        _check(int(os.environ.get("WORLD_SIZE", "1")) == 1 and t.rollout_shards <= 1,
               "rollout.async=true runs in one process with one rollout shard (not under torchrun, "
               "train.rollout_shards <= 1)")
    check_rollout_engines(cfg)  # engines, URLs, weight sync; constrained decoding on hf or vLLM
    _check(o.offpolicy_cap >= 1, f"optim.offpolicy_cap must be >= 1, got {o.offpolicy_cap}")
    _check(0 <= a.gamma <= 1, "algorithm.gamma must be in [0, 1]")
    _check(a.std_ddof in (0, 1), "algorithm.std_ddof must be 0 (population std) or 1 (unbiased)")
    _check(a.compat in (None, "verl-agent"), "algorithm.compat must be null or 'verl-agent'")
    _check(a.compat is None or a.std_ddof == 1,
           "algorithm.compat=verl-agent reproduces torch.std (ddof 1); it cannot be combined with algorithm.std_ddof=0")
    _check(a.compat is None or cfg.grouping.metric in ("exact", "state_key", "observation", "ro"),
           "algorithm.compat=verl-agent groups by exact anchors or Ratcliff-Obershelp (grouping.metric=ro) only")
    try:  # the threshold's one range check is GroupingSpec's (exact metrics keep a valid one too: it is saved)
        GroupingSpec("ro", cfg.grouping.threshold)
    except ValueError as err:
        raise ConfigError(f"grouping.threshold: {err}") from None
    _check(cfg.grouping.history >= 0, "grouping.history must be >= 0 (0 = the current anchor only)")
    _check(cfg.grouping.history == 0 or cfg.grouping.metric in ("exact", "state_key", "observation"),
           "grouping.history > 0 needs grouping.metric=exact, observation or state_key (similarity grouping has no "
           "history keys)")
    _check(a.name != "hgpo" or cfg.grouping.history == 0,
           "algorithm=hgpo builds its own history levels (algorithm.hgpo.levels); leave grouping.history at 0")
    _check(o.lr > 0, f"optim.lr must be a finite number > 0, got {o.lr!r}")
    _check(0 <= o.min_lr_ratio <= 1, "optim.min_lr_ratio must be in [0, 1]")
    _check(o.warmup_iterations >= 0, "optim.warmup_iterations must be >= 0")
    _check(o.weight_decay >= 0, "optim.weight_decay must be >= 0")
    _check(o.grad_clip >= 0, "optim.grad_clip must be >= 0 (0 = no clipping)")
    _check(o.ppo_epochs >= 1 and o.mini_batches >= 1 and o.micro_batch_size >= 1,
           "optim.ppo_epochs, optim.mini_batches and optim.micro_batch_size must be >= 1")
    _check(o.shared_prefix_min_tokens >= 1,
           f"optim.shared_prefix_min_tokens must be >= 1, got {o.shared_prefix_min_tokens}")
    _check(o.clip_low >= 0 and o.clip_high >= 0, "optim.clip_low/clip_high must be >= 0")
    _check(o.kl_coef >= 0 and o.entropy_coef >= 0, "optim.kl_coef and optim.entropy_coef must be >= 0")
    _check(len(o.betas) == 2, f"optim.betas must have two values, got {list(o.betas)}")
    _check(all(0 <= b < 1 for b in o.betas), f"optim.betas must each be in [0, 1), got {list(o.betas)}")
    _check(t.iterations >= 0, "train.iterations must be >= 0")
    _check(t.seed >= 0, f"train.seed must be >= 0 (numpy and torch seeds are unsigned), got {t.seed}")
    _check(t.threads >= 0, "train.threads must be >= 0 (0 = torch's default)")
    _check(t.eval_every >= 0 and t.eval_episodes >= 0, "train.eval_every/eval_episodes must be >= 0")
    _check(t.eval_temperature >= 0, "train.eval_temperature must be >= 0 (0 = greedy)")
    _check(t.checkpoint_every >= 0 and t.keep_checkpoints >= 1,
           "train.checkpoint_every must be >= 0 and train.keep_checkpoints >= 1")
    _check(t.sample_trajectories >= 0, "train.sample_trajectories must be >= 0")
    _check(t.max_failed_iterations >= 1, "train.max_failed_iterations must be >= 1")
    _check(t.stop_without_valid_actions >= 0, "train.stop_without_valid_actions must be >= 0")
    _check(t.sample_groups >= 0 and t.sample_max_bytes >= 4096,
           "train.sample_groups must be >= 0 and train.sample_max_bytes >= 4096")
    check_health_config(cfg, _check)  # train.health_*
    check_loggers(cfg, _check)  # train.loggers: known names, installed (the extra named), before any model loads
    _check(cfg.prompt.history_length >= 0, "prompt.history_length must be >= 0")
    _check(cfg.prompt.max_prompt_tokens >= 16, "prompt.max_prompt_tokens must be >= 16")
    _check_parallel(cfg)
    check_algorithm(cfg, _check)
    check_secrets(cfg)  # a masked value used as a key, a key no HTTP header can carry
    check_token_caps(cfg, known_context(cfg))  # a cap above the model's context (before the memory estimate)
    check_rollout_memory(cfg)  # a rollout shape beyond this machine's memory (gigpo.train.preflight.memory_estimate)
    if cfg.lora.enabled:
        _check(cfg.lora.r >= 1, "lora.r must be >= 1")
        _check(cfg.lora.alpha > 0, "lora.alpha must be > 0")
        _check(0 <= cfg.lora.dropout < 1, "lora.dropout must be in [0, 1)")


def _check_parallel(cfg: Config) -> None:
    """train.parallel / rollout_shards against the launcher's WORLD_SIZE (1 outside torchrun): every rank needs
    whole task groups, so K ranks need S ≥ K shards, S a multiple of K, and rollout.groups ≥ S."""
    import os

    t, groups = cfg.train, cfg.rollout.groups
    raw = os.environ.get("WORLD_SIZE", "1").strip() or "1"
    _check(raw.isdigit() and int(raw) >= 1, f"WORLD_SIZE={raw!r} (set by the launcher) is not a positive integer")
    world = int(raw)
    _check(t.rollout_shards >= 0, "train.rollout_shards must be >= 0 (0 = one shard per rank)")
    _check(t.dist_timeout_s > 0, "train.dist_timeout_s must be > 0")
    shards = t.rollout_shards or world
    _check(groups >= world, f"{world} ranks (WORLD_SIZE) but rollout.groups={groups}: each rank needs at least one "
           f"whole task group; use at most {groups} ranks or raise rollout.groups")
    _check(shards % world == 0, f"train.rollout_shards={shards} must be a multiple of the {world} ranks")
    _check(groups >= shards, f"train.rollout_shards={shards} exceeds rollout.groups={groups}")
    # refused in one process too (where fsdp would do nothing): a config must not pass without torchrun and
    # fail under it
    _check(not (t.parallel == "fsdp" and spec_of(cfg.algorithm.name).critic),
           f"train.parallel=fsdp does not support {cfg.algorithm.name}'s value head yet; use train.parallel=ddp")
    _check(not (t.parallel == "fsdp" and cfg.lora.enabled),
           "train.parallel=fsdp with LoRA is not supported yet (its checkpoints cannot be consolidated); use ddp")


def env_option_error(cfg: Config, err: Exception) -> ConfigError:
    """The env constructor's TypeError/ValueError as a ConfigError naming the ``env.*`` keys: the options its
    message mentions, else every option given (the message alone may not say which one it means)."""
    opts = cfg.env.options
    msg = " ".join(str(err).split()) or type(err).__name__
    named = [k for k in opts if re.search(rf"\b{re.escape(k)}\b", msg)] or list(opts)
    where = ", ".join(f"env.{k}={opts[k]!r}" for k in named) if named else f"env.name={cfg.env.name!r}"
    params = ""
    try:
        ps = inspect.signature(_env_factory(cfg.env.name)).parameters.values()
        if not any(p.kind is p.VAR_KEYWORD for p in ps):  # with **kwargs the env's own message lists its options
            params = ", ".join(p.name for p in ps)
    except (TypeError, ValueError):
        pass
    hint = f" (env {cfg.env.name!r} takes: {params})" if params else ""
    return ConfigError(f"{where}: {msg}{hint}")


def _env_factory(name: str) -> Any:
    from gigpo.envs.registry import get_spec

    return get_spec(name).load()
