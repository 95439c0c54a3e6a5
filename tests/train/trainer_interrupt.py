"""A Ctrl-C at a chosen iteration, for the resume tests of the sync and async trainers."""

from __future__ import annotations

from typing import Any


def interrupt_at(monkeypatch: Any, trainer: Any, at: int) -> None:
    """Make ``trainer.train()`` raise KeyboardInterrupt when it reaches iteration ``at`` (``monkeypatch.undo()``
    restores the real ``iteration``)."""
    real = trainer.iteration

    def iteration(it: int) -> dict:
        if it == at:
            raise KeyboardInterrupt
        return real(it)

    monkeypatch.setattr(trainer, "iteration", iteration)
