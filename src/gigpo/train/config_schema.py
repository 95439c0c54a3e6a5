"""The configuration's sections as typed dataclasses: every key, its type, default and ``#:`` documentation
(read by ``gigpo train --help``). Loading lives in :mod:`gigpo.train.config_load`, checks in
:mod:`gigpo.train.config_check`.

Every ``float`` key must be finite and every ``int`` key fit in 64 bits (checked for all keys, see
:func:`gigpo.train.config_check.validate`); ranges are checked per key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from gigpo.train.algorithms import SPECS


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
    device: str = "auto"  #: "auto" (cuda if present), "cpu", "cuda", "cuda:N" or "mps"
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"  #: "auto": bf16 on cuda, fp32 on cpu
    #: Overrides of the tiny model's architecture (hidden_size, num_hidden_layers, ...). They belong to the tiny
    #: model only: setting model.name to another model drops them, and setting them for another model is an error.
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
    #: where env calls run: "inline" (a watchdog thread; a hung env is abandoned), "process" (one worker process
    #: per env; a hung env is killed and a turn's steps run in parallel — for slow or crash-prone envs) or "ray"
    #: (Ray actors, local or on rollout.ray_address; needs the [ray] extra)
    env_workers: Literal["inline", "process", "ray"] = "inline"
    #: ray: actors hosting the envs, each env pinned to one (round-robin); 0 = one actor per env. A hung or dead
    #: actor fails every trajectory it hosts this turn and is replaced
    num_env_workers: int = 0
    ray_address: str = ""  #: ray: the cluster to join ("auto", "ray://host:10001"); empty = a local ray.init
    #: generation: "hf" (HF generate on the learner's model), "openai" (OpenAI-compatible completions servers at
    #: rollout.engine_urls, weights pushed after each update) or "vllm" (in-process vllm.LLM; CUDA, [vllm] extra)
    engine: Literal["hf", "openai", "vllm"] = "hf"
    #: openai: comma-separated base URLs (http://host:port/v1); each turn's prompts are split over them
    engine_urls: str = ""
    engine_model: str = ""  #: openai: the served model id sent as "model"; empty = model.name
    engine_timeout_s: float = 300.0  #: openai: socket timeout of one generation request
    engine_max_retries: int = 5  #: openai: retries of a failed request (exponential backoff), then the run stops
    #: openai: weights versions a server may lag behind the learner (a failed push tolerated); 0 = never stale
    max_staleness: int = 0
    #: openai: directory the learner writes pushed weights to, readable by the servers; empty = RUN_DIR/pushed_weights
    weights_dir: str = ""
    #: "free": the model writes any text, parsed into an action; "constrained": at each token only continuations of
    #: an admissible action (the env's info["admissible_actions"]) may be emitted, so every action is valid
    #: (gigpo.agent.constrained); the learner re-applies the same masks
    decoding: Literal["free", "constrained"] = "free"


@dataclass
class AlgorithmConfig:
    """Advantage estimator and loss. ``name``: {names} (``+step`` adds GiGPO's step-level term;
    docs/algorithms.md)."""

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
    #: hgpo: K, the deepest history level (levels 0..K: current anchor plus its 0..K previous anchors)
    hgpo_levels: int = 2
    hgpo_alpha: float = 1.0  #: hgpo: α of the level weights L^α (L = level + 1 anchors of context)
    hgpo_episode: bool = True  #: hgpo: add the episode term (A = A_E + ω A_H); false: A = A_H as the official code


@dataclass
class GroupingConfig:
    """How anchor states form step groups. ``exact``: identical observation text; ``state_key``: the env's true
    state; ``ro`` / ``indel`` / ``minhash``: text similarity ≥ ``threshold`` on the observation."""

    metric: Literal["exact", "state_key", "ro", "indel", "minhash"] = "exact"
    threshold: float = 0.9
    #: k > 0: a step's anchor is its key plus the keys of its trajectory's k previous steps (exact / state_key)
    history: int = 0


@dataclass
class OptimConfig:
    """PPO update: epochs over the rollout in mini-batches, each accumulated over micro-batches."""

    lr: float = 1e-5
    #: learning-rate schedule over iterations: "constant", or "linear"/"cosine" decay from lr to lr·min_lr_ratio
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    min_lr_ratio: float = 0.1
    warmup_iterations: int = 0  #: linear warm-up from 0 over the first iterations
    weight_decay: float = 0.0
    betas: tuple = (0.9, 0.999)  #: AdamW's (β1, β2), each in [0, 1)
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
    #: data parallelism under ``torchrun`` (docs/scaling.md): "ddp" replicates the model, "fsdp" shards it
    #: (FSDP2, per decoder layer); "auto": ddp when WORLD_SIZE > 1. One process always trains plainly.
    parallel: Literal["auto", "none", "ddp", "fsdp"] = "auto"
    #: S: the rollout's groups are cut into S shards, each sampled from its own seed; 0 = one per rank. One
    #: process with rollout_shards=K collects what K ranks do (a multiple of the number of ranks)
    rollout_shards: int = 0
    dist_timeout_s: float = 300.0  #: seconds a rank waits on the others in a collective before the job fails


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


AlgorithmConfig.__doc__ = (AlgorithmConfig.__doc__ or "").format(names=" | ".join(SPECS))
SECTIONS = {f.name: f.type for f in dataclasses.fields(Config)}
