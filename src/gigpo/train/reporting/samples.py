"""Readable sample trajectories for a run directory (what the agent saw, said and got).

Sizes are capped: each observation and response is cut to ``MAX_STEP_CHARS`` characters (its start and end kept,
the cut marked with how much was left out) and a file to ``MAX_FILE_CHARS``, so an env with huge observations
(measured before the cap: 50 MB observations made a 200 MB sample file per iteration, 200 KB ones 1 MB) cannot
fill the disk with samples; the first cut of a run logs one warning saying so.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from gigpo.rollout.batch import RolloutBatch
from gigpo.safefiles import replace_text

log = logging.getLogger(__name__)

#: Most characters of one observation or response written to a sample file.
MAX_STEP_CHARS = 4000
#: Most characters of one sample file (one iteration); trajectories past it are left out.
MAX_FILE_CHARS = 200_000

_warned = False


def _cut(text: str, limit: int = MAX_STEP_CHARS) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    head, tail = limit * 3 // 4, limit // 4
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut ...]\n{text[-tail:]}", True


def write_samples(path: Path, batch: RolloutBatch, advantages: np.ndarray, k: int) -> None:
    """The first ``k`` trajectories (a success first when there is one), each step with its advantage."""
    global _warned
    path.parent.mkdir(parents=True, exist_ok=True)
    trajs = [t for t in batch.trajectories if not t.failed]
    trajs = sorted(trajs, key=lambda t: not t.won)[:k]
    adv_of = {(batch.traj_id[i], batch.step[i]): float(advantages[i]) for i in range(len(batch))} if len(
        advantages) else {}
    lines: list[str] = []
    size, cut, left_out = 0, False, 0
    for n, t in enumerate(trajs):
        if size > MAX_FILE_CHARS:
            left_out = len(trajs) - n
            break
        lines.append(f"=== trajectory {t.traj_id} (group {t.group_id}, seed {t.seed}) won={t.won} "
                     f"score={t.score:.3f} return={t.episode_return:.3f} steps={t.length}")
        if t.task:
            task, c0 = _cut(str(t.task))
            lines.append(f"task: {task}")
            cut |= c0
        if t.parent >= 0:
            lines.append(f"(branched from trajectory {t.parent} at step {t.branch_step})")
        for s, (obs, resp, action, reward) in enumerate(t.transcript, start=t.first_step):
            adv = adv_of.get((t.traj_id, s))
            obs, c1 = _cut(str(obs))
            resp, c2 = _cut(str(resp))
            action, c3 = _cut(str(action), 500)
            cut |= c1 or c2 or c3
            lines.append(f"--- step {s}  reward={reward:+.3f}" + (f"  advantage={adv:+.3f}" if adv is not None else ""))
            lines.append(obs)
            lines.append(f">>> {resp!r}  ->  {action}")
            size += len(obs) + len(resp) + len(action) + 64
        lines.append("")
    if left_out:
        lines.append(f"[{left_out} more trajectories left out: this file reached {MAX_FILE_CHARS} characters]")
    if (cut or left_out) and not _warned:
        _warned = True
        log.warning("sample files are capped: observations/responses over %d characters are cut and a file stops "
                    "at %d characters (first cut in %s)", MAX_STEP_CHARS, MAX_FILE_CHARS, path)
    replace_text(path, "\n".join(lines))  # via path.tmp, renamed: never through a link at path
