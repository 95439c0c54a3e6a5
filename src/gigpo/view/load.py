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
import stat
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from gigpo.safefiles import json_lines, read_regular_text
from gigpo.train.config.secrets import mask_config
from gigpo.train.reporting.health import HealthThresholds, replay
from gigpo.train.reporting.step_records import read_step_records
from gigpo.view.trees import group_trees, load_audits

MAX_POINTS = 2000
#: the most of a run's metrics.jsonl / config.yaml / one samples file read (reads count bytes actually read)
METRICS_MAX_BYTES = 512 * 1024 * 1024
CONFIG_MAX_BYTES = 4 * 1024 * 1024
SAMPLES_MAX_BYTES = 256 * 1024 * 1024
#: config keys that differ between any two runs without making them different experiments
IGNORED_DIFF_KEYS = {"train.run_dir", "train.progress", "train.overwrite"}


class ViewError(ValueError):
    """A path that is no run or sweep directory, or nothing to show: one line, exit 2."""


def read_jsonl(path: Path, max_bytes: int = METRICS_MAX_BYTES) -> tuple[list[dict], str | None]:
    """``(records, problem)``: the complete JSON lines of ``path`` (at most ``max_bytes`` of it, a regular file
    only) and None, or what was left out as one note: a cut or malformed line, the file's end past the cap, a
    file that is not a regular file. A missing file is no records and no problem."""
    out: list[dict] = []
    try:
        text, cut = read_regular_text(path, max_bytes)
    except FileNotFoundError:
        return out, None
    except OSError as e:
        return out, f"{path.name} was not read: {e.strerror or e}"
    lines = json_lines(text)
    if cut:  # the last line read is a fragment
        lines = lines[:-1]
    bad = False
    for ln in lines:
        if not ln.strip():
            continue
        try:
            rec = json.loads(ln)
        except ValueError:
            bad = True
            continue
        if isinstance(rec, dict):
            out.append(rec)
    if cut:
        return out, f"{path.name} is over {max_bytes / 1e6:g} MB: only its first {max_bytes / 1e6:g} MB were read"
    if bad:
        return out, f"a cut or malformed line of {path.name} was left out (the run may still be writing it)"
    return out, None


def read_config(run: Path) -> tuple[dict, str | None]:
    """``(config, problem)``: the run's config.yaml as a mapping with its secrets masked
    (gigpo.train.config.secrets), or ``{}`` and a note when it is not one (a cap of ``CONFIG_MAX_BYTES``, a
    regular file only)."""
    path = run / "config.yaml"
    try:
        text, cut = read_regular_text(path, CONFIG_MAX_BYTES)
    except FileNotFoundError:
        return {}, None
    except OSError as e:
        return {}, f"config.yaml was not read: {e.strerror or e}"
    if cut:
        return {}, f"config.yaml is over {CONFIG_MAX_BYTES / 1e6:g} MB: not a run's config, not shown"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return {}, "config.yaml is not valid YAML: not shown"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return {}, "config.yaml is not a mapping: not shown"
    return mask_config(data), None


def health_thresholds(cfg: dict) -> tuple[HealthThresholds, str | None]:
    """The run's ``train.health_*`` thresholds; a missing, mistyped or out-of-range one keeps its default (and
    a note says which)."""
    train = cfg.get("train")
    train = train if isinstance(train, dict) else {}
    defaults = HealthThresholds()
    values, bad = {}, []
    for f in defaults.__dataclass_fields__:
        v = train.get(f"health_{f}", getattr(defaults, f))
        want = type(getattr(defaults, f))
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 and (
            want is float or float(v).is_integer())
        values[f] = want(v) if ok else getattr(defaults, f)
        if not ok:
            bad.append(f"train.health_{f}={v!r}")
    note = f"health alerts use the defaults for {', '.join(bad)} (not a number in range)" if bad else None
    return HealthThresholds(**values), note


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
    m = path / "metrics.jsonl"  # any kind of file: one that cannot be read is a note on the run's page
    return m.exists() or m.is_symlink() or (path / "samples").is_dir()


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
    """``{iteration: path}`` of the run's samples files that are regular files (a link to one counts; a FIFO, a
    device or a link to one is left out: reading it would block or never end)."""
    out = {}
    for p in (run / "samples").glob("iter_*.jsonl"):
        try:
            it = int(p.stem.split("_", 1)[1])
            if stat.S_ISREG(p.stat().st_mode):
                out[it] = p
        except (ValueError, OSError):
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


def _text(v: Any) -> str:
    return "" if v is None else v if isinstance(v, str) else json.dumps(v, default=str)


def _clean_step(st: Any) -> dict | None:
    if not isinstance(st, dict):
        return None
    out = {k: _round(v) if k in ("reward", "R", "A_E", "A_S", "A") else v for k, v in st.items()}
    for k in ("obs", "response", "action"):
        out[k] = _text(st.get(k))
    out["t"] = st.get("t") if isinstance(st.get("t"), int) and not isinstance(st.get("t"), bool) else None
    out["sg"] = st.get("sg") if isinstance(st.get("sg"), int) and not isinstance(st.get("sg"), bool) else None
    return out


def clean_samples(header: Any, trajs: list) -> dict:
    """One samples file in the shape the page draws: texts are strings (a null ``anchor`` or ``obs`` is ""),
    numbers finite or None, ids integers or None, anything else dropped — a hand-edited or foreign file must
    not stop the page's script."""
    header = header if isinstance(header, dict) else {}
    groups = header.get("largest_groups")
    header = {**header, "largest_groups": [
        {**g, "anchor": _text(g.get("anchor")),
         **{k: _round(g.get(k)) for k in ("sg", "size", "trajectories", "task_group", "R_mean", "R_std",
                                           "abs_A_S_mean")}}
        for g in (groups if isinstance(groups, list) else []) if isinstance(g, dict)]}
    out = []
    for t in trajs:
        if not isinstance(t, dict):
            continue
        steps = t.get("steps")
        t = {**t, "task": _text(t.get("task")), "error": _text(t.get("error")),
             **{k: _round(t.get(k)) for k in ("traj", "group", "seed", "score", "return", "length", "parent",
                                               "branch_step")},
             "steps": [s for s in map(_clean_step, steps if isinstance(steps, list) else []) if s is not None]}
        out.append(t)
    return {"header": header, "trajectories": out, "trees": group_trees(out)}


def load_samples(path: Path, max_bytes: int = SAMPLES_MAX_BYTES) -> dict:
    """One samples file for the page (:func:`clean_samples`), at most ``max_bytes`` of it read."""
    header, trajs = read_step_records(path, max_bytes)
    return clean_samples(header, trajs)


def load_run(run: Path, samples_budget: int, max_points: int = MAX_POINTS) -> dict:
    """One run's data for the report (see the module docstring for what is sampled)."""
    cfg_raw, cfg_note = read_config(run)
    records, metrics_note = read_jsonl(run / "metrics.jsonl")
    records = [r for r in records if isinstance(r.get("iteration"), int) and not isinstance(r["iteration"], bool)]
    train = cfg_raw.get("train") if isinstance(cfg_raw.get("train"), dict) else {}
    th, th_note = health_thresholds(cfg_raw)
    alerts = [a.to_dict() for a in replay(records, th)]
    notes = [n for n in (metrics_note, cfg_note, th_note) if n]
    if not (run / "metrics.jsonl").exists():
        notes.append("no metrics.jsonl yet: the run has not finished an iteration (or its metrics were removed)")
    shown = thin(records, max_points, {a["iteration"] for a in alerts})
    if len(shown) < len(records):
        notes.append(f"curves: {len(shown)} of {len(records)} iterations shown (evenly spaced, every evaluation)")
    audits, audit_notes = load_audits(run)
    notes += audit_notes
    files = sample_files(run)
    files_size = {}
    for i, p in files.items():
        try:
            files_size[i] = p.stat().st_size  # to choose; the reads are capped by it again (a file that grows)
        except OSError:
            continue
    files = {i: p for i, p in files.items() if i in files_size}
    chosen = pick_iterations(files_size, samples_budget)
    if len(chosen) < len(files):
        notes.append(f"samples: {len(chosen)} of {len(files)} iterations embedded (size cap; evenly spaced; "
                     "gigpo view --serve pages in the others)")
    iterations = [r["iteration"] for r in records if "rollout/success_rate" in r]
    planned = train.get("iterations")
    planned = planned if isinstance(planned, int) and not isinstance(planned, bool) else None
    status = "complete" if planned is not None and iterations and iterations[-1] >= planned else "in progress"
    return {
        "name": run.name, "path": str(run), "config": flat(cfg_raw), "status": status,
        "iterations_done": iterations[-1] if iterations else 0, "iterations_planned": planned,
        "metrics": columns(shown), "alerts": alerts, "notes": notes, "audits": audits,
        # a step term was computed (|A_S| > 0 at some iteration): `gigpo view A B` opens on such a run
        "step_credit": any(isinstance(r.get("adv/abs_step_mean"), (int, float)) and r["adv/abs_step_mean"] > 0
                           for r in records),
        "sample_iterations": list(files),
        "samples": {str(i): load_samples(files[i], max(files_size[i], 1)) for i in chosen},
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
