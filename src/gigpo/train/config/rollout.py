"""Cross-field checks of the rollout engine and env-worker keys (called by :func:`gigpo.train.config.check.validate`;
no torch, no network: reachability of ``rollout.openai.urls`` is checked by the preflight)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from typing import Any

from gigpo.rollout.engines import registered_engines
from gigpo.train.config.error import ConfigError

#: ``rollout.<sub-section>`` -> (the choice key, the value(s) whose options it holds): the rule of
#: :mod:`gigpo.train.config.schema_rollout`, checked by :func:`check_choice_options`. The engines' sections come
#: from the engine registry (:func:`choice_options`).
CHOICE_OPTIONS = {"concat": ("mode", "concat"), "ray": ("env_workers", "ray"),
                  "branching": ("branch", ("every", "uncertain"))}


def choice_options() -> dict[str, tuple[str, Any]]:
    """:data:`CHOICE_OPTIONS` plus one entry per registered engine with options (``rollout.openai`` holds the
    options of ``rollout.engine=openai``, a ``--import``-ed engine's section likewise)."""
    engines = {e.section: ("engine", e.name) for e in registered_engines().values() if e.has_options()}
    return {**CHOICE_OPTIONS, **engines}


def check_choice_options(cfg: Any) -> None:
    """A choice's options set while another is chosen are a mistake (they would be ignored): one ConfigError
    naming them, as for another estimator's ``algorithm.<section>``."""
    r = cfg.rollout
    for sub, (choice, value) in choice_options().items():
        chosen = getattr(r, choice)
        values = value if isinstance(value, tuple) else (value,)
        opts = getattr(r, sub, None)
        if chosen in values or opts is None:  # None: an engine registered after this config was built
            continue
        default = type(opts)()
        changed = [f"rollout.{sub}.{f.name}" for f in dataclasses.fields(opts)
                   if getattr(opts, f.name) != getattr(default, f.name)]
        if changed:
            raise ConfigError(f"{', '.join(changed)} {'is' if len(changed) == 1 else 'are'} set but "
                              f"rollout.{choice}={chosen!r}: rollout.{sub} holds the options of "
                              f"rollout.{choice}={'|'.join(values)}")


def check_rollout_engines(cfg: Any) -> None:
    r = cfg.rollout

    def check(cond: bool, msg: str) -> None:
        if not cond:
            raise ConfigError(msg)

    check(r.ray.num_actors >= 0, "rollout.ray.num_actors must be >= 0 (0 = one actor per env)")
    check(r.ray.num_actors == 0 or r.env_workers == "ray",
          "rollout.ray.num_actors applies to rollout.env_workers=ray (process workers are one per env)")
    check(not r.ray.address or r.env_workers == "ray", "rollout.ray.address applies to rollout.env_workers=ray")
    if r.env_workers == "ray":
        check(importlib.util.find_spec("ray") is not None,
              "rollout.env_workers=ray needs Ray: pip install 'gigpo[ray]' (or use rollout.env_workers=process)")
    check(r.max_staleness >= 0, "rollout.max_staleness must be >= 0")
    check_engine(cfg)
    check_choice_options(cfg)  # after the specific rules above, whose messages say more
    check_branching(cfg)


def check_engine(cfg: Any) -> None:
    """``rollout.engine`` against the engine registry (:mod:`gigpo.rollout.engines`), then what its class declares:
    its options' ``check()``, ``check_config(cfg)`` (rules across sections) and, under ``torchrun``, its
    ``data_parallel`` capability. Each mistake one ConfigError line."""
    r = cfg.rollout
    engines = registered_engines()
    if r.engine not in engines:
        raise ConfigError(f"rollout.engine: {r.engine!r} is not one of {', '.join(map(repr, engines))} (an engine "
                          "of your own: register_engine in a module loaded with --import MODULE)")
    spec = engines[r.engine]
    opts = getattr(r, spec.section, None) if spec.has_options() else None
    check_options = getattr(opts, "check", None)
    hook = getattr(spec.cls, "check_config", None)
    try:
        if check_options is not None:
            check_options()
        if hook is not None:
            hook(cfg)
    except ValueError as err:  # the engine's own rule: its message names the key
        raise ConfigError(" ".join(str(err).split())) from None
    world = os.environ.get("WORLD_SIZE", "1").strip() or "1"
    if not spec.capabilities.data_parallel and world not in ("1", "0") and world.isdigit():
        able = [e.name for e in engines.values() if e.capabilities.data_parallel]
        raise ConfigError(f"rollout.engine={r.engine} runs with one learner process (WORLD_SIZE={world}): every "
                          f"rank would push its weights; use rollout.engine={'|'.join(able) or '?'} under torchrun")


def check_async_engine(cfg: Any) -> None:
    """``rollout.async=true`` needs an engine whose ``capabilities.async_rollout`` is not "none": a worker-process
    copy of the weights, or an engine pinned to each batch's weights version."""
    engines = registered_engines()
    spec = engines.get(cfg.rollout.engine)
    if spec is None or spec.capabilities.async_rollout != "none":  # an unknown name: check_engine's line
        return
    how = {"worker": "in a rollout worker process", "pinned": "on servers pinned to a weights version"}
    able = [f"rollout.engine={e.name}: {how[e.capabilities.async_rollout]}" for e in engines.values()
            if e.capabilities.async_rollout != "none"]
    raise ConfigError(f"rollout.async=true samples {' or '.join(able) or 'with no registered engine'}; "
                      f"rollout.engine={spec.name} is not supported with it yet")


def check_branching(cfg: Any) -> None:
    """``rollout.branch`` and its options; what needs the env (the episode cap, replay determinism, one branch
    within the group's budget) is checked by :func:`gigpo.train.compose.probe_env` before any model loads."""
    from gigpo.rollout.branching import MAX_SIBLINGS

    r, b = cfg.rollout, cfg.rollout.branching
    if r.branch == "off":
        return
    if not 2 <= b.siblings <= MAX_SIBLINGS:
        raise ConfigError(f"rollout.branching.siblings must be in [2, {MAX_SIBLINGS}], got {b.siblings}")
    if b.every < 1:
        raise ConfigError(f"rollout.branching.every must be >= 1, got {b.every}")
    if r.branch != "every" and b.every != 1:
        raise ConfigError(f"rollout.branching.every is set but rollout.branch={r.branch!r}: it is the option of "
                          "rollout.branch=every")
    if r.mode == "concat":
        raise ConfigError("rollout.branch needs rollout.mode=step: a concat trajectory is trained as one sequence, "
                          "so a sibling that starts mid-episode has no prompt of its own")
    if cfg.grouping.history > 0:
        raise ConfigError("rollout.branch with grouping.history > 0: a sibling's rows start at its branch step, so "
                          "its first anchors would lack the history its parent's have; use grouping.history=0")
