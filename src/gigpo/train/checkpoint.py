"""Atomic, resumable checkpoints: model (HF safetensors), optimizer, RNG states and iteration."""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

STATE_FILE = "trainer_state.json"


def checkpoint_dir(run_dir: Path, iteration: int) -> Path:
    return run_dir / "checkpoints" / f"iter_{iteration:06d}"


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first (a directory counts only once its state file exists)."""
    root = run_dir / "checkpoints"
    if not root.exists():
        return []
    return sorted(p for p in root.glob("iter_*") if (p / STATE_FILE).exists())


def save_checkpoint(
    run_dir: Path, iteration: int, save_model: Any, optimizer: torch.optim.Optimizer, extra: dict, keep: int
) -> Path:
    """Write into a temporary directory, then rename: a crash or Ctrl-C never leaves a half checkpoint.

    ``save_model(path)`` writes the model/tokenizer. Older checkpoints beyond ``keep`` are removed afterwards.
    """
    final = checkpoint_dir(run_dir, iteration)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    save_model(tmp / "model")
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(
        {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()},
        tmp / "rng.pt",
    )
    state = {"iteration": iteration, **extra}
    (tmp / STATE_FILE).write_text(json.dumps(state, indent=2, default=str))
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in list_checkpoints(run_dir)[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def load_trainer_state(ckpt: Path) -> dict:
    return json.loads((ckpt / STATE_FILE).read_text())


def restore_rng(ckpt: Path) -> None:
    rng = torch.load(ckpt / "rng.pt", weights_only=False)
    torch.set_rng_state(rng["torch"])
    np.random.set_state(rng["numpy"])
    random.setstate(rng["python"])
