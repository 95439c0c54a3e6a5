"""Aggregation of a sweep's runs over seeds: per-iteration mean/std CSV, final-metrics markdown table, PNG plots.

Definitions (also written into the markdown):

- per-iteration statistic of a cell: mean and sample std (ddof 1; 0 with one seed) over the seeds that logged
  the metric at that iteration, with n = that number of seeds;
- ``final_success`` of a run = mean of ``rollout/success_rate`` over its last ``k`` iterations (the training
  batches, sampled at the rollout temperature); ``final_eval_success`` = ``eval/success_rate`` of the run's last
  record (held-out seeds, ``train.eval_temperature``, greedy by default); ``final_return`` likewise over the last k;
  ``env_steps`` = total agent steps over the run. The table reports mean ± std of these over seeds.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from gigpo.safefiles import json_lines

#: per-iteration metrics carried into the CSV (absent ones are skipped)
CURVE_METRICS = (
    "rollout/success_rate", "rollout/episode_return", "rollout/episode_length", "rollout/valid_action_rate",
    "eval/success_rate", "eval/episode_return", "grouping/step_group/mean_size",
    "grouping/step_group/singleton_frac", "loss/entropy", "rollout/steps",
)
#: final metrics per run, in table order
FINAL_METRICS = ("final_success", "final_eval_success", "final_return", "final_valid_rate", "env_steps",
                 "singleton_frac", "seconds")


def _read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(ln) for ln in json_lines(path.read_text(encoding="utf-8")) if ln.strip()]


def _mean_std(values: list[float]) -> tuple[float, float, int]:
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    if v.size == 0:
        return math.nan, math.nan, 0
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else 0.0, int(v.size)


def run_final(records: list[dict], last_k: int) -> dict[str, float]:
    """Final metrics of one run from its metrics records (see the module docstring for the definitions)."""
    train = [r for r in records if "rollout/success_rate" in r]
    if not train:
        return {}
    tail = train[-last_k:]

    def avg(key: str) -> float:
        xs = [r[key] for r in tail if r.get(key) is not None]
        return float(np.mean(xs)) if xs else math.nan

    last = records[-1]
    return {
        "final_success": avg("rollout/success_rate"),
        "final_eval_success": float(last["eval/success_rate"]) if last.get("eval/success_rate") is not None
        else math.nan,
        "final_return": avg("rollout/episode_return"),
        "final_valid_rate": avg("rollout/valid_action_rate"),
        "env_steps": float(sum(r.get("rollout/steps") or 0.0 for r in train)),
        "singleton_frac": avg("grouping/step_group/singleton_frac"),
        "seconds": float(sum(sum(v for k, v in r.items() if k.startswith("time/") and not k.startswith(
            "time/tokens")) for r in train)),
    }


def aggregate(cells: list, seeds: list[int], last_k: int) -> list[dict[str, Any]]:
    """Per cell: ``{"cell", "grid", "curves": {metric: (iters, mean, std, n)}, "final": {metric: (mean, std, n)},
    "per_seed": {seed: final dict}}`` over the seeds whose run finished."""
    out = []
    for cell in cells:
        per_seed: dict[int, dict] = {}
        records: dict[int, list[dict]] = {}
        for s in seeds:
            run = cell.runs.get(s)
            recs = _read(run / "metrics.jsonl") if run is not None else []
            if recs and int(recs[-1]["iteration"]) >= cell.iterations:
                records[s] = recs
                per_seed[s] = run_final(recs, last_k)
        curves = {}
        for m in CURVE_METRICS:
            by_it: dict[int, list[float]] = {}
            for recs in records.values():
                for r in recs:
                    if r.get(m) is not None:
                        by_it.setdefault(int(r["iteration"]), []).append(float(r[m]))
            if by_it:
                its = sorted(by_it)
                stats = [_mean_std(by_it[i]) for i in its]
                curves[m] = (its, [s[0] for s in stats], [s[1] for s in stats], [s[2] for s in stats])
        final = {m: _mean_std([f.get(m, math.nan) for f in per_seed.values()]) for m in FINAL_METRICS}
        out.append({"cell": cell, "grid": cell.grid, "curves": curves, "final": final, "per_seed": per_seed})
    return out


def write_csv(path: Path, agg: list[dict], grid_keys: list[str]) -> None:
    """One row per (cell, iteration): grid values, then ``<metric>_mean``, ``_std``, ``_n`` for every metric."""
    metrics = [m for m in CURVE_METRICS if any(m in a["curves"] for a in agg)]
    header = ["cell", *grid_keys, "iteration"] + [f"{m}_{s}" for m in metrics for s in ("mean", "std", "n")]
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for a in agg:
            its = sorted({i for c in a["curves"].values() for i in c[0]})
            index = {m: {i: j for j, i in enumerate(c[0])} for m, c in a["curves"].items()}
            for it in its:
                row: list[Any] = [a["cell"].key, *[a["grid"].get(k, "") for k in grid_keys], it]
                for m in metrics:
                    c, j = a["curves"].get(m), index.get(m, {}).get(it)
                    row += ["", "", 0] if c is None or j is None else [
                        f"{c[1][j]:.6g}", f"{c[2][j]:.6g}", c[3][j]]
                w.writerow(row)


def _fmt(ms: tuple[float, float, int], digits: int = 3) -> str:
    m, s, n = ms
    if n == 0:
        return "—"
    if abs(m) >= 1000:
        return f"{m:.0f} ± {s:.0f}"
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def markdown_table(agg: list[dict], grid_keys: list[str], seeds: int | None = None) -> str:
    """Final metrics, one row per cell, ``mean ± std (n seeds)``."""
    head = [*(k for k in grid_keys), "seeds", *FINAL_METRICS]
    lines = ["| " + " | ".join(head or ["cell"]) + " |", "|" + "---|" * len(head)]
    for a in agg:
        n = len(a["per_seed"])
        cells = [a["grid"].get(k, "") for k in grid_keys] + [str(n)]
        cells += [_fmt(a["final"][m], 0 if m in ("env_steps", "seconds") else 3) for m in FINAL_METRICS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _numeric(values: list[str]) -> list[float] | None:
    try:
        return [float(v) for v in values]
    except ValueError:
        return None


def _smooth(y: np.ndarray, w: int) -> np.ndarray:
    """Trailing moving average over up to ``w`` points (the first points average what exists)."""
    if w <= 1 or y.size == 0:
        return y
    c = np.cumsum(np.insert(y, 0, 0.0))
    idx = np.arange(1, y.size + 1)
    lo = np.maximum(idx - w, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def plot_curves(path: Path, agg: list[dict], smooth: int = 1) -> Path | None:
    """Learning curves with ±1 std bands (over seeds), one line per cell, a panel per metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [m for m in ("rollout/success_rate", "eval/success_rate", "rollout/episode_return",
                          "rollout/valid_action_rate") if any(m in a["curves"] for a in agg)]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8), squeeze=False)
    colors = plt.get_cmap("tab10")
    for ax, m in zip(axes[0], panels):
        for i, a in enumerate(agg):
            if m not in a["curves"]:
                continue
            its, mean, std, _ = a["curves"][m]
            x = np.asarray(its)
            w = 1 if m.startswith("eval/") else smooth  # eval points are sparse: plot them raw
            y, s = _smooth(np.asarray(mean), w), _smooth(np.asarray(std), w)
            ax.plot(x, y, "o-" if len(x) < 12 else "-", color=colors(i % 10), label=a["cell"].label, markersize=3)
            ax.fill_between(x, y - s, y + s, color=colors(i % 10), alpha=0.15)
        ax.set_title(m + (f" (moving avg {smooth})" if smooth > 1 and not m.startswith("eval/") else ""), fontsize=9)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_final_vs(path: Path, agg: list[dict], param: str, grid: dict[str, list[str]]) -> Path | None:
    """Final success (rollout, last k) and final eval success vs the numeric ``param``, error bars = ±1 std;
    one line per combination of the other grid parameters."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    others = [k for k in grid if k != param]
    series: dict[str, list[tuple[float, dict]]] = {}
    for a in agg:
        label = ", ".join(f"{k}={a['grid'][k]}" for k in others) or "final"
        series.setdefault(label, []).append((float(a["grid"][param]), a["final"]))
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.8), squeeze=False)
    for ax, m in zip(axes[0], ("final_success", "final_eval_success")):
        for label, pts in series.items():
            pts.sort(key=lambda p: p[0])
            x = [p[0] for p in pts]
            y = [p[1][m][0] for p in pts]
            e = [p[1][m][1] for p in pts]
            ax.errorbar(x, y, yerr=e, marker="o", capsize=3, label=label)
        ax.set_xlabel(param)
        ax.set_title(m, fontsize=9)
        ax.grid(alpha=0.3)
    if len(series) > 1:
        axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_outputs(out: Path, name: str, agg: list[dict], grid: dict[str, list[str]], failed: list, command: str,
                  last_k: int, smooth: int = 1) -> list[Path]:
    """Write ``<name>.csv``, ``<name>.md``, ``<name>_curves.png`` and ``<name>_final_<param>.png``."""
    keys = list(grid)
    files = [out / f"{name}.csv", out / f"{name}.md"]
    write_csv(files[0], agg, keys)
    md = [f"# Sweep `{name}`", "", f"Command: `{command}`", "",
          f"Final metrics, mean ± std (sample std, ddof 1) over seeds. `final_success`: mean training-batch "
          f"success over each run's last {last_k} iterations; `final_eval_success`: held-out evaluation at the "
          f"last iteration; `final_return`, `final_valid_rate`, `singleton_frac` (rows alone in their step "
          f"group): last {last_k} iterations; `env_steps`: agent steps over the whole run; `seconds`: "
          f"rollout + advantage + update time.", "", markdown_table(agg, keys), ""]
    md += ["Per-seed final_success / final_eval_success:", ""]
    for a in agg:
        parts = [f"seed {s}: {f.get('final_success', math.nan):.3f} / {f.get('final_eval_success', math.nan):.3f}"
                 for s, f in sorted(a["per_seed"].items())]
        md.append(f"- {a['cell'].label}: " + ("; ".join(parts) or "no finished run"))
    md.append("")
    if failed:
        md += [f"## Failed runs ({len(failed)})", ""]
        for r in failed:
            first = r.error.splitlines()[0] if r.error else ""
            md.append(f"- {r.cell.label} seed={r.seed}: {first} — `{r.cell.runs[r.seed] / 'sweep_error.txt'}`")
        md.append("")
    files[1].write_text("\n".join(md))
    p = plot_curves(out / f"{name}_curves.png", agg, smooth)
    if p:
        files.append(p)
    for k, vals in grid.items():
        if _numeric(vals) is not None:
            safe = k.replace(".", "_")
            p = plot_final_vs(out / f"{name}_final_{safe}.png", agg, k, grid)
            if p:
                files.append(p)
    return files
