"""The algorithm table: one entry per ``algorithm.name`` names its estimator (registered in :mod:`gigpo.algo`,
see :mod:`gigpo.algo.registry`), whether it adds GiGPO's step-level term, its episode term, the loss it trains
with and which preset file holds its defaults. Whether it trains a critic or needs KL rewards comes from the
estimator. Config validation, the help text, :func:`gigpo.train.update.estimate.row_advantages` and the trainer read
this table. A registered estimator without an entry (GraphGPO, a user's ``--import``-ed one) is an algorithm
too: ``algorithm=NAME`` trains it with the PPO-clipped loss and no preset.

Presets live in ``configs/algos/<preset>.yaml`` inside the package and sit *between* the built-in defaults and
the user's YAML/CLI: ``algorithm=dapo`` turns on clip-higher and dynamic sampling, while an explicit
``optim.clip_high=0.3`` still wins.

Losses are named by their registered name (:mod:`gigpo.algo.loss_registry`: ``ppo-clip``, ``gspo``, a user's
``--import``-ed one), imported on first use, so importing this module (and therefore loading or validating a
config) imports no torch and no model code. ``algorithm.loss`` replaces an algorithm's loss by another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

import gigpo.algo.estimators  # noqa: F401  (registers the built-in estimators)
from gigpo.algo.loss_registry import Loss, get_loss
from gigpo.algo.registry import Common, Estimator, get_estimator, registered
from gigpo.train.config.error import ConfigError
from gigpo.train.config.presets import ALGO_PRESET_DIR

#: Registered policy losses (:mod:`gigpo.algo.loss_registry`) the table names.
PPO_LOSS = "ppo-clip"
GSPO_LOSS = "gspo"
#: Sub-sections the trainer reads for every estimator of a kind, not only their own estimator's: the value head's
#: settings (``value_coef``, ``value_clip``, ``value_lr``) for any critic estimator (``needs_values``), the KL reward
#: coefficient for REINFORCE++-style ones (``needs_kl``).
VALUE_HEAD_SECTION = "ppo"
KL_REWARD_SECTION = "reinforce_pp"
#: Estimators that ``algorithm.compat=verl-agent`` replaces by the reproduction of the official code.
VERL_AGENT_REPLACES = ("gigpo", "grpo", "rloo")


@dataclass(frozen=True)
class AlgoSpec:
    """One algorithm: ``estimator`` (a registered estimator's name); ``step``: add GiGPO's step-level term (the
    ``+step`` variants, for estimators whose step term is optional); ``episode``: the episode term ("grpo" |
    "rloo"; None = ``algorithm.episode_estimator``); ``loss``: the registered name of its policy loss; ``preset``:
    stem of its file in configs/algos (None: no preset)."""

    description: str
    estimator: str = "grpo"
    step: bool = False
    episode: str | None = "grpo"
    loss: str = PPO_LOSS
    preset: str | None = None

    @property
    def est(self) -> Estimator:
        return get_estimator(self.estimator)

    @property
    def step_level(self) -> bool:
        """Uses GiGPO-style step groups (needs anchors)."""
        return self.est.uses_step_term(self.step)

    @property
    def critic(self) -> bool:
        return self.est.needs_values

    @property
    def kl_reward(self) -> bool:
        return self.est.needs_kl

    @property
    def loss_fn(self) -> Callable[..., tuple]:
        return get_loss(self.loss).fn()


_STEP = " + GiGPO's step-level term"
SPECS: dict[str, AlgoSpec] = {
    "gigpo": AlgoSpec("GiGPO: episode-level (algorithm.episode_estimator) + step-level group advantages",
                      estimator="gigpo", episode=None),
    "grpo": AlgoSpec("GRPO: episode return normalised within its group"),
    "rloo": AlgoSpec("RLOO: leave-one-out group baseline", estimator="rloo", episode="rloo"),
    "grpo+step": AlgoSpec("grpo" + _STEP, step=True),
    "rloo+step": AlgoSpec("rloo" + _STEP, estimator="rloo", step=True, episode="rloo"),
    "dapo": AlgoSpec("DAPO: grpo with clip-higher, dynamic sampling, overlong shaping", preset="dapo"),
    "dapo+step": AlgoSpec("dapo" + _STEP, step=True, preset="dapo"),
    "gspo": AlgoSpec("GSPO: grpo advantages, sequence-level ratio loss", loss=GSPO_LOSS, preset="gspo"),
    "gspo+step": AlgoSpec("gspo" + _STEP, step=True, loss=GSPO_LOSS, preset="gspo"),
    "ppo": AlgoSpec("PPO: GAE over agent turns with a value head", estimator="ppo", preset="ppo"),
    "ppo+step": AlgoSpec("ppo" + _STEP, estimator="ppo", step=True, preset="ppo"),
    "reinforce++": AlgoSpec("REINFORCE++: KL-shaped discounted returns, batch-normalised", estimator="reinforce++",
                            preset="reinforce++"),
    "hgpo": AlgoSpec("HGPO: episode term + history-aware hierarchy of step groups, mixed ∝ L^α (ICLR 2026)",
                     estimator="hgpo", episode=None),
}
ALGORITHMS = tuple(SPECS)


def algorithm_names() -> tuple[str, ...]:
    """The table's names, then every selectable registered estimator without an entry (GraphGPO, a user's)."""
    return tuple(SPECS) + tuple(n for n, e in registered().items() if n not in SPECS and e.selectable)


def loss_of(cfg: Any) -> Loss:
    """The run's policy loss: ``algorithm.loss`` when set, else the algorithm's own (ConfigError naming the
    registered losses for an unknown name)."""
    name = cfg.algorithm.loss or spec_of(cfg.algorithm.name).loss
    try:
        return get_loss(name)
    except ValueError as err:
        raise ConfigError(f"algorithm.loss: {err}") from None


def spec_of(name: str) -> AlgoSpec:
    if name in SPECS:
        return SPECS[name]
    est = registered().get(name)
    if est is None or not est.selectable:
        raise ConfigError(f"algorithm.name: {name!r} is not one of {', '.join(algorithm_names())}")
    return AlgoSpec(est.description, estimator=name, step=est.step_term == "always", episode=None)


def resolve_estimator(cfg: Any) -> tuple[Estimator, Common, Any]:
    """``(estimator, common keys, its options)`` of ``cfg.algorithm``: the entry's estimator (the verl-agent
    reproduction instead of gigpo/grpo/rloo under ``algorithm.compat=verl-agent``), :class:`Common` from
    ``algorithm.*``, and the options from the sub-section ``algorithm.<section>`` (defaults when the config has
    no such sub-section, e.g. for an estimator registered after the config schema was built)."""
    a = cfg.algorithm
    spec = spec_of(a.name)
    est = spec.est
    common = Common(gamma=a.gamma, step_weight=a.step_weight, normalize=a.normalize, std_ddof=a.std_ddof,
                    episode=spec.episode or a.episode_estimator, step=spec.step_level)
    if a.compat == "verl-agent" and spec.estimator in VERL_AGENT_REPLACES:
        est = get_estimator("verl-agent")
    options = getattr(a, est.section, None) if est.has_options() else None
    return est, common, options if options is not None else est.options()


def needs_reference(cfg: Any) -> bool:
    """A frozen reference model is kept when the loss has a KL term (``optim.kl_coef > 0``) or the estimator reads
    per-row KL (``needs_kl``), unless its options say they do not at their values (``reads_kl()``: REINFORCE++
    with β = 0)."""
    if cfg.optim.kl_coef > 0:
        return True
    est, _, options = resolve_estimator(cfg)
    return est.needs_kl and bool(getattr(options, "reads_kl", lambda: True)())


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
    try:  # Common checks ω (registry.check_step_weight: the one rule for it)
        est, _, options = resolve_estimator(cfg)
    except ValueError as err:
        raise ConfigError(f"algorithm.{err}") from None
    try:
        options.check()
    except ValueError as err:  # the estimator's own rule, named by its sub-section
        raise ConfigError(f"algorithm.{est.section} ({a.name}): {err}") from None
    shared = ({VALUE_HEAD_SECTION} if est.needs_values else set()) | ({KL_REWARD_SECTION} if est.needs_kl else set())
    for other in registered().values():  # a sub-section only its estimator reads: set for another is a mistake
        sub = getattr(a, other.section, None) if other.has_options() else None
        if sub is not None and other.name != est.name and other.section not in shared and sub != other.options():
            changed = ", ".join(f"algorithm.{other.section}.{k}" for k, v in vars(sub).items()
                                if v != getattr(other.options(), k))
            check(False, f"{changed} is read by algorithm {other.name} only, not {a.name!r}")
    check(a.compat is None or spec.estimator in VERL_AGENT_REPLACES,
          f"algorithm.compat=verl-agent reproduces {', '.join(VERL_AGENT_REPLACES)} (and their +step, dapo, gspo "
          f"variants), not {a.name!r}")
    if est.exact_anchors:
        check(cfg.grouping.metric in ("exact", "state_key", "observation"),
              f"algorithm={a.name} groups by exact anchors: grouping.metric must be exact, observation or state_key")
    if r.dapo.dynamic_sampling:
        check(r.group_size >= 2, "rollout.dapo.dynamic_sampling needs rollout.group_size >= 2 "
                                 "(a group of one always has equal returns and would always be dropped)")
    check(r.dapo.max_rounds >= 1, "rollout.dapo.max_rounds must be >= 1")
    check(0 <= r.dapo.overlong_buffer < 1,
          "rollout.dapo.overlong_buffer is a fraction of rollout.max_response_tokens in [0, 1)")
    check(r.dapo.overlong_penalty >= 0, "rollout.dapo.overlong_penalty must be >= 0")
    if loss_of(cfg).ratio == "sequence":  # the sequence-level ratio's lower bound 1 - clip_low must stay positive
        check(o.clip_low < 1, "optim.clip_low must be < 1")
    if r.mode == "concat":
        check(not spec.step_level,
              f"rollout.mode=concat gives one row per trajectory, so the step-level term of {a.name!r} is "
              f"undefined; use {', '.join(n for n in algorithm_names() if not spec_of(n).step_level)}")
        check(r.concat.max_tokens == 0 or r.concat.max_tokens >= r.max_response_tokens + 16,
              f"rollout.concat.max_tokens={r.concat.max_tokens} is too small for one turn: it must hold a prompt "
              f"(>= 16 tokens) plus rollout.max_response_tokens={r.max_response_tokens}")


def context_limit(cfg: Any, model: Any) -> int:
    """The concat-mode sequence limit: ``rollout.concat.max_tokens``, or the model's max positions when 0;
    a limit beyond the model's positions is a ConfigError (raised before training)."""
    r = cfg.rollout
    model_max = int(getattr(getattr(model, "config", None), "max_position_embeddings", 0) or 0)
    limit = r.concat.max_tokens or model_max
    if not limit:
        raise ConfigError("rollout.concat.max_tokens=0 but the model does not report max_position_embeddings")
    if model_max and limit > model_max:
        raise ConfigError(f"rollout.concat.max_tokens={limit} exceeds the model's {model_max} positions")
    if limit < r.max_response_tokens + 16:
        raise ConfigError(f"context limit {limit} is too small for one turn (prompt >= 16 + "
                          f"{r.max_response_tokens} response tokens)")
    return limit
