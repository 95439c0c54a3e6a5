"""The flat table of step records the collector returns (docs/design.md "The data that flows")."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: The per-row columns of a :class:`RolloutBatch`, in field order: what copying, filtering and merging iterate.
COLUMNS = ("group_id", "traj_id", "step", "reward", "done", "action_valid", "observation", "state_key",
           "prompt_ids", "response_ids", "sampling_logprobs", "allowed_tokens")


@dataclass
class Trajectory:
    """Per-trajectory summary. ``failed``: its env hung, raised or broke the Env contract (``error`` says how and
    at which step); such trajectories carry no rows into training and are left out of :meth:`RolloutBatch.summary`."""

    traj_id: int
    group_id: int
    seed: int
    won: bool = False
    score: float = 0.0
    episode_return: float = 0.0
    length: int = 0
    #: the episode was cut by a time/step limit (the env's info["truncated"] or the rollout's step cap), not ended
    truncated: bool = False
    invalid_steps: int = 0
    failed: bool = False
    error: str = ""
    task: str = ""
    data_source: str = ""
    final_info: dict = field(default_factory=dict)
    #: branch rollouts: the trajectory it was branched from (-1: a root) and the step it was branched at (-1: a
    #: root); a branched trajectory's rows and transcript start at that step (the prefix's rows are the parent's)
    parent: int = -1
    branch_step: int = -1
    #: readable transcript lines: (observation, response text, action or error, reward), from ``first_step``
    transcript: list[tuple[str, str, str, float]] = field(default_factory=list)


    @property
    def first_step(self) -> int:
        """The step of its first row and transcript line: 0, or the branch step of a branched trajectory."""
        return max(self.branch_step, 0)


@dataclass
class RolloutBatch:
    """One row per agent step actually taken. Rows of a trajectory are contiguous here, but nothing downstream
    relies on that."""

    group_id: list[int] = field(default_factory=list)
    traj_id: list[int] = field(default_factory=list)
    step: list[int] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    done: list[bool] = field(default_factory=list)
    action_valid: list[bool] = field(default_factory=list)
    observation: list[str] = field(default_factory=list)  #: the observation the step acted on (text anchor)
    state_key: list[Any] = field(default_factory=list)  #: the env's true state before the step
    prompt_ids: list[list[int]] = field(default_factory=list)
    response_ids: list[list[int]] = field(default_factory=list)
    sampling_logprobs: list[list[float]] = field(default_factory=list)
    #: constrained decoding: per response token the allowed ids the sampler masked to (None = free token);
    #: None for a row decoded freely. The learner applies the same sets (gigpo.agent.constrained).
    allowed_tokens: list[list[list[int] | None] | None] = field(default_factory=list)
    trajectories: list[Trajectory] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.traj_id)

    def add_row(self, **row: Any) -> None:
        row.setdefault("allowed_tokens", None)  # free decoding: most callers never mention it
        for k, v in row.items():
            getattr(self, k).append(v)

    def drop_trajectories(self, traj_ids: set[int]) -> RolloutBatch:
        """A copy without the rows of ``traj_ids`` (their Trajectory entries are kept, marked as they are)."""
        keep = [i for i, t in enumerate(self.traj_id) if t not in traj_ids]
        out = RolloutBatch(trajectories=self.trajectories)
        for name in COLUMNS:
            col = getattr(self, name)
            setattr(out, name, [col[i] for i in keep])
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "group_id": np.asarray(self.group_id, dtype=np.int64),
            "traj_id": np.asarray(self.traj_id, dtype=np.int64),
            "step": np.asarray(self.step, dtype=np.int64),
            "reward": np.asarray(self.reward, dtype=np.float64),
        }

    def summary(self) -> dict[str, float]:
        """Episode statistics over trajectories that did not fail; ``failed_trajectories`` counts the others
        (``valid_action_rate``, ``steps`` and ``response_tokens`` are per row, and failed trajectories have none)."""
        ok = [t for t in self.trajectories if not t.failed]
        n = max(len(ok), 1)
        steps = max(len(self.action_valid), 1)
        return {
            "success_rate": sum(t.won for t in ok) / n,
            "score": sum(t.score for t in ok) / n,
            "episode_return": sum(t.episode_return for t in ok) / n,
            "episode_length": sum(t.length for t in ok) / n,
            "valid_action_rate": sum(self.action_valid) / steps,
            "failed_trajectories": float(len(self.trajectories) - len(ok)),
            "steps": float(len(self.traj_id)),
            "response_tokens": float(sum(len(r) for r in self.response_ids)),
        }


def merge_batches(parts: list[RolloutBatch]) -> RolloutBatch:
    """Concatenate batches, renumbering group and trajectory ids so they stay unique (and Trajectory objects,
    which are copied, agree with their rows)."""
    out = RolloutBatch()
    g_off = t_off = 0
    for b in parts:
        n0 = len(out)
        for name in COLUMNS:
            getattr(out, name).extend(getattr(b, name))
        out.group_id[n0:] = [g + g_off for g in b.group_id]
        out.traj_id[n0:] = [t + t_off for t in b.traj_id]
        for t in b.trajectories:
            out.trajectories.append(dataclasses.replace(t, traj_id=t.traj_id + t_off, group_id=t.group_id + g_off,
                                                        parent=t.parent + t_off if t.parent >= 0 else -1))
        g_off += id_span(b, "group_id")
        t_off += id_span(b, "traj_id")
    return out


def id_span(b: RolloutBatch, key: str) -> int:
    """How far :func:`merge_batches` shifts the ids of the parts after ``b``: its largest id + 1."""
    ids = [getattr(t, key) for t in b.trajectories] + list(getattr(b, key))
    return (max(ids) + 1) if ids else 0
