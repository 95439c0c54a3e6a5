"""The up-front memory check: a rollout shape that cannot fit in this machine's memory is one config error, not a
climb to swap and a ``MemoryError`` traceback minutes later.

One iteration keeps, for every trajectory, an env instance and its summary, and for every step taken the row's
prompt and response token ids (lists of Python ints, ``gigpo.rollout.batch.RolloutBatch``). So a batch needs at
least::

    bytes ≥ T · (TRAJECTORY_BYTES + S · (P + R) · BYTES_PER_TOKEN),   T = rollout.groups × rollout.group_size

with S the step cap (``rollout.max_steps``, else the env's ``max_steps``), P the prompt cap
(``prompt.max_prompt_tokens``) and R the response cap (``rollout.max_response_tokens``). The constants are floors
— measured: a gridgoal env after reset holds 510 bytes (tracemalloc); a list element is an 8-byte pointer
before the int object it points to — so the estimate never exceeds what the run would really need, and a refusal
is always right; log-probs, the model's activations and the optimizer state come on top. The limit is the
machine's physical memory (or the cgroup's ``memory.max`` when lower); only shapes beyond it are refused.
Python ints never overflow here, so ``rollout.groups=2^63-1`` is refused the same way.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Floor of what one trajectory holds besides its rows (an env instance after reset: 510 bytes measured).
TRAJECTORY_BYTES = 512
#: Floor per stored token: one list slot (8-byte pointer) of its id.
BYTES_PER_TOKEN = 8


def memory_limit_bytes() -> int | None:
    """Physical memory, or the cgroup v2/v1 limit when that is lower; None when neither can be read."""
    limits = []
    try:
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        pass
    for f in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(f).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # "max" or a huge sentinel: no limit
            limits.append(int(text))
    return min(limits) if limits else None


def env_step_cap(cfg) -> int:
    """``rollout.max_steps``, else the env's cap (its ``max_steps`` option or class attribute), else 1."""
    if cfg.rollout.max_steps:
        return int(cfg.rollout.max_steps)
    opt = cfg.env.options.get("max_steps")
    if isinstance(opt, int) and not isinstance(opt, bool) and opt > 0:
        return opt
    try:
        from gigpo.envs.registry import get_spec

        cap = getattr(get_spec(cfg.env.name).load(), "max_steps", None)
    except Exception:  # noqa: BLE001 - an unknown env is reported by the env checks, not here
        cap = None
    return cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else 1


def batch_bytes_floor(cfg) -> tuple[int, str]:
    """``(bytes, formula with the numbers)``: the floor of one iteration's rollout memory (module docstring)."""
    r = cfg.rollout
    trajectories = int(r.groups) * int(r.group_size)
    steps = env_step_cap(cfg)
    tokens = int(cfg.prompt.max_prompt_tokens) + int(r.max_response_tokens)
    total = trajectories * (TRAJECTORY_BYTES + steps * tokens * BYTES_PER_TOKEN)
    how = (f"{r.groups} groups x {r.group_size} trajectories x ({TRAJECTORY_BYTES} B + {steps} steps x {tokens} "
           f"tokens x {BYTES_PER_TOKEN} B)")
    return total, how


def human_bytes(n: int) -> str:
    for unit, size in (("EB", 1 << 60), ("PB", 1 << 50), ("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


def check_rollout_memory(cfg, limit: int | None = None) -> None:
    """ConfigError when one iteration's rollout cannot fit in memory (``limit``: default the machine's)."""
    from gigpo.train.config.error import ConfigError

    limit = memory_limit_bytes() if limit is None else limit
    if limit is None:
        return
    need, how = batch_bytes_floor(cfg)
    if need > limit:
        raise ConfigError(
            f"rollout.groups={cfg.rollout.groups} x rollout.group_size={cfg.rollout.group_size} needs at least "
            f"{human_bytes(need)} per iteration ({how}), more than this machine's {human_bytes(limit)} of memory; lower "
            "rollout.groups, rollout.group_size, rollout.max_steps or prompt.max_prompt_tokens")


# ------------------------------------------------------------------------------------- the model at its prompts
#: RSS of a process that has imported torch, transformers and gigpo's trainer, before any model (measured: 0.32 GiB,
#: ``python -c "import torch, transformers, gigpo.train.trainer, resource; print(resource.getrusage(0).ru_maxrss)"``)
PROCESS_BYTES = int(0.32 * 2**30)
#: Saved activations per token and layer of one training forward/backward, in float32 values: about 16
#: hidden-sized tensors (two RMSNorms with their float32 intermediates, q/k/v with rotary, the attention output,
#: o-projection, residual sums, the LoRA inputs), 4 intermediate-sized ones (gate, up, SiLU, their product) and 2
#: per attention head and key position (the scores and their softmax). Checked against a measured peak:
#: SmolLM2-135M + LoRA on ConnectFour, tests/train/test_memory_estimate.py.
HIDDEN_TENSORS, INTERMEDIATE_TENSORS, SCORE_TENSORS = 16, 4, 2


def model_dims(model) -> dict[str, int]:
    """``layers, hidden, intermediate, heads, kv_dim, params, trainable`` of a (possibly LoRA-wrapped) causal LM."""
    c = getattr(model, "config", None)
    hidden = int(getattr(c, "hidden_size", 0) or 0)
    heads = int(getattr(c, "num_attention_heads", 1) or 1)
    kv_heads = int(getattr(c, "num_key_value_heads", heads) or heads)
    return {"layers": int(getattr(c, "num_hidden_layers", 0) or 0), "hidden": hidden,
            "intermediate": int(getattr(c, "intermediate_size", 4 * hidden) or 4 * hidden), "heads": heads,
            "kv_dim": hidden * kv_heads // heads,
            "params": sum(p.numel() for p in model.parameters()),
            "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
            "bytes_per_param": next(iter(model.parameters())).element_size()}


def probe_prompt_tokens(cfg, make_env, builder, steps: int = 4) -> int:
    """The longest prompt, in tokens, of the first ``steps`` steps of one episode (seed 2^30, the first admissible
    action each step): the real prompt length at this config's prompt settings, history included."""
    env = make_env()
    try:
        obs, info = env.reset(2**30)
        history: list[tuple[str, str]] = []
        longest = 0
        for _ in range(steps):
            info = info if isinstance(info, dict) else {}
            hist = history[-cfg.prompt.history_length:] if cfg.prompt.history_length else []
            ids = builder.build(env.instructions, str(info.get("task", "")), hist, obs,
                                info.get("admissible_actions"))
            longest = max(longest, len(ids))
            actions = info.get("admissible_actions") or []
            if not actions:
                break
            nxt, _, done, info = env.step(actions[0])
            history.append((obs, actions[0]))
            obs = nxt
            if done:
                break
        return longest
    finally:
        env.close()


def peak_bytes(cfg, dims: dict[str, int], prompt_tokens: int) -> tuple[int, str]:
    """``(bytes, how)``: the estimated peak of one iteration — the process and the model's weights (with the
    trainable parameters' gradients and Adam moments) plus the larger of the rollout's KV cache and one training
    micro-batch's saved activations at ``prompt_tokens`` + the response budget."""
    tokens = int(prompt_tokens) + int(cfg.rollout.max_response_tokens)
    layers, mb = dims["layers"], int(cfg.optim.micro_batch_size)
    weights = dims["params"] * dims["bytes_per_param"] + dims["trainable"] * 4 * 3
    per_token_layer = 4 * (HIDDEN_TENSORS * dims["hidden"] + INTERMEDIATE_TENSORS * dims["intermediate"]
                           + SCORE_TENSORS * dims["heads"] * tokens)
    activations = mb * tokens * layers * per_token_layer
    trajectories = int(cfg.rollout.groups) * int(cfg.rollout.group_size)
    kv = trajectories * tokens * layers * 2 * dims["kv_dim"] * dims["bytes_per_param"]
    total = PROCESS_BYTES + weights + max(activations, kv)
    how = (f"process and model {human_bytes(PROCESS_BYTES + weights)} + a micro-batch's activations "
           f"{human_bytes(activations)} (optim.micro_batch_size={mb} x {tokens} tokens x {layers} layers)")
    return total, how


def check_peak_memory(cfg, dims: dict[str, int], prompt_tokens: int, limit: int | None = None) -> str | None:
    """One warning line when the estimated peak exceeds this machine's memory (``limit``: default the machine's),
    naming the keys that lower it; None when it fits."""
    limit = memory_limit_bytes() if limit is None else limit
    need, how = peak_bytes(cfg, dims, prompt_tokens)
    if limit is None or need <= limit:
        return None
    return (f"one iteration is estimated to peak at {human_bytes(need)} ({how}; prompts of {prompt_tokens} tokens), "
            f"more than this machine's {human_bytes(limit)}: lower optim.micro_batch_size (it sets the peak, not the "
            "math), prompt.max_prompt_tokens or prompt.history_length, or set model.gradient_checkpointing=true")


def warn_peak_memory(cfg, model, builder, make_env) -> str | None:
    """At a run's start (model loaded, nothing collected yet): probe the real prompt length with one env
    (``make_env()``) and warn, in one line, when the estimated peak exceeds the machine's memory
    (:func:`check_peak_memory`)."""
    import logging

    from gigpo.train.preflight.env_probe import probe

    if check_peak_memory(cfg, model_dims(model), int(cfg.prompt.max_prompt_tokens)) is None:
        return None  # it fits even at the prompt cap: no env episode needs to be probed
    ok, tokens = probe(lambda: probe_prompt_tokens(cfg, make_env, builder))
    if not ok:  # an estimate never stops or hangs a run: the env's own faults come from the rollout
        return None
    msg = check_peak_memory(cfg, model_dims(model), tokens)
    if msg:
        logging.getLogger("gigpo.train.preflight.memory_estimate").warning(msg)
    return msg
