"""``gigpo sweep --paired A,B``: the two arms of a sweep's grid compared seed by seed (same seed = same initial
weights, same tasks), with the statistics of :mod:`gigpo.train.sweep.paired_stats`.

An arm is a value of one grid key (``grpo``) or ``key=value`` (``algorithm=grpo``); both arms must be values of
the same key. With more grid keys, A and B are compared once per combination of the other keys' values.

Per seed, from a finished run's metrics.jsonl (iterations 1..N of the run's config):

- ``auc``: sampled success AUC = mean over the N training iterations of ``rollout/success_rate``;
- ``final_eval``: final held-out success = ``eval/success_rate`` logged at iteration N (greedy unless
  ``train.eval_temperature`` is set; absent when ``train.eval_episodes`` is 0);
- ``initial_eval``: ``eval/success_rate`` at iteration 0, the untrained model on the same held-out tasks
  (logged when ``train.eval_every`` > 0), reported beside the comparison, not compared.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from gigpo.train.sweep.paired_stats import APART, BOOTSTRAP_RESAMPLES, HELPS, HURTS, PairedStat, paired_stat

#: the compared metrics: key of :func:`seed_values` -> label in tables
METRICS = {"auc": "sampled success AUC", "final_eval": "final held-out success"}
RULE = ("docs/results/credit.md's rule, per metric: B helps when the two-sided sign test gives p < 0.05 and the "
        "bootstrap 95% CI lies above 0 (B hurts: p < 0.05, CI below 0); otherwise the arms cannot be told apart")


@dataclass
class Pair:
    """One comparison: the cells of arm A and arm B that share the values of every other grid key."""

    label: str  #: the other keys' values ("" when the grid has one key)
    a: object  #: a :class:`gigpo.train.sweep.Cell`
    b: object


@dataclass
class PairedSpec:
    key: str  #: the grid key whose values are the arms
    a: str
    b: str
    pairs: list[Pair] = field(default_factory=list)


def parse_arm(text: str, grid: dict[str, list[str]]) -> tuple[str, str]:
    """``value`` or ``key=value`` -> (grid key, value); ValueError (one line) when it names no grid value."""
    key, sep, value = text.partition("=")
    shown = " ".join(f"{k}={','.join(v)}" for k, v in grid.items())
    if sep:
        key, value = key.strip(), value.strip()
        if key not in grid or value not in grid[key]:
            raise ValueError(f"--paired: arm {text!r} is not in the sweep's grid ({shown})")
        return key, value
    value = text.strip()
    keys = [k for k, vs in grid.items() if value in vs]
    if not keys:
        raise ValueError(f"--paired: arm {value!r} is not in the sweep's grid ({shown})")
    if len(keys) > 1:
        raise ValueError(f"--paired: arm {value!r} is a value of {' and '.join(keys)}: write key=value")
    return keys[0], value


def resolve_paired(arms: list[str], grid: dict[str, list[str]], cells: list, seeds: int) -> PairedSpec:
    """Check ``--paired A,B`` (split on top-level commas: ``arms``) against the grid and the seed count; the
    pairs of cells to compare."""
    if len(arms) != 2 or not all(arms):
        raise ValueError(f"--paired takes two arms A,B (e.g. --paired grpo,gigpo), got {','.join(arms)!r}")
    if not grid:
        raise ValueError("--paired needs arms on the grid: give the key with both values, e.g. algorithm=grpo,gigpo")
    (ka, va), (kb, vb) = parse_arm(arms[0], grid), parse_arm(arms[1], grid)
    if ka != kb:
        raise ValueError(f"--paired: {ka}={va} and {kb}={vb} are values of different grid keys; pair two values "
                         "of one key")
    if va == vb:
        raise ValueError(f"--paired: arms A and B are the same ({ka}={va})")
    if seeds < 2:
        raise ValueError(f"--paired compares seeds: give --seeds 2 or more (got {seeds})")
    spec = PairedSpec(ka, va, vb)
    others = [k for k in grid if k != ka]
    for a in cells:
        if a.grid[ka] != va:
            continue
        b = next(c for c in cells if c.grid[ka] == vb and all(c.grid[k] == a.grid[k] for k in others))
        spec.pairs.append(Pair(", ".join(f"{k}={a.grid[k]}" for k in others), a, b))
    return spec


def seed_values(records: list[dict], iterations: int) -> dict[str, float] | None:
    """``{"auc", "final_eval", "initial_eval"}`` of one run (module docstring), None unless it reached
    ``iterations``; a value the run did not log is nan."""
    by_it: dict[int, dict] = {}
    for r in records:
        if isinstance(r.get("iteration"), int):
            by_it.setdefault(r["iteration"], {}).update(r)  # a resumed run's repeated iteration: the last wins
    last = by_it.get(iterations, {})
    if iterations < 1 or "rollout/success_rate" not in last:
        return None
    sampled = [by_it[i].get("rollout/success_rate") for i in range(1, iterations + 1) if i in by_it]
    sampled = [float(x) for x in sampled if isinstance(x, (int, float))]

    def ev(it: int) -> float:
        x = by_it.get(it, {}).get("eval/success_rate")
        return float(x) if isinstance(x, (int, float)) else math.nan

    return {"auc": sum(sampled) / len(sampled) if len(sampled) == iterations else math.nan,
            "final_eval": ev(iterations), "initial_eval": ev(0)}


def compare(a_runs: dict[int, dict | None], b_runs: dict[int, dict | None],
            resamples: int = BOOTSTRAP_RESAMPLES) -> dict:
    """Paired statistics of every metric from per-seed :func:`seed_values` of A and B (None: unfinished)."""
    out: dict = {"metrics": {}, "initial_eval": {}}
    for m in METRICS:
        va = {s: v[m] for s, v in a_runs.items() if v}
        vb = {s: v[m] for s, v in b_runs.items() if v}
        out["metrics"][m] = paired_stat(va, vb, resamples).to_dict()
    for arm, runs in (("a", a_runs), ("b", b_runs)):
        out["initial_eval"][arm] = {s: v["initial_eval"] for s, v in runs.items()
                                    if v and math.isfinite(v["initial_eval"])}
    return out


def read_run(run: Path | None, iterations: int) -> dict | None:
    from gigpo.safefiles import json_lines

    path = None if run is None else Path(run) / "metrics.jsonl"
    if path is None or not path.is_file():
        return None
    recs = []
    for ln in json_lines(path.read_text(encoding="utf-8")):
        try:
            recs.append(json.loads(ln))
        except ValueError:
            continue
    return seed_values(recs, iterations)


def compare_spec(spec: PairedSpec, seeds: list[int]) -> list[dict]:
    """Every pair of ``spec`` compared over ``seeds`` from the runs the cells point at (``cell.runs``)."""
    out = []
    for p in spec.pairs:
        a = {s: read_run(p.a.runs.get(s), p.a.iterations) for s in seeds}
        b = {s: read_run(p.b.runs.get(s), p.b.iterations) for s in seeds}
        out.append({"label": p.label, "a_cell": p.a.key, "b_cell": p.b.key, **compare(a, b)})
    return out


def _verdict_words(v: str, a: str, b: str) -> str:
    return {HELPS: f"{b} helps", HURTS: f"{b} hurts", APART: APART}.get(v, v)


def _f(x: float, sign: bool = False) -> str:
    if not isinstance(x, (int, float)) or not math.isfinite(x):
        return "—"
    return f"{x:+.3f}" if sign else f"{x:.3f}"


def _seed_cols(st: PairedStat, seed: int) -> str:
    if seed not in st.seeds:
        return "— | — | —"
    j = st.seeds.index(seed)
    return f"{_f(st.a[j])} | {_f(st.b[j])} | {_f(st.diff[j], True)}"


def markdown(spec_key: str, a: str, b: str, results: list[dict], seeds: list[int]) -> str:
    """The summary table, the per-seed table and the rule, as markdown (printed and written to ``<name>.md``)."""
    lines = [f"## Paired comparison: {spec_key} {a} (A) → {b} (B)", "",
             f"Seeds {seeds[0]}–{seeds[-1]}; per seed B − A; mean [percentile-bootstrap 95% CI, "
             f"{BOOTSTRAP_RESAMPLES:,} resamples]; seeds where B was better/worse/tied; two-sided exact sign test "
             f"(ties dropped). Verdict: {RULE}. Sampled success AUC: mean training-batch success over all "
             "iterations; final held-out success: the held-out evaluation at the last iteration (greedy unless "
             "train.eval_temperature is set).", "",
             "| comparison | metric | seeds | A | B | B − A [95% CI] | better/worse/tie | sign p | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        for m, label in METRICS.items():
            s = r["metrics"][m]
            lines.append(
                f"| {r['label'] or f'{a} → {b}'} | {label} | {len(s['seeds'])} | {_f(s['mean_a'])} | "
                f"{_f(s['mean_b'])} | {_f(s['mean_diff'], True)} [{_f(s['lo'], True)}, {_f(s['hi'], True)}] | "
                f"{s['better']}/{s['worse']}/{s['ties']} | {s['p']:.3g} | {_verdict_words(s['verdict'], a, b)} |")
    lines += ["", "| comparison | seed | AUC A | AUC B | ΔAUC | held-out A | held-out B | Δheld-out | "
              "untrained held-out A / B |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        auc, fin = (PairedStat(**r["metrics"][m]) for m in METRICS)
        init = r["initial_eval"]
        for s in sorted(set(auc.seeds) | set(fin.seeds)):
            ia, ib = (_f(init[k].get(s, math.nan)) for k in ("a", "b"))
            lines.append(f"| {r['label'] or f'{a} → {b}'} | {s} | {_seed_cols(auc, s)} | {_seed_cols(fin, s)} | "
                         f"{ia} / {ib} |")
        missing = [s for s in seeds if s not in auc.seeds]
        if missing:
            lines.append(f"| {r['label'] or f'{a} → {b}'} | not paired (a run unfinished or failed): "
                         f"{', '.join(map(str, missing))} | | | | | | | |")
    return "\n".join(lines) + "\n"


def finite_or_none(obj: object) -> object:
    """``obj`` with every nan/inf float replaced by None (JSON has no nan; a browser's JSON.parse rejects it)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_none(v) for v in obj]
    return obj


def write_json(path: Path, data: dict) -> None:
    from gigpo.safefiles import replace_text

    replace_text(path, json.dumps(finite_or_none(data), indent=1) + "\n")


def paired_json(spec: PairedSpec, seeds: list[int], out: Path, results: list[dict] | None) -> dict:
    """What ``<name>_paired.json`` holds: the arms, each pair's runs (paths relative to the sweep directory, for
    ``gigpo view``, which recomputes from them) and, once the sweep ran, the results."""
    def rel(run: Path | None) -> str | None:
        try:
            return str(Path(run).resolve().relative_to(out.resolve())) if run is not None else None
        except ValueError:
            return None

    return {"key": spec.key, "a": spec.a, "b": spec.b, "seeds": seeds, "resamples": BOOTSTRAP_RESAMPLES,
            "pairs": [{"label": p.label, "a_iterations": p.a.iterations, "b_iterations": p.b.iterations,
                       "a_runs": {str(s): rel(p.a.runs.get(s)) for s in seeds},
                       "b_runs": {str(s): rel(p.b.runs.get(s)) for s in seeds}} for p in spec.pairs],
            "results": results}
