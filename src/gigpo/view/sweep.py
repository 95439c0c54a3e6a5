"""A sweep directory (``gigpo sweep --out DIR``) for the report: per cell the mean curve over seeds with a ±1 std
band, and the final-metrics table of :mod:`gigpo.train.sweep.aggregation` (mean ± std over the seeds' runs).

Cells are named by the config keys that differ between them (the grid), read from each run's config.yaml; a
seed's run that is still training counts with what it has, so the table says how many seeds each value has.

A sweep run with ``--paired A,B`` left ``<name>_paired.json`` (the arms and their runs): its comparisons are
recomputed here from the runs as they are now (:mod:`gigpo.train.sweep.paired`; finished runs only), so a live
view pairs the seeds as they finish."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from gigpo.safefiles import read_regular_text
from gigpo.train.sweep.aggregation import FINAL_METRICS, run_final
from gigpo.train.sweep.paired import METRICS, RULE, compare, finite_or_none, seed_values
from gigpo.view.load import IGNORED_DIFF_KEYS, _round, flat, read_config, read_jsonl

SWEEP_CURVES = ("rollout/success_rate", "eval/success_rate", "rollout/episode_return", "rollout/valid_action_rate",
                "loss/entropy", "grouping/step_group/mean_size", "grouping/step_group/singleton_frac",
                "loss/clip_frac", "loss/kl")


def _cell_runs(sweep: Path) -> dict[str, list[Path]]:
    cells: dict[str, list[Path]] = {}
    for m in sorted((sweep / "cells").glob("*/seed*/metrics.jsonl")):
        cells.setdefault(m.parent.parent.name, []).append(m.parent)
    return cells


def _config(run: Path) -> dict:
    return flat(read_config(run)[0])  # secrets masked, regular files only


def _mean_std(xs: list[float]) -> tuple[float | None, float | None, int]:
    v = np.asarray([x for x in xs if isinstance(x, (int, float)) and math.isfinite(x)], dtype=float)
    if not v.size:
        return None, None, 0
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0, int(v.size)


def load_sweep(sweep: Path, last_k: int = 10) -> dict:
    cells = _cell_runs(sweep)
    configs = {c: _config(runs[0]) for c, runs in cells.items()}
    keys = sorted(set().union(*configs.values()) - IGNORED_DIFF_KEYS - {"train.seed"}) if configs else []
    grid = [k for k in keys if len({str(cfg.get(k)) for cfg in configs.values()}) > 1]
    out_cells, table, records = [], [], {}
    for cell, runs in cells.items():
        label = ", ".join(f"{k}={configs[cell].get(k)}" for k in grid) or cell
        recs = {r.name: read_jsonl(r / "metrics.jsonl")[0] for r in runs}
        records.update({f"cells/{cell}/{name}": rs for name, rs in recs.items()})
        curves = {}
        for m in SWEEP_CURVES:
            by_it: dict[int, list[float]] = {}
            for rs in recs.values():
                for r in rs:
                    if isinstance(r.get("iteration"), int) and isinstance(r.get(m), (int, float)):
                        by_it.setdefault(r["iteration"], []).append(float(r[m]))
            if by_it:
                its = sorted(by_it)
                stats = [_mean_std(by_it[i]) for i in its]
                curves[m] = {"iteration": its, "mean": [_round(s[0]) for s in stats],
                             "std": [_round(s[1]) for s in stats], "n": [s[2] for s in stats]}
        finals = [run_final(rs, last_k) for rs in recs.values() if rs]
        planned = configs[cell].get("train.iterations")
        done = sum(1 for rs in recs.values() if planned is not None and any(
            r.get("iteration") == planned and "rollout/success_rate" in r for r in rs))
        row = {"cell": label, "dir": cell, "seeds": len(runs), "complete": done}
        for m in FINAL_METRICS:
            mean, std, n = _mean_std([f.get(m, math.nan) for f in finals])
            row[m] = {"mean": _round(mean), "std": _round(std), "n": n}
        table.append(row)
        out_cells.append({"name": label, "dir": cell, "seeds": sorted(recs), "curves": curves})
    return {"path": str(sweep), "name": sweep.name, "grid": grid, "cells": out_cells, "table": table,
            "final_metrics": list(FINAL_METRICS), "last_k": last_k, "paired": load_paired(sweep, records)}


#: the most of one <name>_paired.json read (it lists arms and run paths: kilobytes)
PAIRED_MAX_BYTES = 4 * 1024 * 1024


def load_paired(sweep: Path, records: dict[str, list[dict]]) -> list[dict]:
    """Per ``*_paired.json`` of the sweep: its comparisons over the runs' current records (``records``: run path
    relative to the sweep -> metrics records). A file that is not a regular file, cut or malformed is left out
    with a note; run paths it names that are no run of this sweep count as unfinished."""
    out = []
    for f in sorted(sweep.glob("*_paired.json")):
        name = f.name[: -len("_paired.json")]
        try:
            text, cut = read_regular_text(f, PAIRED_MAX_BYTES)
            spec = None if cut else json.loads(text)
            pairs = spec["pairs"]
            arms = (str(spec["key"]), str(spec["a"]), str(spec["b"]))
        except (OSError, ValueError, TypeError, KeyError):
            out.append({"name": name, "note": f"{f.name} was not read (not a complete regular JSON file)"})
            continue

        def values(runs: object, iterations: object) -> dict[int, dict | None]:
            if not isinstance(runs, dict) or not isinstance(iterations, int):
                return {}
            return {int(s): seed_values(records.get(str(p), []), iterations)
                    for s, p in runs.items() if str(s).isdigit()}

        rows = []
        for p in pairs if isinstance(pairs, list) else []:
            if isinstance(p, dict):
                res = compare(values(p.get("a_runs"), p.get("a_iterations")),
                              values(p.get("b_runs"), p.get("b_iterations")))
                rows.append({"label": str(p.get("label", "")), **res})
        out.append(finite_or_none({"name": name, "key": arms[0], "a": arms[1], "b": arms[2],
                                   "metrics": METRICS, "rule": RULE, "comparisons": rows}))
    return out
