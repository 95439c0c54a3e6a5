"""The algorithm table: one entry per ``algorithm.name`` says how its advantages are computed, which loss it
trains with, whether it needs a critic and which preset file holds its defaults. Config validation, the help
text, :func:`gigpo.train.estimate.row_advantages` and the trainer all read this table, so adding an algorithm is
one entry here (plus its functions, if it brings new ones).

Presets live in ``configs/algos/<preset>.yaml`` inside the package and sit *between* the built-in defaults and
the user's YAML/CLI: ``algorithm=dapo`` turns on clip-higher and dynamic sampling, while an explicit
``optim.clip_high=0.3`` still wins.

Functions are named ``"module:function"`` and imported on first use, so importing this module (and therefore
loading or validating a config) imports neither torch nor any model code, and there is no import cycle with
:mod:`gigpo.train.estimate`, which dispatches through this table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from gigpo.train.config_error import ConfigError
from gigpo.train.presets import ALGO_PRESET_DIR

#: Advantage functions ``(cfg, batch, values, kl) -> (advantages, value_targets or None, stats)``.
GROUP_ADVANTAGES = "gigpo.train.estimate:group_advantages"
GAE_ADVANTAGES = "gigpo.train.estimate:gae_advantages"
REINFORCE_PP_ADVANTAGES = "gigpo.train.estimate:reinforce_pp_advantages"
HGPO_ADVANTAGES = "gigpo.train.grouping:hgpo_group_advantages"
#: Policy losses with :func:`gigpo.algo.losses.policy_loss`'s signature.
PPO_LOSS = "gigpo.algo.losses:policy_loss"
GSPO_LOSS = "gigpo.algo.losses:gspo_loss"


@cache
def _resolve(target: str) -> Callable[..., Any]:
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


@dataclass(frozen=True)
class AlgoSpec:
    """One algorithm.

    ``advantage``: "module:function" computing per-row advantages (see :data:`GROUP_ADVANTAGES`);
    ``estimator`` / ``episode``: the group part's :func:`gigpo.algo.compute_advantages` arguments ("gigpo" adds
    GiGPO's step-level term; ``episode`` None = ``algorithm.episode_estimator``); ``loss``: "module:function" of
    the policy loss; ``critic``: trains a value head; ``kl_reward``: folds ``algorithm.kl_reward_coef`` · KL into
    the rewards; ``preset``: stem of its file in configs/algos (None: no preset).
    """

    description: str
    advantage: str = GROUP_ADVANTAGES
    estimator: str = "grpo"
    episode: str | None = "grpo"
    loss: str = PPO_LOSS
    critic: bool = False
    kl_reward: bool = False
    preset: str | None = None

    @property
    def step_level(self) -> bool:
        return self.estimator == "gigpo"

    @property
    def advantage_fn(self) -> Callable[..., tuple]:
        return _resolve(self.advantage)

    @property
    def loss_fn(self) -> Callable[..., tuple]:
        return _resolve(self.loss)


_STEP = " + GiGPO's step-level term"
SPECS: dict[str, AlgoSpec] = {
    "gigpo": AlgoSpec("GiGPO: episode-level (algorithm.episode_estimator) + step-level group advantages",
                      estimator="gigpo", episode=None),
    "grpo": AlgoSpec("GRPO: episode return normalised within its group"),
    "rloo": AlgoSpec("RLOO: leave-one-out group baseline", estimator="rloo", episode="rloo"),
    "grpo+step": AlgoSpec("grpo" + _STEP, estimator="gigpo"),
    "rloo+step": AlgoSpec("rloo" + _STEP, estimator="gigpo", episode="rloo"),
    "dapo": AlgoSpec("DAPO: grpo with clip-higher, dynamic sampling, overlong shaping", preset="dapo"),
    "dapo+step": AlgoSpec("dapo" + _STEP, estimator="gigpo", preset="dapo"),
    "gspo": AlgoSpec("GSPO: grpo advantages, sequence-level ratio loss", loss=GSPO_LOSS, preset="gspo"),
    "gspo+step": AlgoSpec("gspo" + _STEP, estimator="gigpo", loss=GSPO_LOSS, preset="gspo"),
    "ppo": AlgoSpec("PPO: GAE over agent turns with a value head", advantage=GAE_ADVANTAGES, critic=True,
                    preset="ppo"),
    "ppo+step": AlgoSpec("ppo" + _STEP, advantage=GAE_ADVANTAGES, estimator="gigpo", critic=True, preset="ppo"),
    "reinforce++": AlgoSpec("REINFORCE++: KL-shaped discounted returns, batch-normalised",
                            advantage=REINFORCE_PP_ADVANTAGES, kl_reward=True, preset="reinforce++"),
    "hgpo": AlgoSpec("HGPO: episode term + history-aware hierarchy of step groups, mixed ∝ L^α (ICLR 2026)",
                     advantage=HGPO_ADVANTAGES, estimator="gigpo", episode=None),
}
ALGORITHMS = tuple(SPECS)


def spec_of(name: str) -> AlgoSpec:
    if name not in SPECS:
        raise ConfigError(f"algorithm.name: {name!r} is not one of {', '.join(SPECS)}")
    return SPECS[name]


def preset_overrides(name: str) -> dict[str, Any]:
    """Flat ``{"section.key": value}`` defaults of algorithm ``name`` (empty when it has no preset)."""
    preset = spec_of(name).preset
    if preset is None:
        return {}
    file = ALGO_PRESET_DIR / f"{preset}.yaml"
    if not file.is_file():  # a packaging mistake, never silently "no preset"
        raise FileNotFoundError(f"algorithm {name!r}: its preset {file} is missing from the gigpo package")
    data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    out: dict[str, Any] = {}
    for section, keys in data.items():
        if not isinstance(keys, dict):
            raise ConfigError(f"{file}: expected a mapping under {section!r}")
        for k, v in keys.items():
            out[f"{section}.{k}"] = v
    return out


def check_algorithm(cfg: Any, check: Callable[[bool, str], None]) -> None:
    """Cross-field checks of the algorithm, critic, dynamic sampling, overlong shaping and rollout mode.

    ``check(cond, message)`` raises the caller's ConfigError when ``cond`` is false.
    """
    a, r, o = cfg.algorithm, cfg.rollout, cfg.optim
    spec = spec_of(a.name)
    critics = ", ".join(n for n, s in SPECS.items() if s.critic)
    if spec.critic:
        check(a.critic != "none", f"algorithm {a.name!r} needs a critic: set algorithm.critic=value_head (or auto)")
        check(a.value_coef > 0, f"algorithm {a.name!r}: algorithm.value_coef must be > 0")
    else:
        check(a.critic != "value_head", f"algorithm.critic=value_head is only used by {critics}, not {a.name!r}")
    check(0 <= a.gae_lambda <= 1, "algorithm.gae_lambda must be in [0, 1]")
    check(a.value_clip >= 0 and a.value_lr >= 0, "algorithm.value_clip and algorithm.value_lr must be >= 0")
    check(a.kl_reward_coef >= 0, "algorithm.kl_reward_coef must be >= 0")
    check(a.kl_reward_coef == 0 or spec.kl_reward,
          "algorithm.kl_reward_coef folds KL into the reward and is used by "
          f"{', '.join(n for n, s in SPECS.items() if s.kl_reward)} only (for a KL loss term use optim.kl_coef)")
    if r.dynamic_sampling:
        check(r.group_size >= 2, "rollout.dynamic_sampling needs rollout.group_size >= 2 "
                                 "(a group of one always has equal returns and would always be dropped)")
    check(r.max_rounds >= 1, "rollout.max_rounds must be >= 1")
    check(0 <= r.overlong_buffer < 1, "rollout.overlong_buffer is a fraction of max_response_tokens in [0, 1)")
    check(r.overlong_penalty >= 0, "rollout.overlong_penalty must be >= 0")
    if spec.loss == GSPO_LOSS:  # the sequence-level ratio's lower bound 1 - clip_low must stay positive
        check(o.clip_low < 1, "optim.clip_low must be < 1")
    if r.mode == "concat":
        check(not spec.step_level,
              f"rollout.mode=concat gives one row per trajectory, so the step-level term of {a.name!r} is "
              f"undefined; use {', '.join(n for n, s in SPECS.items() if not s.step_level)}")
        check(r.max_context_tokens == 0 or r.max_context_tokens >= r.max_response_tokens + 16,
              f"rollout.max_context_tokens={r.max_context_tokens} is too small for one turn: it must hold a prompt "
              f"(>= 16 tokens) plus rollout.max_response_tokens={r.max_response_tokens}")


def context_limit(cfg: Any, model: Any) -> int:
    """The concat-mode sequence limit: ``rollout.max_context_tokens``, or the model's max positions when 0;
    a limit beyond the model's positions is a ConfigError (raised before training)."""
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
