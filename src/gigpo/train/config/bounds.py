"""Bounds that mean something, checked with the rest of the config (no torch, no model load):

* **token caps** against the model's context length, where it is known without loading anything (the tiny
  model's options, a local model directory's ``config.json``; :func:`gigpo.train.compose.check_model_options`
  checks the resolved model again before it loads): a cap above the context is one error naming the context,
  not a memory estimate for tokens the model could never read;
* **rollout.max_staleness** against what the run can use: a batch is at most ``train.iterations`` versions old,
  and the async rollout keeps one CPU copy of the model per version it may still serve;
* **secrets**: a masked value (:data:`gigpo.train.config.secrets.MASK`, what a shared config shows) used as a
  key, and an API key that no HTTP header can carry (non-ASCII or control characters).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gigpo.safefiles import read_regular
from gigpo.train.config.error import ConfigError
from gigpo.train.config.secrets import MASK, masked_values

#: the tiny model's context (``gigpo.models.tiny.TINY_DEFAULTS["max_position_embeddings"]``; a test keeps the
#: two equal). Not imported from there: that module imports torch, and these checks run before any model code.
TINY_CONTEXT = 1024
#: ``config.json`` keys that give a model's context length, in the order transformers' configs use them
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def context_from_dir(path: str | Path) -> int | None:
    """The context length in a model directory's ``config.json`` (None: no such file or key)."""
    try:
        raw, cut = read_regular(Path(path) / "config.json", 4 * 1024 * 1024)
        data = json.loads(raw) if not cut else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    for k in CONTEXT_KEYS:
        v = data.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def known_context(cfg: Any) -> int | None:
    """The context length of ``cfg.model`` when it is known without loading code or weights."""
    m = cfg.model
    if m.name == "tiny":
        v = (m.tiny or {}).get("max_position_embeddings", TINY_CONTEXT)
        return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None
    try:
        path = Path(m.name).expanduser()
        return context_from_dir(path) if path.is_dir() else None
    except (OSError, ValueError):
        return None


def check_token_caps(cfg: Any, context: int | None, model: str | None = None) -> None:
    """ConfigError when a token cap is above the model's ``context`` length (None: unknown, nothing checked).
    ``prompt.max_prompt_tokens`` at its default is exempt: the collector clamps it to the context minus the
    response (the default serves models of any context); a value the user chose is taken at its word."""
    if not context:
        return
    from gigpo.train.config.schema import PromptConfig

    r = cfg.rollout
    name = model or cfg.model.name
    room = context - r.max_response_tokens
    if r.max_response_tokens >= context:
        raise ConfigError(f"rollout.max_response_tokens={r.max_response_tokens} is not below the context length "
                          f"of model {name} ({context} tokens): no room is left for the prompt")
    p = cfg.prompt.max_prompt_tokens
    if p > context and p != PromptConfig().max_prompt_tokens:
        raise ConfigError(f"prompt.max_prompt_tokens={p} is above the context length of model {name} ({context} "
                          f"tokens): a prompt can hold at most {room} tokens next to rollout.max_response_tokens="
                          f"{r.max_response_tokens}; set prompt.max_prompt_tokens <= {room}")
    if r.concat.max_tokens > context:
        raise ConfigError(f"rollout.concat.max_tokens={r.concat.max_tokens} is above the context length of model "
                          f"{name} ({context} tokens); set it <= {context} (0 = the context length)")


def staleness_bound(cfg: Any) -> int:
    """The largest ``rollout.max_staleness`` the run can use: its batches are at most ``train.iterations - 1``
    versions old (1 stays allowed, async needs it)."""
    return max(1, int(cfg.train.iterations) - 1)


def check_async_staleness(cfg: Any) -> None:
    r = cfg.rollout
    if not r.async_:
        return
    if r.max_staleness < 1:
        raise ConfigError("rollout.async=true needs rollout.max_staleness >= 1 (the policy versions of lag that let "
                          f"rollout overlap the update), got {r.max_staleness}")
    bound = staleness_bound(cfg)
    if r.max_staleness > bound:
        raise ConfigError(f"rollout.max_staleness={r.max_staleness} is more than this run can use: with "
                          f"train.iterations={cfg.train.iterations} no batch is more than "
                          f"{max(0, int(cfg.train.iterations) - 1)} versions old, and "
                          "the async rollout keeps a CPU copy of the model per version; set it <= "
                          f"{bound} (1 or 2 absorb timing jitter)")


def snapshot_bytes(model: Any, keep: int) -> int:
    """Bytes of ``keep`` CPU copies of ``model``'s parameters and buffers (the async rollout's weight store)."""
    one = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    return int(one) * int(keep)


def check_secrets(cfg: Any) -> None:
    masked = masked_values(cfg)
    if masked:
        raise ConfigError(f"{masked[0]} holds the mask {MASK!r} of a shared or printed config, not a key: set the "
                          "key itself, or leave it empty and set the GIGPO_API_KEY environment variable")
    key = cfg.rollout.openai.api_key
    if key and not (key.isascii() and key.isprintable() and " " not in key):
        raise ConfigError("rollout.openai.api_key must be printable ASCII without spaces (it is sent in an HTTP "
                          "header, which carries nothing else)")
