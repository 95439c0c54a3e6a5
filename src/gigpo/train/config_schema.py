"""The configuration's sections as typed dataclasses: every key, its type, default and description. The
description is data on the field (``key(default, "description")`` stores it as ``metadata["doc"]``), read by
``gigpo train --help`` and by the test that every key has one; allowed values come from the type (a ``Literal``'s
choices) and, for ranges, from the description. Loading lives in :mod:`gigpo.train.config_load`, checks in
:mod:`gigpo.train.config_check`.

Every ``float`` key must be finite and every ``int`` key fit in 64 bits (checked for all keys, see
:func:`gigpo.train.config_check.validate`); ranges are checked per key.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from gigpo.algo.registry import registered
from gigpo.train.algorithms import algorithm_names


def key(default: Any = dataclasses.MISSING, doc: str = "", *, factory: Any = None) -> Any:
    """One config key: its default (or ``factory`` for a mutable one) and its description, kept as data on the
    dataclass field. New keys: ``name: type = key(default, "what it means; allowed values")``."""
    if factory is not None:
        return field(default_factory=factory, metadata={"doc": doc})
    return field(default=default, metadata={"doc": doc})


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
    history_length: int = key(2, "last-k (observation, action) pairs shown in the prompt")
    instructions: bool = key(
        True,
        "include the env's rules as the system message (a random-init model cannot read them; dropping the "
        "constant text makes its steps several times cheaper)")
    show_admissible: bool = key(True, "list the admissible actions when the env knows them")
    max_prompt_tokens: int = key(2048, "history shrinks, then the observation is truncated to fit")
    require_think: bool = key(False, 'with "think-action", a response without <think>…</think> is invalid')


@dataclass
class RolloutConfig:
    """Collection: ``groups`` tasks × ``group_size`` trajectories per iteration."""

    groups: int = key(8, "B: distinct tasks (initial states) per iteration")
    group_size: int = key(4, "N: trajectories per task, all reset with the same seed")
    max_steps: int = key(0, "per-episode step cap; 0 = the env's own cap")
    max_response_tokens: int = key(64, "tokens one response (one agent turn) may have (>= 1)")
    temperature: float = key(1.0, "sampling temperature of the rollout (>= 0; 0 = greedy)")
    top_p: float = key(
        1.0, "nucleus sampling: sample from the smallest token set with this much probability, in (0, 1]")
    invalid_penalty: float = key(-0.1, "reward of an unparseable or inadmissible response (state unchanged)")
    mode: Literal["step", "concat"] = key(
        "step",
        '"step": a fresh prompt per turn (history window); "concat": the whole interaction is one sequence '
        "(RAGEN)")
    max_context_tokens: int = key(
        0, "concat: sequence limit incl. the next response; 0 = the model's max positions")
    context_limit_policy: Literal["stop", "truncate"] = key(
        "stop",
        'concat, when the next turn would not fit: "stop" ends the episode, "truncate" drops the oldest '
        "turns")
    dynamic_sampling: bool = key(
        False,
        "DAPO: drop groups whose episode returns are all equal, collect more rounds until ``groups`` groups "
        "are kept")
    max_rounds: int = key(4, "dynamic sampling: at most this many collection rounds per iteration")
    overlong_buffer: float = key(
        0.0, "DAPO soft overlong punishment: buffer as a fraction of max_response_tokens (0 = off)")
    overlong_penalty: float = key(1.0, "reward added at the full length is -overlong_penalty (linear ramp)")
    env_timeout_s: float = key(
        60.0, "seconds one env reset/step may take; a slower (hung) env ends its trajectory as failed and is "
        "replaced")
    env_workers: Literal["inline", "process", "ray"] = key(
        "inline",
        'where env calls run: "inline" (a watchdog thread; a hung env is abandoned), "process" (one worker '
        "process per env; a hung env is killed and a turn's steps run in parallel — for slow or crash-prone "
        'envs) or "ray" (Ray actors, local or on rollout.ray_address; needs the [ray] extra)')
    num_env_workers: int = key(
        0,
        "ray: actors hosting the envs, each env pinned to one (round-robin); 0 = one actor per env. A hung "
        "or dead actor fails every trajectory it hosts this turn and is replaced")
    ray_address: str = key(
        "", 'ray: the cluster to join ("auto", "ray://host:10001"); empty = a local ray.init')
    engine: Literal["hf", "openai", "vllm"] = key(
        "hf",
        "generation: \"hf\" (HF generate on the learner's model), \"openai\" (OpenAI-compatible completions "
        'servers at rollout.engine_urls: gigpo serve or vLLM, weights pushed after each update) or "vllm" '
        "(in-process vllm.LLM, CPU or CUDA; [vllm] extra). The names are gigpo.rollout.engines.ENGINES")
    engine_urls: str = key(
        "", "openai: comma-separated base URLs (http://host:port/v1); each turn's prompts are split over them")
    engine_model: str = key("", 'openai: the served model id sent as "model"; empty = model.name')
    engine_timeout_s: float = key(300.0, "openai: socket timeout of one generation request")
    engine_max_retries: int = key(
        5, "openai: retries of a failed request (exponential backoff), then the run stops")
    max_staleness: int = key(
        0,
        "openai: weights versions a server may lag behind the learner (a failed push tolerated); 0 = never "
        "stale. rollout.async: s >= 1, the batch of iteration k is sampled by version max(0, k - 1 - s)")
    async_: bool = key(
        False,
        "rollout.async (spelled async or async_): true overlaps rollout and update — the next iterations' "
        "batches are collected (engine hf: in a worker process with its own CPU copy of the policy; engine "
        "openai: on the servers, each pinned to the batch's version; engine vllm: refused) while "
        "the learner updates, each batch by one policy version, rollout.max_staleness (>= 1) versions "
        "behind; pair it with optim.offpolicy_correction (docs/results/async.md)")
    weights_dir: str = key(
        "", "openai: directory the learner writes pushed weights to, readable by the servers (pass the same "
        "directory to gigpo serve --weights-dir); empty = RUN_DIR/pushed_weights")
    weight_sync: Literal["auto", "full", "lora"] = key(
        "auto", 'openai: how servers receive weights: "full" (every weight: gigpo serve /v1/reload_weights, '
        'vLLM /collective_rpc reload_weights), "lora" (a LoRA learner\'s adapter per version: vLLM '
        '/v1/load_lora_adapter) or "auto" (lora for a LoRA learner on vLLM, else full); docs/serving.md')
    engine_api_key: str = key(
        "", "openai: API key sent as 'Authorization: Bearer KEY' (generation and weight pushes); empty = the "
        "GIGPO_API_KEY environment variable, else none. Prefer the variable: config.yaml is saved in the run")
    vllm_enforce_eager: bool = key(
        False, "vllm: no torch.compile / graph capture (faster start, slower steps); false compiles once per "
        "model into a stable cache (VLLM_CACHE_ROOT, default ~/.cache/vllm)")
    decoding: Literal["free", "constrained"] = key(
        "free", '"free": the model writes any text, parsed into an action; "constrained": at each token only '
        "continuations of an admissible action (the env's info[\"admissible_actions\"]) may be emitted, so "
        "every action is valid (gigpo.agent.constrained); the learner re-applies the same masks")


@dataclass
class AlgorithmKeys:
    """Advantage estimator and loss. ``name``: {names} (``+step`` adds GiGPO's step-level term;
    docs/algorithms.md)."""

    name: str = key(
        "gigpo", "the algorithm (the table at the end of --help); a registered estimator's name works too")
    episode_estimator: Literal["grpo", "rloo"] = key("grpo", "episode-level term used by ``gigpo``")
    gamma: float = key(0.95, "γ of the step-level discounted return R_t = r_t + γ R_{t+1}")
    step_weight: float = key(1.0, "ω in A = A_E + ω A_S")
    normalize: Literal["mean_std", "mean"] = key(
        "mean_std",
        'group normalisation of both terms: "mean_std" (A = (x − mean) / std) or "mean" (A = x − mean)')
    std_ddof: int = key(
        1,
        "ddof of the std in normalize=\"mean_std\" (both terms): 1 = torch.std, as the authors' code, verl "
        "and TRL")
    compat: Any = key(
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


@dataclass
class GroupingConfig:
    """How anchor states form step groups. ``exact``: identical observation text; ``state_key``: the env's true
    state; ``ro`` / ``indel`` / ``minhash``: text similarity ≥ ``threshold`` on the observation."""

    metric: Literal["exact", "state_key", "ro", "indel", "minhash"] = key(
        "exact",
        "anchor matching: \"exact\" observation text, the env's true \"state_key\", or text similarity ≥ "
        'threshold by "ro" (Ratcliff–Obershelp), "indel" (rapidfuzz) or "minhash" (token Jaccard estimate)')
    threshold: float = key(0.9, "similarity metrics: two anchors match when their score is ≥ this, in (0, 1]")
    history: int = key(
        0, "k > 0: a step's anchor is its key plus the keys of its trajectory's k previous steps (exact / "
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
    warmup_iterations: int = key(0, "linear warm-up from 0 over the first iterations")
    weight_decay: float = key(0.0, "AdamW weight decay (>= 0)")
    betas: tuple = key((0.9, 0.999), "AdamW's (β1, β2), each in [0, 1)")
    grad_clip: float = key(1.0, "clip the gradient's global norm to this (0 = no clipping)")
    ppo_epochs: int = key(1, "passes over each rollout (>= 1)")
    mini_batches: int = key(1, "optimizer steps per epoch (the rollout is split into this many mini-batches)")
    micro_batch_size: int = key(16, "rows per forward pass; sets peak memory, not the math")
    clip_low: float = key(0.2, "ε_low of the clipped ratio (1 - ε_low)")
    clip_high: float = key(0.2, "ε_high (1 + ε_high); > clip_low is DAPO's clip-higher")
    loss_agg: Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-sum-over-constant"] = key(
        "token-mean",
        'how token losses become one number: "token-mean" over all tokens, "seq-mean-token-mean" (mean per '
        'sequence, then over sequences), "seq-mean-token-sum", "seq-sum-over-constant" (Dr. GRPO)')
    kl_coef: float = key(0.0, "> 0 keeps a frozen reference model and adds a KL penalty to the loss")
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
        10, "0 disables periodic evaluation (a final one still runs when eval_episodes > 0)")
    eval_episodes: int = key(64, "held-out episodes per evaluation (0 = no evaluation)")
    eval_temperature: float = key(0.0, "0 = greedy")
    checkpoint_every: int = key(10, "iterations between checkpoints (0 = only at the end)")
    keep_checkpoints: int = key(2, "newest checkpoints of this run to keep (>= 1)")
    sample_trajectories: int = key(2, "trajectories written as readable text per iteration")
    progress: bool = key(True, "show one progress bar (false: one log line per iteration)")
    threads: int = key(
        0, "torch CPU threads (0 = torch's default). Tiny models on small CPUs run faster on 1 thread: their "
        "ops are too small to split, and a busy core makes the other thread wait.")
    tensorboard: bool = key(False, 'the same as "tensorboard" in train.loggers (kept for old configs)')
    loggers: Any = key(
        factory=list, doc='trackers that get the config, every metric, the curves, the sample tables and the '
        'health alerts: a list of "tensorboard" (RUN_DIR/tensorboard), "wandb" (offline into RUN_DIR/wandb '
        'unless a W&B key is set; extra [wandb]), "mlflow" (file store RUN_DIR/mlruns unless '
        'MLFLOW_TRACKING_URI is set; extra [mlflow]); [] = none (gigpo.train.trackers)')
    sample_groups: int = key(
        4, "task groups per iteration written whole (every trajectory and step, with R_t, A_E, A_S, A and its "
        "step group) to samples/iter_N.jsonl for `gigpo view`; 0 = none (>= 0)")
    sample_max_bytes: int = key(
        524288, "cap on one samples/iter_N.jsonl in bytes (>= 4096): long texts are cut, groups past it left out")
    health_collapse_high: float = key(
        0.9, "health alert collapse: sampled success reached >= this, then fell to <= health_collapse_low "
        "within health_collapse_window iterations (in [0, 1])")
    health_collapse_low: float = key(0.5, "see health_collapse_high (in [0, 1], < health_collapse_high)")
    health_collapse_window: int = key(50, "iterations of the collapse alert's window (0 disables the alert)")
    health_entropy_ratio: float = key(
        0.1, "health alert entropy: entropy fell to <= this fraction of its first iterations' mean while "
        "sampled success is below health_collapse_high (in [0, 1); 0 disables)")
    health_no_signal_iterations: int = key(
        10, "health alert no_signal: this many iterations in a row with every advantage 0 (every group's "
        "returns equal); 0 disables")
    overwrite: bool = key(
        False,
        "a fresh run into a directory that holds checkpoints or metrics: false refuses, true clears it first")
    max_failed_iterations: int = key(
        3, "stop (exit 1) after this many consecutive iterations in which every trajectory failed")
    parallel: Literal["auto", "none", "ddp", "fsdp"] = key(
        "auto",
        'data parallelism under ``torchrun`` (docs/scaling.md): "ddp" replicates the model, "fsdp" shards it '
        '(FSDP2, per decoder layer); "auto": ddp when WORLD_SIZE > 1. One process always trains plainly.')
    rollout_shards: int = key(
        0, "S: the rollout's groups are cut into S shards, each sampled from its own seed; 0 = one per rank. "
        "One process with rollout_shards=K collects what K ranks do (a multiple of the number of ranks)")
    dist_timeout_s: float = key(
        300.0, "seconds a rank waits on the others in a collective before the job fails")


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


AlgorithmConfig.__doc__ = (AlgorithmKeys.__doc__ or "").format(names=" | ".join(algorithm_names()))
SECTIONS = {f.name: f.type for f in dataclasses.fields(Config)}
