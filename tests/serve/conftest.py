"""Shared fixtures of the serving tests: one torch thread, a briefly trained gridgoal checkpoint, a random one."""

from __future__ import annotations

import pytest
import torch
from serve_sft import train_gridgoal_checkpoint


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    # On a shared 2-core box, torch's default thread pool spins against other processes (measured: 5 s vs 0.1 s
    # per tiny training step); one thread keeps these tests fast. Restored afterwards.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def trained_checkpoint(tmp_path_factory):
    """A real checkpoint dir: the tiny model after 15 supervised steps towards the oracle move."""
    return train_gridgoal_checkpoint(tmp_path_factory.mktemp("ckpt") / "model", steps=15)


@pytest.fixture(scope="session")
def chaotic_checkpoint(tmp_path_factory):
    """The tiny model with large random weights (initializer_range=1): its greedy text depends on every prompt
    token, so any difference between two prompt paths shows up in the responses."""
    from gigpo.models import load_model, save_pretrained

    bundle = load_model("tiny", device="cpu", seed=3, tiny={"initializer_range": 1.0})
    return save_pretrained(bundle, tmp_path_factory.mktemp("chaos") / "model")
