"""LoRA options: validation of the `lora={...}` dict and wrapping a causal LM with a seeded peft adapter."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import PreTrainedModel

#: Defaults of every accepted key; anything else in ``lora={...}`` is an error.
LORA_DEFAULTS: dict[str, Any] = {"r": 8, "alpha": 16.0, "dropout": 0.0, "target_modules": "all-linear"}


@contextmanager
def quiet_peft() -> Iterator[None]:
    """Silence a known, harmless deprecation that peft triggers in transformers 5 (``is_gradient_checkpointing``)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        yield


def validate_lora(lora: dict[str, Any]) -> dict[str, Any]:
    """Return the full LoRA option dict (defaults filled in) or raise ValueError naming the bad key/value.

    ``r``: int > 0; ``alpha``: number > 0 (scaling = alpha / r); ``dropout``: float in [0, 1);
    ``target_modules``: ``"all-linear"`` or a non-empty list of module-name suffixes (e.g. ``["q_proj", "v_proj"]``).
    """
    if not isinstance(lora, dict):
        raise ValueError(f"lora must be a dict with keys {sorted(LORA_DEFAULTS)}, got {type(lora).__name__}")
    unknown = sorted(set(lora) - set(LORA_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown lora option(s) {unknown}; allowed: {sorted(LORA_DEFAULTS)}")
    cfg = {**LORA_DEFAULTS, **lora}
    r, alpha, dropout, targets = cfg["r"], cfg["alpha"], cfg["dropout"], cfg["target_modules"]
    if isinstance(r, bool) or not isinstance(r, int) or r <= 0:
        raise ValueError(f"lora.r must be a positive int, got {r!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or alpha <= 0:
        raise ValueError(f"lora.alpha must be a positive number, got {alpha!r}")
    if isinstance(dropout, bool) or not isinstance(dropout, int | float) or not 0 <= dropout < 1:
        raise ValueError(f"lora.dropout must be a number in [0, 1), got {dropout!r}")
    if isinstance(targets, str):
        if targets != "all-linear":
            raise ValueError(f"lora.target_modules must be 'all-linear' or a list of names, got {targets!r}")
    elif not (
        isinstance(targets, list | tuple) and targets and all(isinstance(t, str) and t for t in targets)
    ):
        raise ValueError(
            f"lora.target_modules must be 'all-linear' or a non-empty list of names, got {targets!r}"
        )
    else:
        targets = list(targets)
    return {"r": r, "alpha": float(alpha), "dropout": float(dropout), "target_modules": targets}


def apply_lora(model: PreTrainedModel, lora: dict[str, Any], seed: int) -> PeftModel:
    """Wrap ``model`` with a fresh LoRA adapter; A is initialised from ``seed`` (global RNG untouched), B = 0.

    Since B = 0 the wrapped model's outputs equal the base model's until the adapter is trained. Only adapter
    parameters are trainable. Raises ValueError when ``target_modules`` matches no module of the model.
    """
    cfg = validate_lora(lora)
    peft_cfg = LoraConfig(
        r=cfg["r"],
        lora_alpha=cfg["alpha"],
        lora_dropout=cfg["dropout"],
        target_modules=cfg["target_modules"],
        bias="none",
        task_type="CAUSAL_LM",
    )
    with torch.random.fork_rng(devices=[]), quiet_peft():
        torch.default_generator.manual_seed(seed)  # CPU only: CUDA RNG untouched
        return get_peft_model(model, peft_cfg)
