"""The `tiny` model: a small random-init LlamaForCausalLM built from a config, seeded without global RNG effects."""

from __future__ import annotations

from typing import Any

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from gigpo.models.tokenizer import tiny_tokenizer

#: Architecture defaults: 122,688 parameters with the default 632-token vocabulary (tied embeddings).
TINY_DEFAULTS: dict[str, Any] = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "intermediate_size": 128,
    "max_position_embeddings": 1024,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-6,
    "initializer_range": 0.02,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "attention_dropout": 0.0,
}
#: Keys of ``tiny={...}`` that shape the tokenizer rather than the network.
TOKENIZER_KEYS: dict[str, Any] = {"extra_words": (), "english_words": True}


def tiny_config(tiny: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split and validate ``tiny`` overrides into (architecture kwargs, tokenizer kwargs), defaults filled in."""
    tiny = dict(tiny or {})
    unknown = sorted(set(tiny) - set(TINY_DEFAULTS) - set(TOKENIZER_KEYS))
    if unknown:
        raise ValueError(
            f"unknown tiny model option(s) {unknown}; allowed: {sorted(TINY_DEFAULTS) + sorted(TOKENIZER_KEYS)}"
        )
    arch = {**TINY_DEFAULTS, **{k: v for k, v in tiny.items() if k in TINY_DEFAULTS}}
    tok = {**TOKENIZER_KEYS, **{k: v for k, v in tiny.items() if k in TOKENIZER_KEYS}}
    tok["extra_words"] = tuple(tok["extra_words"])
    if (
        arch["hidden_size"] % arch["num_attention_heads"]
        or arch["num_attention_heads"] % arch["num_key_value_heads"]
    ):
        raise ValueError(
            "tiny model: hidden_size must be divisible by num_attention_heads, and num_attention_heads by "
            f"num_key_value_heads (got {arch['hidden_size']}, {arch['num_attention_heads']}, "
            f"{arch['num_key_value_heads']})"
        )
    return arch, tok


def build_tiny(tiny: dict[str, Any] | None, seed: int) -> tuple[LlamaForCausalLM, PreTrainedTokenizerFast]:
    """Build the tiny model (float32, CPU, eval mode) and its tokenizer.

    Contract: same (``tiny``, ``seed``) -> bitwise-identical weights; the global torch RNG state is the same
    before and after the call (initialisation runs inside ``torch.random.fork_rng``).
    """
    arch, tok_kwargs = tiny_config(tiny)
    tokenizer = tiny_tokenizer(tok_kwargs["extra_words"], bool(tok_kwargs["english_words"]))
    rope_theta = arch.pop("rope_theta")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
        **arch,
    )
    # fork_rng(devices=[]) restores only the CPU generator; the model is built on CPU so CUDA RNG is untouched.
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)  # CPU only: CUDA RNG untouched
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model.eval(), tokenizer
