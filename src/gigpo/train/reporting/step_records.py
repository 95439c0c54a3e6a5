"""Machine-readable samples: ``RUN_DIR/samples/iter_NNNNNN.jsonl``, what ``gigpo view`` shows step by step.

Per iteration, ``train.sample_groups`` task groups are written whole (all N trajectories, every step), so each
step's anchor group can be followed across its members. Line 1 is a header, then one line per trajectory::

    {"kind": "header", "iteration": 7, "algorithm": "gigpo", "step_weight": 1.0, "gamma": 0.95,
     "groups_total": 8, "groups_written": [3, 0], "truncated": false, "parts": "recomputed on the whole batch",
     "largest_groups": [{"sg": 12, "size": 31, "trajectories": 8, "task_group": 5, ...}, ...], ...}
    {"kind": "trajectory", "traj": 24, "group": 3, "seed": 912, "won": true, "score": 1.0, "return": 1.1,
     "length": 3, "task": "...", "steps": [{"t": 0, "obs": "...", "response": "...", "action": "up",
     "reward": 0.1, "R": 0.95, "A_E": 0.8, "A_S": 0.3, "A": 1.1, "sg": 12, "valid": true}, ...],
     "parent": -1, "branch_step": -1}

``parent`` / ``branch_step``: with ``rollout.branch``, the trajectory this one was branched from and the step it
was branched at (its ``steps`` start there: the prefix is the parent's); -1 for a root.

``A`` is the advantage the update used (the trainer's array). ``R`` (R_t = r_t + γR_{t+1}), ``A_E``, ``A_S``
and ``sg`` (the step-group id, unique within the file; -1 or null: no step grouping) are recomputed here by the
run's own estimator — on the whole batch when grouping is by exact keys (one more vectorised pass), on the
written groups under similarity grouping (which costs more; k/B of it). Every group estimator and the step term
are local to a task group (returns normalised within the group, step groups formed inside it), so both give the
values of the update, and the file checks itself: for the group estimators A = A_E + ω·A_S (tested). Reading them
from inside the trainer's estimator call would tie this file to its internals. A part an estimator does not have
is null (ppo / reinforce++: A_E is batch-whitened, no group term). The header's ``largest_groups`` lists the ten
largest step groups (size, trajectories, task group, R_t mean/std, mean |A_S|, anchor) of what was recomputed.

Size: texts are cut to ``MAX_TEXT`` characters and trajectories past ``train.sample_max_bytes`` are left out
(the header says ``truncated``), so a run's samples grow by at most that much per iteration.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gigpo.safefiles import json_lines, read_regular_text, replace_text

if TYPE_CHECKING:  # the reader below serves `gigpo view`, which must not import rollout (and torch)
    from gigpo.rollout.batch import RolloutBatch

log = logging.getLogger(__name__)
MAX_TEXT = 4000  #: characters kept of one observation / response / task text
_warned: set[str] = set()


def choose_groups(batch: RolloutBatch, k: int) -> np.ndarray:
    """Up to ``k`` task-group ids: groups whose trajectories' returns differ first (they carry the signal), then
    the rest, each by id. Vectorised over rows."""
    if not len(batch) or k <= 0:
        return np.zeros(0, dtype=np.int64)
    arr = batch.arrays()
    _, tcodes = np.unique(arr["traj_id"], return_inverse=True)
    ret = np.bincount(tcodes, weights=arr["reward"])
    traj_group = np.zeros(len(ret), dtype=np.int64)
    traj_group[tcodes] = arr["group_id"]
    groups, gcodes = np.unique(traj_group, return_inverse=True)
    lo = np.full(len(groups), np.inf)
    hi = np.full(len(groups), -np.inf)
    np.minimum.at(lo, gcodes, ret)
    np.maximum.at(hi, gcodes, ret)
    order = np.lexsort((groups, ~(hi > lo)))  # mixed outcomes first, then by group id
    return groups[order[:k]]


def subset(batch: RolloutBatch, groups: np.ndarray) -> tuple[RolloutBatch, np.ndarray]:
    """The rows and trajectories of ``groups`` only, and the kept rows' indices in ``batch``."""
    from gigpo.rollout.batch import COLUMNS, RolloutBatch

    keep = np.flatnonzero(np.isin(np.asarray(batch.group_id, dtype=np.int64), groups))
    wanted = {int(g) for g in groups}
    out = RolloutBatch(trajectories=[t for t in batch.trajectories if t.group_id in wanted])
    for name in COLUMNS:
        col = getattr(batch, name)
        if len(col) == len(batch):
            setattr(out, name, [col[i] for i in keep])
    return out, keep


def credit_parts(cfg: Any, sub: RolloutBatch) -> dict[str, np.ndarray | None]:
    """``R``, ``A_E``, ``A_S`` and ``sg`` per row of ``sub`` by the run's estimator (None where it has none)."""
    from gigpo.algo import discounted_returns

    arr = sub.arrays()
    parts: dict[str, np.ndarray | None] = {
        "R": discounted_returns(arr["traj_id"], arr["step"], arr["reward"], cfg.algorithm.gamma),
        "A_E": None, "A_S": None, "sg": None}
    # the estimator registry (gigpo.algo.registry): the one dispatch the trainer uses too
    from gigpo.train.config.algorithms import resolve_estimator
    from gigpo.train.update.estimate import step_batch
    from gigpo.train.update.grouping import grouping_spec

    est, common, options = resolve_estimator(cfg)
    n = len(sub)
    # a critic's values / KL only shape the episode side of ppo / reinforce++, which is batch-whitened and no
    # group term: zeros stand in, and only the step term (independent of them) is read for those estimators
    values = np.zeros(n) if est.needs_values else None
    kl = np.zeros(n) if est.needs_kl else None
    step_term = est.uses_step_term(common.step)
    out = est(step_batch(cfg, sub, grouping_spec(cfg), step_term, values, kl), common, options)
    if not (est.needs_values or est.needs_kl):
        parts["A_E"] = out.episode_advantages
    parts["A_S"] = out.step_advantages if step_term else None
    parts["sg"] = out.step_group_ids
    return parts


def largest_step_groups(parts: dict, batch: RolloutBatch, top: int = 10) -> list[dict]:
    """The ``top`` largest step groups of ``batch``: id, size, trajectories, task group, R_t mean/std (ddof 1),
    mean |A_S| and the anchor (its first row's observation, cut). Vectorised over rows."""
    sg = parts.get("sg")
    if sg is None or not len(sg):
        return []
    sg = np.asarray(sg, dtype=np.int64)
    rows = np.flatnonzero(sg >= 0)
    if not len(rows):
        return []
    ids, first, codes, counts = np.unique(sg[rows], return_index=True, return_inverse=True, return_counts=True)
    R = np.asarray(parts["R"], dtype=np.float64)[rows]
    s1 = np.bincount(codes, weights=R)
    s2 = np.bincount(codes, weights=R * R)
    mean = s1 / counts
    var = np.where(counts > 1, (s2 - counts * mean**2) / np.maximum(counts - 1, 1), 0.0)
    a_s = parts.get("A_S")
    abs_as = np.bincount(codes, weights=np.abs(np.asarray(a_s, dtype=np.float64)[rows])) / counts if (
        a_s is not None) else None
    traj = np.asarray(batch.traj_id, dtype=np.int64)[rows]
    pairs = np.unique(np.stack([codes, traj]), axis=1)
    n_traj = np.bincount(pairs[0], minlength=len(ids))
    group = np.asarray(batch.group_id, dtype=np.int64)[rows]
    order = np.lexsort((ids, -counts))[:top]
    return [{"sg": int(ids[j]), "size": int(counts[j]), "trajectories": int(n_traj[j]),
             "task_group": int(group[first[j]]), "R_mean": _num(mean[j]), "R_std": _num(np.sqrt(max(var[j], 0))),
             "abs_A_S_mean": _num(abs_as[j]) if abs_as is not None else None,
             "anchor": str(batch.observation[rows[first[j]]])[:160]} for j in order]


def _cut(text: Any) -> str:
    text = str(text)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f" … [{len(text) - MAX_TEXT} more characters]"


def _num(x: Any, digits: int = 5) -> float | None:
    x = float(x)
    return round(x, digits) if np.isfinite(x) else None


def write_step_records(path: Path, cfg: Any, it: int, batch: RolloutBatch, advantages: np.ndarray) -> Path | None:
    """Write ``path`` (see the module docstring); never raises for what it records (a failure is one warning:
    samples are not worth a training run)."""
    k, cap = cfg.train.sample_groups, cfg.train.sample_max_bytes
    if k <= 0 or not len(batch):
        return None
    groups = choose_groups(batch, k)
    sub, keep = subset(batch, groups)
    adv = np.asarray(advantages, dtype=np.float64)[keep] if len(advantages) else np.zeros(len(keep))
    # exact keys group in one vectorised pass, so the whole batch is recomputed (and the largest step groups
    # are the iteration's); similarity grouping costs more, so only the written groups are
    whole = cfg.grouping.metric in ("exact", "state_key", "observation")
    how = "recomputed on the whole batch" if whole else "recomputed on the written groups"
    largest: list[dict] = []
    try:
        parts = credit_parts(cfg, batch if whole else sub)
        largest = largest_step_groups(parts, batch if whole else sub)
        if whole:
            parts = {key: v[keep] if v is not None else None for key, v in parts.items()}
    except Exception as e:  # noqa: BLE001 - a sample file must never stop training
        if "parts" not in _warned:
            _warned.add("parts")
            log.warning("samples: the credit parts could not be recomputed (%s: %s); writing A only",
                        type(e).__name__, e)
        parts, how = {"R": None, "A_E": None, "A_S": None, "sg": None}, f"unavailable: {type(e).__name__}"
    row_of = {(t, s): i for i, (t, s) in enumerate(zip(sub.traj_id, sub.step))}  # k groups, not the batch
    header = {"kind": "header", "iteration": it, "algorithm": cfg.algorithm.name,
              "step_weight": cfg.algorithm.step_weight, "gamma": cfg.algorithm.gamma,
              "grouping": cfg.grouping.metric, "groups_total": len(set(batch.group_id)),
              "groups_written": [int(x) for x in groups], "truncated": False, "parts": how,
              "largest_groups": largest, "largest_groups_of": "the whole batch" if whole else "the written groups"}
    lines: list[str] = []
    size = 0
    room = len(json.dumps(header).encode()) + 16  # the header's line ("truncated": true is 1 byte longer)
    rank = {int(g): r for r, g in enumerate(groups)}
    trajs = sorted(sub.trajectories, key=lambda t: (rank[t.group_id], t.traj_id))
    for t in trajs:
        steps = []
        for s, (obs, resp, action, reward) in enumerate(t.transcript, start=t.first_step):
            i = row_of.get((t.traj_id, s))
            step = {"t": s, "obs": _cut(obs), "response": _cut(resp), "action": _cut(action),
                    "reward": _num(reward)}
            if i is not None:
                step["valid"] = bool(sub.action_valid[i])
                step["A"] = _num(adv[i])
                for key in ("R", "A_E", "A_S"):
                    step[key] = _num(parts[key][i]) if parts[key] is not None else None
                step["sg"] = int(parts["sg"][i]) if parts["sg"] is not None else None
            steps.append(step)
        rec = {"kind": "trajectory", "traj": int(t.traj_id), "group": int(t.group_id), "seed": int(t.seed),
               "won": bool(t.won), "score": _num(t.score), "return": _num(t.episode_return), "length": int(t.length),
               "failed": bool(t.failed), "error": str(t.error), "task": _cut(t.task), "steps": steps,
               "parent": int(t.parent), "branch_step": int(t.branch_step)}
        line = json.dumps(rec, ensure_ascii=False)
        if size + len(line.encode()) + 1 > cap - room:
            header["truncated"] = True
            break
        lines.append(line)
        size += len(line.encode()) + 1
    path.parent.mkdir(parents=True, exist_ok=True)
    # via path.tmp: a reader (gigpo view --serve) never sees half a file
    replace_text(path, json.dumps(header) + "\n" + "".join(ln + "\n" for ln in lines))
    return path


#: the most of one samples file :func:`read_step_records` reads (the trainer writes at most
#: ``train.sample_max_bytes`` per iteration; a file larger than this was not written by it)
READ_MAX_BYTES = 256 * 1024 * 1024


def read_step_records(path: Path, max_bytes: int = READ_MAX_BYTES) -> tuple[dict, list[dict]]:
    """``(header, trajectories)`` of one file; a truncated or malformed line ends the read (what is complete).
    Reads at most ``max_bytes`` of a regular file (safefiles.read_regular: a FIFO or a link to a device reads
    as empty); lines are split on ``"\\n"`` only, as the writer escapes them (an observation may hold U+2028)."""
    header: dict = {}
    trajs: list[dict] = []
    try:
        text, _ = read_regular_text(path, max_bytes)
    except OSError:
        return header, trajs
    for ln in json_lines(text):
        if not ln.strip():
            continue
        try:
            rec = json.loads(ln)
        except ValueError:
            break
        if not isinstance(rec, dict):
            break
        if rec.get("kind") == "header":
            header = rec
        elif rec.get("kind") == "trajectory":
            trajs.append(rec)
    return header, trajs
