"""The weights a server or an inference engine should hold for a learner: the plain model, LoRA merged in."""

from __future__ import annotations

from typing import Any

import torch


def merged_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The plain (HF-named) state dict of ``model``; for a PEFT LoRA model, base weights with every adapter merged
    (``W + scaling · B @ A``), without modifying the model."""
    if not hasattr(model, "peft_config"):
        return {k: v.detach() for k, v in model.state_dict().items()}
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    out: dict[str, torch.Tensor] = {}
    for name, module in base.named_modules():
        if isinstance(module, LoraLayer):
            w = module.get_base_layer().weight.detach().clone()
            for adapter in module.active_adapters:
                if adapter in module.lora_A:
                    a, b = module.lora_A[adapter].weight, module.lora_B[adapter].weight
                    w += (b.detach().float() @ a.detach().float()).to(w.dtype) * module.scaling[adapter]
            out[f"{name}.weight"] = w
            bias = getattr(module.get_base_layer(), "bias", None)
            if bias is not None:
                out[f"{name}.bias"] = bias.detach()
    for key, value in base.state_dict().items():
        if "lora_" in key or ".base_layer." in key:
            continue
        out.setdefault(key, value.detach())
    return out
