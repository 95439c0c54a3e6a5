"""Typed training configuration: sections, defaults, YAML + `key=value` overrides, validation before any model loads."""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml


class ConfigError(ValueError):
    """A wrong key or value in the configuration (raised before anything heavy happens)."""


@dataclass
class EnvConfig:
    """Which environment to train on. Any other ``env.KEY=VALUE`` is passed to the env's constructor and checked
    against its signature (e.g. ``env.size=6`` for sokoban)."""

    name: str = "gridgoal"
    #: Constructor keyword arguments of the env (validated against the env's signature).
    options: dict = field(default_factory=dict)


@dataclass
class ModelConfig:
    """The policy model: ``tiny`` (random-init small Llama), ``smollm2-135m`` (bundled real LLM), or an HF id/path."""

    name: str = "tiny"
    device: str = "auto"  #: "auto" (cuda if present), "cpu", "cuda", "cuda:1", ...
    dtype: str = "auto"  #: "auto" (bf16 on cuda, fp32 on cpu), "float32", "bfloat16", "float16"
    #: Overrides of the tiny model's architecture (hidden_size, num_hidden_layers, ...).
    tiny: dict = field(default_factory=dict)
    gradient_checkpointing: bool = False


@dataclass
class LoraConfig:
    """LoRA adapters via peft (off by default: the tiny model trains all its weights)."""

    enabled: bool = False
    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: Any = "all-linear"  #: "all-linear" or a list of module names


@dataclass
class PromptConfig:
    """How the per-step prompt is built and the response parsed."""

    #: "plain": the response's first line is the action; "think-action": ``<think>…</think><action>…</action>``.
    format: Literal["plain", "think-action"] = "plain"
    history_length: int = 2  #: last-k (observation, action) pairs shown in the prompt
    #: include the env's rules as the system message (a random-init model cannot read them; dropping the constant
    #: text makes its steps several times cheaper)
    instructions: bool = True
    show_admissible: bool = True  #: list the admissible actions when the env knows them
    max_prompt_tokens: int = 2048  #: history shrinks, then the observation is truncated to fit
    require_think: bool = False  #: with "think-action", a response without <think>…</think> is invalid


@dataclass
class RolloutConfig:
    """Collection: ``groups`` tasks × ``group_size`` trajectories per iteration."""

    groups: int = 8  #: B: distinct tasks (initial states) per iteration
    group_size: int = 4  #: N: trajectories per task, all reset with the same seed
    max_steps: int = 0  #: per-episode step cap; 0 = the env's own cap
    max_response_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    invalid_penalty: float = -0.1  #: reward of an unparseable or inadmissible response (state unchanged)
    #: "step": a fresh prompt per turn (history window); "concat": the whole interaction is one sequence (RAGEN)
    mode: Literal["step", "concat"] = "step"
    max_context_tokens: int = 0  #: concat: sequence limit incl. the next response; 0 = the model's max positions
    #: concat, when the next turn would not fit: "stop" ends the episode, "truncate" drops the oldest turns
    context_limit_policy: Literal["stop", "truncate"] = "stop"
    #: DAPO: drop groups whose episode returns are all equal, collect more rounds until ``groups`` groups are kept
    dynamic_sampling: bool = False
    max_rounds: int = 4  #: dynamic sampling: at most this many collection rounds per iteration
    #: DAPO soft overlong punishment: buffer as a fraction of max_response_tokens (0 = off)
    overlong_buffer: float = 0.0
    overlong_penalty: float = 1.0  #: reward added at the full length is -overlong_penalty (linear ramp)
    #: seconds one env reset/step may take; a slower (hung) env ends its trajectory as failed and is replaced
    env_timeout_s: float = 60.0


@dataclass
class AlgorithmConfig:
    """Advantage estimator and loss. ``name``: gigpo | grpo | rloo | grpo+step | rloo+step | dapo | dapo+step |
    gspo | gspo+step | ppo | ppo+step | reinforce++ (``+step`` adds GiGPO's step-level term; docs/algorithms.md)."""

    name: str = "gigpo"
    episode_estimator: Literal["grpo", "rloo"] = "grpo"  #: episode-level term used by ``gigpo``
    gamma: float = 0.95  #: γ of the step-level discounted return R_t = r_t + γ R_{t+1}
    step_weight: float = 1.0  #: ω in A = A_E + ω A_S
    normalize: Literal["mean_std", "mean"] = "mean_std"
    #: ddof of the std in normalize="mean_std" (both terms): 1 = torch.std, as the authors' code, verl and TRL
    std_ddof: int = 1
    compat: Any = None  #: None or "verl-agent" (reproduce the official code's numerics)
    #: ppo: "auto"/"value_head" (linear head on the policy's last hidden state); "none" is an error for ppo
    critic: Literal["auto", "none", "value_head"] = "auto"
    gae_lambda: float = 0.95  #: ppo: λ of GAE over agent turns (γ = algorithm.gamma)
    value_coef: float = 0.5  #: ppo: weight of the value loss
    value_clip: float = 0.2  #: ppo: ε of the clipped value loss (0 = unclipped)
    value_lr: float = 0.0  #: ppo: learning rate of the value head (0 = optim.lr)
    kl_reward_coef: float = 0.0  #: reinforce++: β of the KL folded into each step's reward


@dataclass
class GroupingConfig:
    """How anchor states form step groups. ``exact``: identical observation text; ``state_key``: the env's true
    state; ``ro`` / ``indel`` / ``minhash``: text similarity ≥ ``threshold`` on the observation."""

    metric: Literal["exact", "state_key", "ro", "indel", "minhash"] = "exact"
    threshold: float = 0.9


@dataclass
class OptimConfig:
    """PPO update: epochs over the rollout in mini-batches, each accumulated over micro-batches."""

    lr: float = 1e-5
    #: learning-rate schedule over iterations: "constant", or "linear"/"cosine" decay from lr to lr·min_lr_ratio
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    min_lr_ratio: float = 0.1
    warmup_iterations: int = 0  #: linear warm-up from 0 over the first iterations
    weight_decay: float = 0.0
    betas: tuple = (0.9, 0.999)
    grad_clip: float = 1.0
    ppo_epochs: int = 1
    mini_batches: int = 1  #: optimizer steps per epoch (the rollout is split into this many mini-batches)
    micro_batch_size: int = 16  #: rows per forward pass; sets peak memory, not the math
    clip_low: float = 0.2  #: ε_low of the clipped ratio (1 - ε_low)
    clip_high: float = 0.2  #: ε_high (1 + ε_high); > clip_low is DAPO's clip-higher
    loss_agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-sum-over-constant"] = "token-mean"
    kl_coef: float = 0.0  #: > 0 keeps a frozen reference model and adds a KL penalty to the loss
    kl_kind: Literal["k1", "k2", "k3"] = "k3"
    entropy_coef: float = 0.0
    recompute_old_logprobs: bool = True  #: ratio denominators from a no-grad forward (vs the sampler's log-probs)


@dataclass
class TrainConfig:
    """Loop, evaluation, checkpointing and logging."""

    iterations: int = 100
    seed: int = 0
    run_dir: str = ""  #: empty: runs/<env>-<algorithm>-<timestamp>
    eval_every: int = 10  #: 0 disables periodic evaluation (a final one still runs when eval_episodes > 0)
    eval_episodes: int = 64
    eval_temperature: float = 0.0  #: 0 = greedy
    checkpoint_every: int = 10
    keep_checkpoints: int = 2
    sample_trajectories: int = 2  #: trajectories written as readable text per iteration
    progress: bool = True
    #: torch CPU threads (0 = torch's default). Tiny models on small CPUs run faster on 1 thread: their ops are
    #: too small to split, and a busy core makes the other thread wait.
    threads: int = 0
    tensorboard: bool = False
    #: a fresh run into a directory that holds checkpoints or metrics: false refuses, true clears it first
    overwrite: bool = False
    #: stop (exit 1) after this many consecutive iterations in which every trajectory failed
    max_failed_iterations: int = 3


@dataclass
class Config:
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    grouping: GroupingConfig = field(default_factory=GroupingConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


SECTIONS = {f.name: f.type for f in dataclasses.fields(Config)}
ALGORITHMS = ("gigpo", "grpo", "rloo", "grpo+step", "rloo+step", "dapo", "dapo+step", "gspo", "gspo+step", "ppo",
              "ppo+step", "reinforce++")
CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"  # shipped in the package; ./configs links here


def _section_types() -> dict[str, type]:
    hints = typing.get_type_hints(Config)
    return {name: hints[name] for name in SECTIONS}


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Convert ``value`` (from YAML or a CLI string) to the annotated type ``tp`` or raise ConfigError."""
    origin = get_origin(tp)
    if tp is Any:
        if isinstance(value, str):
            return _parse_scalar(value)
        return value
    if origin is Literal:
        choices = get_args(tp)
        if value not in choices:
            raise ConfigError(f"{key}: {value!r} is not one of {', '.join(map(repr, choices))}")
        return value
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if value is None or value == "null":
            return None
        return _coerce(value, args[0], key)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{key}: expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        try:
            f = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected an integer, got {value!r}") from None
        if f != int(f):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return int(f)
    if tp is float:
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{key}: expected a number, got {value!r}") from None
    if tp is str:
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return str(value)
    if tp is dict or origin is dict:
        if isinstance(value, str):
            value = yaml.safe_load(value)
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return value
    if tp is tuple or origin is tuple:
        if isinstance(value, str):
            value = yaml.safe_load(value)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return tuple(float(v) for v in value)
    return value


def _parse_scalar(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_overrides(cfg: Config, flat: dict[str, Any]) -> Config:
    """Apply ``{"section.key": value}`` (or ``{"section": name}`` shorthand) to ``cfg`` in place, validating."""
    types_ = _section_types()
    for key, value in flat.items():
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
        if sub.split(".")[0] not in field_types:
            if section == "env":  # env constructor options, checked against the env's signature later
                obj.options[sub] = _parse_scalar(value) if isinstance(value, str) else value
                continue
            raise ConfigError(
                f"unknown config key {key!r}; {section} keys are: {', '.join(sorted(field_types))}"
            )
        head, _, rest = sub.partition(".")
        tp = field_types[head]
        if section == "env" and head == "name" and value != obj.name:
            # a different env: the options set so far (e.g. by a preset) belong to the previous one
            obj.options.clear()
        if rest:  # dict-valued field, e.g. model.tiny.hidden_size=64
            if not (tp is dict or get_origin(tp) is dict):
                raise ConfigError(f"unknown config key {key!r}: {section}.{head} has no sub-keys")
            getattr(obj, head)[rest] = _parse_scalar(value) if isinstance(value, str) else value
            continue
        setattr(obj, head, _coerce(value, tp, key))
    return cfg


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
    if p.exists():
        return p
    for candidate in (CONFIG_DIR / path, CONFIG_DIR / f"{path}.yaml"):
        if candidate.exists():
            return candidate
    presets = sorted(q.stem for q in CONFIG_DIR.glob("*.yaml")) if CONFIG_DIR.exists() else []
    raise ConfigError(f"config file {path!r} not found (presets: {', '.join(presets) or 'none'})")


def load_config(path: str | None = None, overrides: list[str] | dict | None = None) -> Config:
    """Defaults ← YAML file (``path``; default: the quickstart preset) ← overrides; then :func:`validate`."""
    cfg = Config()
    file = resolve_config_path(path or "quickstart")
    data = yaml.safe_load(file.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: expected a mapping at the top level")
    data.pop("base", None)
    file_flat = _flatten(data)
    cli_flat = (parse_cli_overrides(overrides) if isinstance(overrides, list) else dict(overrides)) if overrides else {}
    # First pass: which algorithm? Its preset (configs/algos/) then sits below the file and the CLI.
    probe = apply_overrides(Config(), file_flat)
    apply_overrides(probe, cli_flat)
    if probe.algorithm.name in ALGORITHMS:
        from gigpo.train.algorithms import preset_overrides

        apply_overrides(cfg, preset_overrides(probe.algorithm.name))
    apply_overrides(cfg, file_flat)
    apply_overrides(cfg, cli_flat)
    validate(cfg)
    return cfg


def config_from_dict(data: dict) -> Config:
    """Rebuild a Config from :meth:`Config.to_dict` output (e.g. a run directory's config.yaml)."""
    cfg = Config()
    apply_overrides(cfg, _flatten(data))
    validate(cfg)
    return cfg


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)


def validate(cfg: Config) -> None:
    """Cross-field checks and the env's constructor options. Imports no model code."""
    from gigpo.envs.registry import env_kwargs_check

    try:
        env_kwargs_check(cfg.env.name, cfg.env.options)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    r, a, o, t = cfg.rollout, cfg.algorithm, cfg.optim, cfg.train
    _check(a.name in ALGORITHMS, f"algorithm.name: {a.name!r} is not one of {', '.join(ALGORITHMS)}")
    _check(r.groups >= 1, "rollout.groups must be >= 1")
    _check(r.group_size >= 1, "rollout.group_size must be >= 1")
    _check(r.max_steps >= 0, "rollout.max_steps must be >= 0 (0 = the env's cap)")
    _check(r.max_response_tokens >= 1, "rollout.max_response_tokens must be >= 1")
    _check(r.temperature >= 0, "rollout.temperature must be >= 0")
    _check(0 < r.top_p <= 1, "rollout.top_p must be in (0, 1]")
    _check(0 <= a.gamma <= 1, "algorithm.gamma must be in [0, 1]")
    _check(a.step_weight >= 0, "algorithm.step_weight must be >= 0")
    _check(a.compat in (None, "verl-agent"), "algorithm.compat must be null or 'verl-agent'")
    _check(0 < cfg.grouping.threshold <= 1, "grouping.threshold must be in (0, 1]")
    _check(o.lr > 0, "optim.lr must be > 0")
    _check(0 <= o.min_lr_ratio <= 1, "optim.min_lr_ratio must be in [0, 1]")
    _check(o.warmup_iterations >= 0, "optim.warmup_iterations must be >= 0")
    _check(o.ppo_epochs >= 1 and o.mini_batches >= 1 and o.micro_batch_size >= 1,
           "optim.ppo_epochs, optim.mini_batches and optim.micro_batch_size must be >= 1")
    _check(o.clip_low >= 0 and o.clip_high >= 0, "optim.clip_low/clip_high must be >= 0")
    _check(o.kl_coef >= 0 and o.entropy_coef >= 0, "optim.kl_coef and optim.entropy_coef must be >= 0")
    _check(len(o.betas) == 2, "optim.betas must have two values")
    _check(t.iterations >= 0, "train.iterations must be >= 0")
    _check(t.threads >= 0, "train.threads must be >= 0 (0 = torch's default)")
    _check(t.eval_every >= 0 and t.eval_episodes >= 0, "train.eval_every/eval_episodes must be >= 0")
    _check(t.checkpoint_every >= 0 and t.keep_checkpoints >= 1,
           "train.checkpoint_every must be >= 0 and train.keep_checkpoints >= 1")
    _check(cfg.prompt.history_length >= 0, "prompt.history_length must be >= 0")
    _check(cfg.prompt.max_prompt_tokens >= 16, "prompt.max_prompt_tokens must be >= 16")
    from gigpo.train.algorithms import check_algorithm

    check_algorithm(cfg, _check)
    lora_keys = {"r", "alpha", "dropout", "target_modules", "enabled"}
    _check(set(dataclasses.asdict(cfg.lora)) <= lora_keys, "lora: unknown keys")
    if cfg.lora.enabled:
        _check(cfg.lora.r >= 1, "lora.r must be >= 1")


def describe() -> str:
    """Every key with its default and documentation (for ``gigpo train --help``)."""
    lines = []
    for sname, stype in _section_types().items():
        doc = (stype.__doc__ or "").strip().splitlines()
        lines.append(f"{sname}:  {' '.join(s.strip() for s in doc)}")
        defaults = stype()
        comments = _field_comments(stype)
        for f in dataclasses.fields(stype):
            default = getattr(defaults, f.name)
            hint = comments.get(f.name, "")
            lines.append(f"  {sname}.{f.name} = {default!r}" + (f"    # {hint}" if hint else ""))
    return "\n".join(lines)


def _field_comments(cls: type) -> dict[str, str]:
    """Read ``#: doc`` comments and trailing ``#: doc`` from the dataclass source (documentation lives in code)."""
    import inspect

    try:
        src = inspect.getsource(cls).splitlines()
    except OSError:
        return {}
    out: dict[str, str] = {}
    pending = ""
    for line in src:
        s = line.strip()
        if s.startswith("#:"):
            pending = s[2:].strip()
            continue
        if ":" in s and not s.startswith(("class", "\"", "def", "@")):
            name = s.split(":")[0].strip()
            if name.isidentifier():
                trailing = s.split("#:", 1)[1].strip() if "#:" in s else ""
                out[name] = trailing or pending
        pending = ""
    return out
