"""The PPO critic: a linear value head on the policy's last hidden state, save and load (its forward pass is
:func:`gigpo.train.update.logprobs.policy_forward` with ``head=``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

VALUE_HEAD_FILE = "value_head.safetensors"


class ValueHead(torch.nn.Module):
    """V(s) = w · h + b, with h the policy's final hidden state at the last prompt token of a step.

    Zero-initialised, so the first iteration's critic predicts 0 everywhere (GAE then starts as Monte-Carlo
    returns) instead of random noise.
    """

    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(self.linear.weight)
        torch.nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(hidden.to(self.linear.weight.dtype)).squeeze(-1)  # float32 unless made double


def hidden_size_of(model: Any) -> int:
    cfg = getattr(model, "config", None)
    size = getattr(cfg, "hidden_size", None) or getattr(getattr(cfg, "text_config", None), "hidden_size", None)
    if not size:
        raise ValueError("cannot attach a value head: the model config has no hidden_size")
    return int(size)


def save_value_head(head: ValueHead, path: Path) -> None:
    save_file({k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}, str(path))


def load_value_head(head: ValueHead, path: Path) -> None:
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: this checkpoint was not saved by a run with a critic")
    head.load_state_dict(load_file(str(path)))

