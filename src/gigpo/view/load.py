"""Read run and sweep directories into the report's data (plain JSON-ready dicts), within a size budget.

A run directory is read as far as it is complete: a half-written last line of metrics.jsonl or of a samples file
(a run still training, or killed) is left out, never an error. What does not fit the budget is sampled, and the
report says so (``notes``):

* metrics: every record while a run has at most ``MAX_POINTS`` iterations; beyond, evenly spaced ones plus every
  evaluation record and the last (a curve of 10k iterations keeps its shape at 2,000 points);
* samples: the budget left after the metrics is split over the runs; each run embeds as many of its
  samples/iter_N.jsonl as fit, evenly spaced over the run, the first and the last always. The files themselves
  are capped per iteration by the trainer (``train.sample_max_bytes``). ``--serve`` pages any other iteration
  in from disk on demand.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from gigpo.train.health import HealthThresholds, replay
from gigpo.train.step_records import read_step_records

MAX_POINTS = 2000
#: config keys that differ between any two runs without making them different experiments
IGNORED_DIFF_KEYS = {"train.run_dir", "train.progress", "train.overwrite"}


class ViewError(ValueError):
    """A path that is no run or sweep directory, or nothing to show: one line, exit 2."""


def read_jsonl(path: Path) -> tuple[list[dict], bool]:
    """``(records, clean)``: the complete JSON lines of ``path``; ``clean`` is False when a line was cut or
    malformed (left out)."""
    out: list[dict] = []
    clean = True
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out, False
    for ln in text.splitlines():
        if not ln.strip():
            continue
        try:
            rec = json.loads(ln)
        except ValueError:
            clean = False
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out, clean


def flat(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(d, dict):
        return out
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def is_run(path: Path) -> bool:
    return (path / "metrics.jsonl").is_file() or (path / "samples").is_dir()


def is_sweep(path: Path) -> bool:
    return (path / "cells").is_dir() and any((path / "cells").glob("*/seed*/metrics.jsonl"))


def _round(v: Any) -> Any:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float):
        if not math.isfinite(v):
            return None
        return float(f"{v:.5g}")
    return v


def columns(records: list[dict]) -> dict[str, list]:
    """Columnar numeric metrics: ``{"iteration": [...], key: [... or None]}``."""
    keys = sorted({k for r in records for k, v in r.items()
                   if k != "iteration" and isinstance(v, (int, float)) and not isinstance(v, bool)})
    cols: dict[str, list] = {"iteration": [int(r["iteration"]) for r in records]}
    for k in keys:
        cols[k] = [_round(r.get(k)) for r in records]
    return cols


def thin(records: list[dict], max_points: int = MAX_POINTS, keep: set[int] | None = None) -> list[dict]:
    """At most ~``max_points`` records: evenly spaced, plus evaluation records, ``keep`` iterations and the last."""
    if len(records) <= max_points:
        return records
    idx = set(np.linspace(0, len(records) - 1, max_points).round().astype(int).tolist())
    keep = keep or set()
    for i, r in enumerate(records):
        if "eval/success_rate" in r or r.get("iteration") in keep:
            idx.add(i)
    return [records[i] for i in sorted(idx)]


def sample_files(run: Path) -> dict[int, Path]:
    out = {}
    for p in (run / "samples").glob("iter_*.jsonl"):
        try:
            out[int(p.stem.split("_", 1)[1])] = p
        except ValueError:
            continue
    return dict(sorted(out.items()))


def pick_iterations(sizes: dict[int, int], budget: int) -> list[int]:
    """Iterations whose files fit ``budget`` bytes: all if they fit, else evenly spaced (first and last kept)."""
    its = sorted(sizes)
    if sum(sizes.values()) <= budget:
        return its
    if not its:
        return []
    mean = max(1, sum(sizes.values()) // len(its))
    n = max(2, min(len(its), budget // mean))
    while n >= 2:
        chosen = sorted({its[int(round(i))] for i in np.linspace(0, len(its) - 1, n)})
        if sum(sizes[i] for i in chosen) <= budget:
            return chosen
        n = int(n * 0.8)
    return [its[-1]] if sizes[its[-1]] <= budget else []


def load_samples(path: Path) -> dict:
    header, trajs = read_step_records(path)
    return {"header": header, "trajectories": trajs}


def load_run(run: Path, samples_budget: int, max_points: int = MAX_POINTS) -> dict:
    """One run's data for the report (see the module docstring for what is sampled)."""
    cfg_raw: dict = {}
    if (run / "config.yaml").is_file():
        try:
            cfg_raw = yaml.safe_load((run / "config.yaml").read_text()) or {}
        except yaml.YAMLError:
            cfg_raw = {}
    records, clean = read_jsonl(run / "metrics.jsonl")
    records = [r for r in records if isinstance(r.get("iteration"), int)]
    train = (cfg_raw.get("train") or {}) if isinstance(cfg_raw, dict) else {}
    defaults = HealthThresholds()
    th = HealthThresholds(**{f: train.get(f"health_{f}", getattr(defaults, f)) for f in defaults.__dataclass_fields__})
    alerts = [a.to_dict() for a in replay(records, th)]
    notes = []
    if not clean:
        notes.append("a cut or malformed line of metrics.jsonl was left out (the run may still be writing it)")
    shown = thin(records, max_points, {a["iteration"] for a in alerts})
    if len(shown) < len(records):
        notes.append(f"curves: {len(shown)} of {len(records)} iterations shown (evenly spaced, every evaluation)")
    files = sample_files(run)
    chosen = pick_iterations({i: p.stat().st_size for i, p in files.items()}, samples_budget)
    if len(chosen) < len(files):
        notes.append(f"samples: {len(chosen)} of {len(files)} iterations embedded (size cap; evenly spaced; "
                     "gigpo view --serve pages in the others)")
    iterations = [r["iteration"] for r in records if "rollout/success_rate" in r]
    planned = train.get("iterations")
    status = "complete" if planned is not None and iterations and iterations[-1] >= planned else "in progress"
    return {
        "name": run.name, "path": str(run), "config": flat(cfg_raw), "status": status,
        "iterations_done": iterations[-1] if iterations else 0, "iterations_planned": planned,
        "metrics": columns(shown), "alerts": alerts, "notes": notes,
        # a step term was computed (|A_S| > 0 at some iteration): `gigpo view A B` opens on such a run
        "step_credit": any(isinstance(r.get("adv/abs_step_mean"), (int, float)) and r["adv/abs_step_mean"] > 0
                           for r in records),
        "sample_iterations": list(files), "samples": {str(i): load_samples(files[i]) for i in chosen},
    }


def config_diff(runs: list[dict]) -> list[dict]:
    """Keys whose values differ between the runs: ``[{"key", "values": [one per run]}]``."""
    if len(runs) < 2:
        return []
    keys = sorted(set().union(*(r["config"] for r in runs)) - IGNORED_DIFF_KEYS)
    out = []
    for k in keys:
        vals = [r["config"].get(k) for r in runs]
        if any(json.dumps(v, default=str) != json.dumps(vals[0], default=str) for v in vals[1:]):
            out.append({"key": k, "values": vals})
    return out
