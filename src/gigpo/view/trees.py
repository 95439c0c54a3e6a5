"""The report's branch trees and credit audits: what `gigpo view` draws for branch rollouts (``rollout.branch``)
and shows of ``gigpo audit``'s results.

A branched task group is a tree of trajectories: a root starts at step 0, a sibling at its parent's branch step
(its rows start there; the prefix is the parent's). :func:`group_trees` lays each branched group out for a small
SVG: one row per trajectory, parents above their branches (depth-first), x = the step; the page draws a line per
trajectory from its first step to its last and a connector from the parent's line at the branch step.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

#: the most audit files (newest iterations) and bytes per file the report embeds
MAX_AUDITS, AUDIT_MAX_BYTES = 20, 1024 * 1024


def _int(v: Any, default: int = -1) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else default


def group_trees(trajs: list[dict]) -> dict[str, dict]:
    """Per task group with at least one branched trajectory: ``{"steps": last step + 1, "rows": [{"traj", "row",
    "parent", "x0", "x1", "won"}]}`` — ``x0`` the trajectory's first step (its branch step, 0 for a root), ``x1``
    its last step + 1; rows in depth-first order (each branch right below its parent, in branch-step order).
    A parent that is not among ``trajs`` (not written) leaves its branches as roots of their own."""
    by_group: dict[int, list[dict]] = {}
    for t in trajs:
        by_group.setdefault(_int(t.get("group")), []).append(t)
    out = {}
    for group, members in sorted(by_group.items()):
        if not any(_int(t.get("parent")) >= 0 for t in members):
            continue
        ids = {_int(t.get("traj")) for t in members}
        kids: dict[int, list[dict]] = {}
        roots = []
        for t in members:
            p = _int(t.get("parent"))
            (kids.setdefault(p, []) if p >= 0 and p in ids else roots).append(t)
        rows: list[dict] = []
        stack = sorted(roots, key=lambda t: _int(t.get("traj")), reverse=True)
        while stack:  # depth-first, iterative (a long chain of branches cannot exhaust the recursion limit)
            t = stack.pop()
            tid, x0 = _int(t.get("traj")), max(_int(t.get("branch_step")), 0)
            steps = [_int(s.get("t")) for s in t.get("steps") or [] if isinstance(s, dict)]
            x1 = max([s + 1 for s in steps if s >= 0] + [x0 + 1, _int(t.get("length"), 0)])
            rows.append({"traj": tid, "row": len(rows), "parent": _int(t.get("parent")), "x0": x0, "x1": x1,
                         "won": bool(t.get("won"))})
            stack += sorted(kids.get(tid, []), key=lambda c: (_int(c.get("branch_step")), _int(c.get("traj"))),
                            reverse=True)
        out[str(group)] = {"steps": max(r["x1"] for r in rows), "rows": rows}
    return out


def load_audits(run: Path) -> tuple[list[dict], list[str]]:
    """The run's ``audit/audit_*.json`` (``gigpo audit``), oldest iteration first, at most :data:`MAX_AUDITS` (the
    newest); a file that is not a regular file, too big or not an audit is left out with a note."""
    folder = run / "audit"
    notes: list[str] = []
    files = sorted(folder.glob("audit_*.json")) if folder.is_dir() else []
    if len(files) > MAX_AUDITS:
        notes.append(f"audits: the newest {MAX_AUDITS} of {len(files)} shown")
        files = files[-MAX_AUDITS:]
    out = []
    for f in files:
        try:
            st = f.stat()
            if not stat.S_ISREG(st.st_mode) or st.st_size > AUDIT_MAX_BYTES:
                raise ValueError("not a regular file of at most 1 MB")
            with open(f, encoding="utf-8") as fh:
                data = json.loads(fh.read(AUDIT_MAX_BYTES))
            if not isinstance(data, dict) or not isinstance(data.get("estimators"), list):
                raise ValueError("not an audit")
        except (OSError, ValueError) as err:
            notes.append(f"audit {f.name} left out: {err}")
            continue
        out.append(_clean_audit(data))
    return out, notes


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf") \
        else None


def _clean_audit(data: dict) -> dict:
    """Only what the page shows: numbers finite or None, texts strings (a hand-edited file cannot break it)."""
    def score(s: Any) -> dict:
        s = s if isinstance(s, dict) else {}
        return {k: _num(s.get(k)) for k in ("value", "lo", "hi")}

    rows = [{"label": str(e.get("label", e.get("name", "?"))),
             **{k: score(e.get(k)) for k in ("spearman", "sign_agreement", "step_signal", "clear_rows")}}
            for e in data["estimators"] if isinstance(e, dict)]
    return {"iteration": _int(data.get("iteration")), "env": str(data.get("env", "")),
            "states": _int(data.get("states")), "continuations": _int(data.get("continuations")),
            "cpu_seconds": _num(data.get("cpu_seconds")), "estimators": rows}
