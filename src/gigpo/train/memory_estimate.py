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
    from gigpo.train.config_error import ConfigError

    limit = memory_limit_bytes() if limit is None else limit
    if limit is None:
        return
    need, how = batch_bytes_floor(cfg)
    if need > limit:
        raise ConfigError(
            f"rollout.groups={cfg.rollout.groups} x rollout.group_size={cfg.rollout.group_size} needs at least "
            f"{human_bytes(need)} per iteration ({how}), more than this machine's {human_bytes(limit)} of memory; lower "
            "rollout.groups, rollout.group_size, rollout.max_steps or prompt.max_prompt_tokens")
