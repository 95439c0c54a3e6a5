"""The algorithm table: what each ``algorithm.name`` means (advantage, loss, critic), its preset defaults, checks.

Presets live in ``configs/algos/<base>.yaml`` (``dapo+step`` uses ``dapo.yaml``) and sit *between* the built-in
defaults and the user's YAML/CLI: ``algorithm=dapo`` turns on clip-higher and dynamic sampling, while an explicit
``optim.clip_high=0.3`` still wins. Importing this module loads no model code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

PRESET_DIR = Path(__file__).resolve().parents[3] / "configs" / "algos"


@dataclass(frozen=True)
class AlgoSpec:
    """``advantage``: "group" (compute_advantages), "gae" (critic) or "reinforce++"; ``estimator`` /
    ``episode`` feed compute_advantages ("gigpo" = with the step term; ``episode`` None = algorithm.episode_estimator);
    ``loss``: "ppo" (token-level clipped surrogate) or "gspo" (sequence-level); ``critic``: needs a value head."""

    advantage: str
    estimator: str
    episode: str | None
    loss: str = "ppo"
    critic: bool = False

    @property
    def step_level(self) -> bool:
        return self.estimator == "gigpo"


SPECS: dict[str, AlgoSpec] = {
    "gigpo": AlgoSpec("group", "gigpo", None),
    "grpo": AlgoSpec("group", "grpo", "grpo"),
    "rloo": AlgoSpec("group", "rloo", "rloo"),
    "grpo+step": AlgoSpec("group", "gigpo", "grpo"),
    "rloo+step": AlgoSpec("group", "gigpo", "rloo"),
    "dapo": AlgoSpec("group", "grpo", "grpo"),
    "dapo+step": AlgoSpec("group", "gigpo", "grpo"),
    "gspo": AlgoSpec("group", "grpo", "grpo", loss="gspo"),
    "gspo+step": AlgoSpec("group", "gigpo", "grpo", loss="gspo"),
    "ppo": AlgoSpec("gae", "grpo", "grpo", critic=True),
    "ppo+step": AlgoSpec("gae", "gigpo", "grpo", critic=True),
    "reinforce++": AlgoSpec("reinforce++", "grpo", "grpo"),
}


def spec_of(name: str) -> AlgoSpec:
    return SPECS[name]


def preset_overrides(name: str) -> dict[str, Any]:
    """Flat ``{"section.key": value}`` defaults of algorithm ``name`` (empty when it has no preset file)."""
    base = name.removesuffix("+step")
    file = PRESET_DIR / f"{base}.yaml"
    if not file.exists():
        return {}
    data = yaml.safe_load(file.read_text()) or {}
    out: dict[str, Any] = {}
    for section, keys in data.items():
        if not isinstance(keys, dict):
            raise ValueError(f"{file}: expected a mapping under {section!r}")
        for k, v in keys.items():
            out[f"{section}.{k}"] = v
    return out


def check_algorithm(cfg: Any, check: Any) -> None:
    """Cross-field checks of the algorithm, critic, dynamic sampling, overlong shaping and rollout mode.

    ``check(cond, message)`` raises the caller's ConfigError when ``cond`` is false.
    """
    a, r, o = cfg.algorithm, cfg.rollout, cfg.optim
    spec = SPECS[a.name]
    if spec.critic:
        check(a.critic != "none", f"algorithm {a.name!r} needs a critic: set algorithm.critic=value_head (or auto)")
        check(a.value_coef > 0, f"algorithm {a.name!r}: algorithm.value_coef must be > 0")
    else:
        check(a.critic != "value_head",
              f"algorithm.critic=value_head is only used by ppo / ppo+step, not {a.name!r}")
    check(0 <= a.gae_lambda <= 1, "algorithm.gae_lambda must be in [0, 1]")
    check(a.value_clip >= 0 and a.value_lr >= 0, "algorithm.value_clip and algorithm.value_lr must be >= 0")
    check(a.kl_reward_coef >= 0, "algorithm.kl_reward_coef must be >= 0")
    check(a.kl_reward_coef == 0 or spec.advantage == "reinforce++",
          "algorithm.kl_reward_coef folds KL into the reward and is used by reinforce++ only "
          "(for a KL loss term use optim.kl_coef)")
    if r.dynamic_sampling:
        check(r.group_size >= 2, "rollout.dynamic_sampling needs rollout.group_size >= 2 "
                                 "(a group of one always has equal returns and would always be dropped)")
    check(r.max_rounds >= 1, "rollout.max_rounds must be >= 1")
    check(0 <= r.overlong_buffer < 1, "rollout.overlong_buffer is a fraction of max_response_tokens in [0, 1)")
    check(r.overlong_penalty >= 0, "rollout.overlong_penalty must be >= 0")
    if spec.loss == "gspo":
        check(o.clip_low < 1, "optim.clip_low must be < 1")
    if r.mode == "concat":
        check(not spec.step_level,
              f"rollout.mode=concat gives one row per trajectory, so the step-level term of {a.name!r} is "
              "undefined; use grpo, rloo, dapo, gspo, ppo or reinforce++")
        check(r.max_context_tokens == 0 or r.max_context_tokens >= r.max_response_tokens + 16,
              f"rollout.max_context_tokens={r.max_context_tokens} is too small for one turn: it must hold a prompt "
              f"(>= 16 tokens) plus rollout.max_response_tokens={r.max_response_tokens}")


def context_limit(cfg: Any, model: Any) -> int:
    """The concat-mode sequence limit: ``rollout.max_context_tokens``, or the model's max positions when 0;
    a limit beyond the model's positions is a ConfigError (raised before training)."""
    from gigpo.train.config import ConfigError

    r = cfg.rollout
    model_max = int(getattr(getattr(model, "config", None), "max_position_embeddings", 0) or 0)
    limit = r.max_context_tokens or model_max
    if not limit:
        raise ConfigError("rollout.max_context_tokens=0 but the model does not report max_position_embeddings")
    if model_max and limit > model_max:
        raise ConfigError(f"rollout.max_context_tokens={limit} exceeds the model's {model_max} positions")
    if limit < r.max_response_tokens + 16:
        raise ConfigError(f"context limit {limit} is too small for one turn (prompt >= 16 + "
                          f"{r.max_response_tokens} response tokens)")
    return limit
