"""The configuration's sections as typed dataclasses: every key, its type, default and description. The
description is data on the field (``key(default, "description")`` stores it as ``metadata["doc"]``), read by
``gigpo train --help`` and by the test that every key has one; allowed values come from the type (a ``Literal``'s
choices) and, for ranges, from the description. Loading lives in :mod:`gigpo.train.config.load`, checks in
:mod:`gigpo.train.config.check`.

Every ``float`` key must be finite and every ``int`` key fit in 64 bits (checked for all keys, see
:func:`gigpo.train.config.check.validate`); ranges are checked per key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from gigpo.algo.registry import option as key  # a documented field: the same helper as an estimator option
from gigpo.algo.registry import registered
from gigpo.train.config.algorithms import algorithm_names
from gigpo.train.config.schema_rollout import RolloutConfig, rollout_section
from gigpo.train.config.sections import extended_section


@dataclass
class EnvConfig:
    """Which environment to train on. Any other ``env.KEY=VALUE`` is passed to the env's constructor and checked
    against its signature (e.g. ``env.size=6`` for sokoban)."""

    name: str = key(
        "gridgoal", "the environment (`gigpo envs` lists them; `--import MODULE` adds a user's own)")
    options: dict = key(
        factory=dict, doc="Constructor keyword arguments of the env (validated against the env's signature).")


@dataclass
class ModelConfig:
    """The policy model: ``tiny`` (random-init small Llama), ``smollm2-135m`` (bundled real LLM), or an HF id/path."""

    name: str = key(
        "tiny",
        '"tiny" (random-init small Llama), "smollm2-135m" (the bundled SmolLM2), an HF id in the local cache '
        "or a local path")
    device: str = key("auto", '"auto" (cuda if present), "cpu", "cuda", "cuda:N" or "mps"')
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = key(
        "auto", '"auto": bf16 on cuda, fp32 on cpu')
    tiny: dict = key(
        factory=dict, doc=
        "Overrides of the tiny model's architecture (hidden_size, num_hidden_layers, ...). They belong to "
        "the tiny model only: setting model.name to another model drops them, and setting them for another "
        "model is an error.")
    gradient_checkpointing: bool = key(
        False, "recompute activations in the backward pass (less memory, ~30% more compute)")


@dataclass
class LoraConfig:
    """LoRA adapters via peft (off by default: the tiny model trains all its weights)."""

    enabled: bool = key(False, "train LoRA adapters (peft) instead of all weights")
    r: int = key(16, "LoRA rank (>= 1)")
    alpha: int = key(32, "LoRA scaling α (> 0; the update is scaled by alpha / r)")
    dropout: float = key(0.0, "dropout on the LoRA input, in [0, 1)")
    target_modules: Any = key("all-linear", '"all-linear" or a list of module names')


@dataclass
class PromptConfig:
    """How the per-step prompt is built and the response parsed."""

    format: Literal["plain", "think-action"] = key(
        "plain", "\"plain\": the response's first line is the action; \"think-action\": "
        "``<think>…</think><action>…</action>``.")
    history_length: int = key(2, "last-k (observation, action) pairs shown in the prompt (>= 0)")
    instructions: bool = key(
        True,
        "include the env's rules as the system message (a random-init model cannot read them; dropping the "
        "constant text makes its steps several times cheaper)")
    show_admissible: bool = key(True, "list the admissible actions when the env knows them")
    max_prompt_tokens: int = key(2048, "prompt token limit (>= 16): history shrinks, then the observation is truncated to fit")
    require_think: bool = key(False, 'with "think-action", a response without <think>…</think> is invalid')


@dataclass
class AlgorithmKeys:
    """Advantage estimator and loss. ``name``: {names} (``+step`` adds GiGPO's step-level term;
    docs/algorithms.md)."""

    name: str = key(
        "gigpo", "the algorithm (the table at the end of --help); a registered estimator's name works too")
    episode_estimator: Literal["grpo", "rloo"] = key("grpo", "episode-level term used by ``gigpo``")
    gamma: float = key(0.95, "γ of the step-level discounted return R_t = r_t + γ R_{t+1}, in [0, 1]")
    step_weight: float = key(1.0, "ω in A = A_E + ω A_S (finite, >= 0)")
    normalize: Literal["mean_std", "mean"] = key(
        "mean_std",
        'group normalisation of both terms: "mean_std" (A = (x − mean) / std) or "mean" (A = x − mean)')
    std_ddof: int = key(
        1,
        "ddof of the std in normalize=\"mean_std\" (both terms), 0 or 1: 1 = torch.std, as the authors' code, verl "
        "and TRL")
    loss: str = key(
        "", "the policy loss, a registered name (the list at the end of --help; `--import MODULE` adds a user's); "
        'empty = the algorithm\'s own ("ppo-clip"; "gspo" for gspo and gspo+step)')
    compat: Literal["verl-agent"] | None = key(
        None, 'null or "verl-agent": gigpo/grpo/rloo (and variants) by the estimator reproducing the official '
        "code's numerics (gigpo.algo.estimators.verl_agent)")


def _estimator_sections() -> list[tuple[str, type, Any]]:
    """One sub-section ``algorithm.<section>`` per registered estimator that has options: its options dataclass,
    documented and checked by the estimator (``algorithm.ppo``, ``algorithm.hgpo``, ``algorithm.graphgpo``, ...)."""
    return [(e.section, e.options, field(default_factory=e.options, metadata={
        "doc": f"options of estimator {e.name} (read only when it runs)"})) for e in registered().values()
        if e.has_options()]


#: ``algorithm.*``: the keys above plus the estimators' sub-sections, built from the estimator registry, so a new
#: estimator's options appear in the config, its validation and ``--help`` without an edit here.
AlgorithmConfig = dataclasses.make_dataclass("AlgorithmConfig", _estimator_sections(), bases=(AlgorithmKeys,))
AlgorithmConfig.__module__ = __name__


def algorithm_section() -> type:
    """The class of ``Config().algorithm``: :data:`AlgorithmConfig`, extended (a subclass) by one sub-section per
    estimator with options registered after this module was built — a user's, loaded with ``--import`` — so its
    options are config keys (``algorithm.<section>.<key>``), in ``--help``, ``config.yaml`` and its checks like a
    built-in's. A section that would shadow a key of ``algorithm`` is a ValueError naming both."""
    return extended_section(AlgorithmConfig, AlgorithmKeys, _estimator_sections(), "algorithm", "estimator",
                            AlgorithmConfig.__doc__)


@dataclass
class GroupingConfig:
    """How anchor states form step groups (docs/configuration.md "Anchors"). ``exact``: identical anchors, the
    anchor being the env's true state (``info["state_key"]``) when the env gives one and the observation text
    otherwise — one rule, reported per iteration as ``grouping/state_key_anchors``; ``state_key``: the same (its
    old name); ``observation``: identical observation text even where the env gives a state (the paper's anchors;
    for studies of noisy text); ``ro`` / ``indel`` / ``minhash``: text similarity ≥ ``threshold`` on the
    observation."""

    metric: Literal["exact", "state_key", "observation", "ro", "indel", "minhash"] = key(
        "exact",
        "anchor matching: \"exact\" (the env's state_key when it gives one, else the observation text; "
        "\"state_key\" is the same), \"observation\" (the text exactly), or text similarity ≥ threshold by \"ro\" "
        '(Ratcliff–Obershelp), "indel" (rapidfuzz) or "minhash" (token Jaccard estimate)')
    threshold: float = key(0.9, "similarity metrics: two anchors match when their score is ≥ this, in (0, 1]")
    history: int = key(
        0, "k >= 0; k > 0: a step's anchor is its key plus the keys of its trajectory's k previous steps (exact / "
        "state_key)")


@dataclass
class OptimConfig:
    """PPO update: epochs over the rollout in mini-batches, each accumulated over micro-batches."""

    lr: float = key(1e-5, "AdamW learning rate (> 0)")
    lr_schedule: Literal["constant", "linear", "cosine"] = key(
        "constant",
        'learning-rate schedule over iterations: "constant", or "linear"/"cosine" decay from lr to '
        "lr·min_lr_ratio")
    min_lr_ratio: float = key(0.1, "linear/cosine schedules decay to lr · min_lr_ratio, in [0, 1]")
    warmup_iterations: int = key(0, "linear warm-up from 0 over the first iterations (>= 0)")
    weight_decay: float = key(0.0, "AdamW weight decay (>= 0)")
    betas: tuple = key((0.9, 0.999), "AdamW's (β1, β2), each in [0, 1)")
    grad_clip: float = key(1.0, "clip the gradient's global norm to this (>= 0; 0 = no clipping)")
    ppo_epochs: int = key(1, "passes over each rollout (>= 1)")
    mini_batches: int = key(1, "optimizer steps per epoch (>= 1; the rollout is split into this many mini-batches)")
    micro_batch_size: int = key(16, "rows per forward pass (>= 1); sets peak memory, not the math")
    shared_prefix: Literal["auto", "off"] = key(
        "auto",
        'rows that begin with the same tokens: "auto" computes a shared prefix once and only each row\'s own '
        "suffix over its KV cache — in the learner's passes (update, old log-probs, reference, values) and in "
        "constrained generation's prefill — where that forwards fewer tokens (same numbers up to float rounding; "
        'docs/results/shared_prefix.md); "off" forwards every row whole (identical rows still once)')
    shared_prefix_min_tokens: int = key(
        16, "optim.shared_prefix: the fewest tokens two rows must share for the prefix to be computed once (>= 1)")
    clip_low: float = key(0.2, "ε_low of the clipped ratio (1 - ε_low), >= 0 (< 1 for gspo)")
    clip_high: float = key(0.2, "ε_high (1 + ε_high), >= 0; > clip_low is DAPO's clip-higher")
    loss_agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-sum-over-constant"] = key(
        "token-mean",
        'how token losses become one number: "token-mean" over all tokens, "seq-mean-token-mean" (mean per '
        'sequence, then over sequences), "seq-mean-token-sum", "seq-sum-over-constant" (Dr. GRPO)')
    kl_coef: float = key(0.0, ">= 0; > 0 keeps a frozen reference model and adds a KL penalty to the loss")
    kl_kind: Literal["k1", "k2", "k3"] = key(
        "k3",
        "estimator of KL(π‖π_ref) in the loss: \"k1\" (log-ratio), \"k2\" (½ log-ratio²), \"k3\" (Schulman's "
        "unbiased, low-variance)")
    entropy_coef: float = key(0.0, "weight of the entropy bonus (>= 0)")
    recompute_old_logprobs: bool = key(
        True, "ratio denominators from a no-grad forward (vs the sampler's log-probs)")
    offpolicy_correction: Literal["none", "tis", "mis"] = key(
        "none",
        "importance weight of the learner's over the sampler's token probability ρ (stale rollout.async "
        'batches): "tis" multiplies each token\'s loss by min(ρ, offpolicy_cap), "mis" by ρ with tokens '
        'where ρ > offpolicy_cap dropped, "none" by 1 (gigpo.algo.losses.offpolicy_weight)')
    offpolicy_cap: float = key(2.0, "the cap C of optim.offpolicy_correction (>= 1)")


@dataclass
class TrainConfig:
    """Loop, evaluation, checkpointing and logging."""

    iterations: int = key(100, "rollout + update iterations of the run (>= 0)")
    seed: int = key(
        0, "seed of every random draw (tasks, sampling, shuffles), >= 0; a resume replays the same draws")
    run_dir: str = key("", "empty: runs/<env>-<algorithm>-<timestamp>")
    eval_every: int = key(
        10, "iterations between evaluations (>= 0; 0 disables periodic evaluation, a final one still runs when eval_episodes > 0)")
    eval_episodes: int = key(64, "held-out episodes per evaluation (>= 0; 0 = no evaluation)")
    eval_temperature: float = key(0.0, "sampling temperature of evaluation (>= 0; 0 = greedy)")
    checkpoint_every: int = key(10, "iterations between checkpoints (>= 0; 0 = only at the end)")
    keep_checkpoints: int = key(2, "newest checkpoints of this run to keep (>= 1)")
    sample_trajectories: int = key(2, "trajectories written as readable text per iteration (>= 0)")
    progress: bool = key(True, "show one progress bar (false: one log line per iteration)")
    threads: int = key(
        0, "torch CPU threads (>= 0; 0 = torch's default). Tiny models on small CPUs run faster on 1 thread: their "
        "ops are too small to split, and a busy core makes the other thread wait.")
    tensorboard: bool = key(False, 'the same as "tensorboard" in train.loggers (kept for old configs)')
    loggers: Any = key(
        factory=list, doc='trackers that get the config, every metric, the curves, the sample tables and the '
        'health alerts: a list of "tensorboard" (RUN_DIR/tensorboard), "wandb" (offline into RUN_DIR/wandb '
        'unless a W&B key is set; extra [wandb]), "mlflow" (file store RUN_DIR/mlruns unless '
        'MLFLOW_TRACKING_URI is set; extra [mlflow]); [] = none (gigpo.train.reporting.trackers)')
    sample_groups: int = key(
        4, "task groups per iteration written whole (every trajectory and step, with R_t, A_E, A_S, A and its "
        "step group) to samples/iter_N.jsonl for `gigpo view`; 0 = none (>= 0)")
    sample_max_bytes: int = key(
        524288, "cap on one samples/iter_N.jsonl in bytes (>= 4096): long texts are cut, groups past it left out")
    health_collapse_high: float = key(
        0.9, "health alert collapse: sampled success reached >= this, then fell to <= health_collapse_low "
        "within health_collapse_window iterations (in [0, 1])")
    health_collapse_low: float = key(0.5, "see health_collapse_high (in [0, 1], < health_collapse_high)")
    health_collapse_window: int = key(50, "iterations of the collapse alert's window (>= 0; 0 disables the alert)")
    health_collapse_sustain: int = key(
        5, "a fall must last this many iterations (success below health_collapse_high) to be a collapse alert; a "
        "shorter dip is silent (>= 1)")
    health_entropy_ratio: float = key(
        0.1, "health alert entropy: entropy fell to <= this fraction of its first iterations' mean while "
        "sampled success is below health_collapse_high (in [0, 1); 0 disables)")
    health_no_signal_iterations: int = key(
        10, "health alert no_signal: this many iterations in a row with every advantage 0 (every group's "
        "returns equal); >= 0, 0 disables")
    overwrite: bool = key(
        False,
        "a fresh run into a directory that holds checkpoints or metrics: false refuses, true clears it first")
    stop_without_valid_actions: int = key(
        3, "K >= 0: stop (one line naming the keys to change) when the first K iterations, or gigpo eval's first 8 "
        "episodes, made no valid action and no move of the env fits the response budget; 0 = never")
    max_failed_iterations: int = key(
        3, "stop (exit 1) after this many consecutive iterations in which every trajectory failed (>= 1)")
    parallel: Literal["auto", "none", "ddp", "fsdp"] = key(
        "auto",
        'data parallelism under ``torchrun`` (docs/scaling.md): "ddp" replicates the model, "fsdp" shards it '
        '(FSDP2, per decoder layer); "auto": ddp when WORLD_SIZE > 1. One process always trains plainly.')
    rollout_shards: int = key(
        0, "S >= 0: the rollout's groups are cut into S shards, each sampled from its own seed; 0 = one per rank. "
        "One process with rollout_shards=K collects what K ranks do (a multiple of the number of ranks)")
    dist_timeout_s: float = key(
        300.0, "seconds a rank waits on the others in a collective before the job fails (> 0)")


@dataclass
class Config:
    env: EnvConfig = field(default_factory=EnvConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    lora: LoraConfig = field(default_factory=LoraConfig)
    prompt: PromptConfig = field(default_factory=PromptConfig)
    rollout: RolloutConfig = field(default_factory=lambda: rollout_section()())
    algorithm: AlgorithmConfig = field(default_factory=lambda: algorithm_section()())
    grouping: GroupingConfig = field(default_factory=GroupingConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


AlgorithmConfig.__doc__ = (AlgorithmKeys.__doc__ or "").format(names=" | ".join(algorithm_names()))
SECTIONS = {f.name: f.type for f in dataclasses.fields(Config)}
