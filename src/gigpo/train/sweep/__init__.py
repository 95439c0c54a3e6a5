"""gigpo sweep: grids of runs over seeds, their aggregate table and paired comparisons.

`gigpo sweep`: run a grid of training configs × seeds as subprocesses (resumable), then aggregate over seeds.

Layout under ``--out DIR``::

    DIR/cells/<slug>-<hash>/seed<S>/    one training run dir per (cell, seed); ``train.log`` holds its output
    DIR/<name>.csv                      per cell and iteration: mean, std, n over seeds of each metric
    DIR/<name>.md                       final-metrics table (mean ± std over seeds), failed runs, the command
    DIR/<name>_curves.png               learning curves, ±1 std bands, one line per cell
    DIR/<name>_final_<param>.png        final metric vs each numeric grid parameter
    DIR/<name>_paired.json              with ``--paired A,B``: the arms, their runs and the paired statistics
                                        (also printed and appended to <name>.md; :mod:`gigpo.train.sweep.paired`)

``<hash>`` is taken over the fully resolved config (minus seed, run dir and progress bar), so two sweeps that share
``DIR`` with different ``--name`` reuse each other's runs whenever the configs are identical.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from gigpo.safefiles import json_lines
from gigpo.train.config.secrets import mask_override
from gigpo.train.sweep.aggregation import aggregate, write_outputs
from gigpo.train.sweep.paired import compare_spec, markdown, paired_json, resolve_paired, write_json

#: config keys the sweep sets itself (a user override of them would break the layout or the seed axis)
RESERVED = ("train.seed", "train.run_dir", "train.progress")


@dataclass
class Cell:
    """One grid point: its grid values (``key -> value string``) and the fixed overrides shared by all cells."""

    grid: dict[str, str]
    overrides: list[str]
    iterations: int
    key: str  #: directory name under cells/: readable slug + config hash
    runs: dict[int, Path] = field(default_factory=dict)  #: seed -> run dir

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.grid.items()) or "base"


@dataclass
class RunResult:
    cell: Cell
    seed: int
    status: str  #: "done" (already finished), "ran", "failed"
    seconds: float = 0.0
    error: str = ""


def split_values(text: str) -> list[str]:
    """Split ``v1,v2,...`` on top-level commas (commas inside ``{}``, ``[]``, ``()`` or quotes stay)."""
    out, depth, quote, cur = [], 0, "", []
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur))
    return [v.strip() for v in out]


def parse_params(items: list[str]) -> tuple[dict[str, list[str]], list[str]]:
    """``key=v1,v2`` items → (grid: key -> values for multi-valued keys, fixed ``key=value`` overrides).

    Keys keep their command-line order, which is also the order of the grid's nested loops.
    """
    grid: dict[str, list[str]] = {}
    fixed: list[str] = []
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValueError(f"expected key=value or key=v1,v2,..., got {item!r}")
        if key in RESERVED:
            raise ValueError(f"{key} is set by the sweep (use --seeds / --seed-start / --out)")
        values = split_values(value)
        if len(values) > 1:
            if len(set(values)) != len(values):
                raise ValueError(f"{key}: repeated value in {value!r}")
            grid[key] = values
        else:
            fixed.append(f"{key}={value}")
    return grid, fixed


def _slug(grid: dict[str, str]) -> str:
    parts = [f"{k.split('.')[-1]}={v}" for k, v in grid.items()]
    s = re.sub(r"[^A-Za-z0-9=.+_-]+", "_", "__".join(parts)) or "base"
    return s[:80]


def _flat(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        if isinstance(v, dict) and v and not prefix.count("."):  # sections and one level below (env.options)
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def config_signature(cfg_dict: dict) -> dict[str, object]:
    """The settings of a resolved config that differ from the code's defaults, flattened, JSON-normalised,
    without the keys that do not change the math (seed, run dir, progress bar, TensorBoard).

    Dropping defaults makes the signature stable when the code gains new options with defaults (a saved run's
    config.yaml from an older version still matches) while a changed value always changes it."""
    from gigpo.train.config import Config

    norm = json.loads(json.dumps(cfg_dict, default=str))
    defaults = _flat(json.loads(json.dumps(Config().to_dict(), default=str)))
    skip = {"train.seed", "train.run_dir", "train.progress", "train.tensorboard"}
    return {k: v for k, v in sorted(_flat(norm).items()) if k not in skip and defaults.get(k, object()) != v}


def config_hash(cfg_dict: dict) -> str:
    """8 hex digits of SHA-256 over :func:`config_signature`."""
    return hashlib.sha256(json.dumps(config_signature(cfg_dict), sort_keys=True).encode()).hexdigest()[:8]


def build_cells(config: str | None, grid: dict[str, list[str]], fixed: list[str]) -> list[Cell]:
    """Resolve and validate every grid point's config (no model is loaded); raises ConfigError on a bad value."""
    from gigpo.train.config import load_config

    cells = []
    keys = list(grid)
    for combo in itertools.product(*(grid[k] for k in keys)) if keys else [()]:
        point = dict(zip(keys, combo))
        overrides = fixed + [f"{k}={v}" for k, v in point.items()]
        cfg = load_config(config, overrides)
        cells.append(Cell(point, overrides, cfg.train.iterations, f"{_slug(point)}-{config_hash(cfg.to_dict())}"))
    return cells


def run_finished(run_dir: Path, iterations: int) -> bool:
    """A run is finished when its metrics.jsonl holds a record for the last iteration."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return False
    for line in reversed(json_lines(path.read_text(encoding="utf-8"))):
        if line.strip():
            try:
                return int(json.loads(line)["iteration"]) >= iterations
            except (ValueError, KeyError):
                return False
    return iterations == 0


def _find_existing(out: Path, cell: Cell, seed: int) -> Path | None:
    """A finished run of an identical config under any slug (e.g. written by another grid): by the hash in the
    directory name, else by the hash of a run's saved config.yaml (directories named by another code version)."""
    import yaml

    h = cell.key.rsplit("-", 1)[-1]
    for d in sorted((out / "cells").glob(f"*-{h}/seed{seed}")):
        if run_finished(d, cell.iterations):
            return d
    for d in sorted((out / "cells").glob(f"*/seed{seed}")):
        saved = d / "config.yaml"
        if saved.exists() and run_finished(d, cell.iterations):
            try:
                if config_hash(yaml.safe_load(saved.read_text())) == h:
                    return d
            except (yaml.YAMLError, TypeError, ValueError):
                continue
    return None


def locate_runs(out: Path, cells: list[Cell], seeds: list[int]) -> None:
    """Fill ``cell.runs``: a finished run of the same config anywhere under ``out``, else the cell's own dir."""
    for cell in cells:
        for s in seeds:
            cell.runs[s] = _find_existing(out, cell, s) or out / "cells" / cell.key / f"seed{s}"


def _has_checkpoint(run_dir: Path) -> bool:
    root = run_dir / "checkpoints"
    return root.exists() and any((p / "trainer_state.json").exists() for p in root.glob("iter_*"))


def worker_env(workers: int, threads: int | None = None) -> dict[str, str]:
    """Environment of a cell's subprocess: ``threads`` (default cores // workers, ≥ 1) BLAS/OpenMP threads each,
    so W concurrent runs share the cores instead of oversubscribing them."""
    n = threads or max(1, (os.cpu_count() or 1) // max(workers, 1))
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TORCH_NUM_THREADS"):
        env[var] = str(n)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    return env


def run_one(config: str | None, cell: Cell, seed: int, run_dir: Path, env: dict[str, str],
            timeout: float | None = None, imports: list[str] | None = None) -> RunResult:
    """Train one (cell, seed) in a subprocess (``imports``: its ``--import`` modules); resume from its checkpoint
    when an earlier attempt left one."""
    if run_finished(run_dir, cell.iterations):
        return RunResult(cell, seed, "done")
    cmd = [sys.executable, "-m", "gigpo.cli", "train", *(a for m in imports or [] for a in ("--import", m))]
    if _has_checkpoint(run_dir):
        cmd += ["--resume", str(run_dir)]
    else:
        if run_dir.exists():  # a partial run without checkpoint: its metrics would be appended to, so start over
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
        if config:
            cmd += ["--config", config]
        cmd += [*cell.overrides, f"train.seed={seed}", f"train.run_dir={run_dir}", "train.progress=false"]
    (run_dir / "sweep_cmd.txt").write_text(" ".join(map(mask_override, cmd)) + "\n")  # a log: no secrets
    t0 = time.perf_counter()
    log_path = run_dir / "train.log"
    with log_path.open("w") as log:
        try:
            proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=timeout)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = -9
    dt = time.perf_counter() - t0
    if rc == 0 and run_finished(run_dir, cell.iterations):
        err = run_dir / "sweep_error.txt"
        if err.exists():
            err.unlink()
        return RunResult(cell, seed, "ran", dt)
    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-40:])
    msg = f"exit code {rc}" + (" (timeout)" if rc == -9 else "") + f"\n{tail}"
    (run_dir / "sweep_error.txt").write_text(msg + "\n")
    return RunResult(cell, seed, "failed", dt, msg)


def run_sweep(config: str | None, cells: list[Cell], seeds: list[int], out: Path, workers: int = 1,
              threads: int | None = None, timeout: float | None = None, echo=print,
              extra_env: dict[str, str] | None = None, order: str | list[tuple[Cell, int]] = "cell",
              imports: list[str] | None = None) -> list[RunResult]:
    """Run every (cell, seed) not yet finished, ``workers`` at a time. Fills ``cell.runs``; never raises on a
    failed run (it is returned with status "failed" and its output tail). ``extra_env`` is added to the runs'
    environment (e.g. ``PYTHONPATH`` of a frozen copy of the code). ``order``: "cell" runs a cell's seeds
    together, "seed" runs seed 0 of every cell first (a partial sweep then covers the whole grid), or an
    explicit list of ``(cell, seed)`` jobs. ``imports``: ``--import`` modules every run needs (``gigpo sweep
    --import``)."""
    env = {**worker_env(workers, threads), **(extra_env or {})}
    locate_runs(out, cells, seeds)
    if isinstance(order, list):
        jobs = list(order)
    elif order == "seed":
        jobs = [(c, s) for s in seeds for c in cells]
    else:
        jobs = [(c, s) for c in cells for s in seeds]
    todo = sum(not run_finished(c.runs[s], c.iterations) for c, s in jobs)
    echo(f"sweep: {len(cells)} cell(s) × {len(seeds)} seed(s) = {len(jobs)} runs, {todo} to run, "
         f"{workers} worker(s) × {env['OMP_NUM_THREADS']} thread(s)")
    done = 0

    def _job(cs: tuple[Cell, int]) -> RunResult:
        nonlocal done
        c, s = cs
        res = run_one(config, c, s, c.runs[s], env, timeout, imports)
        done += 1
        if res.status != "done":
            echo(f"[{done}/{len(jobs)}] {c.label} seed={s}: {res.status} in {res.seconds:.0f}s"
                 + (f" — {res.error.splitlines()[0]}" if res.error else ""))
        return res

    with ThreadPoolExecutor(max_workers=max(1, workers)) as ex:
        return list(ex.map(_job, jobs))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gigpo sweep", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train a grid of configs × seeds and aggregate mean ± std over seeds, e.g.\n"
                    "  gigpo sweep --config bench-sokoban --seeds 3 --workers 2 algorithm=grpo,rloo,gigpo\n"
                    "  gigpo sweep --config bench-sokoban algorithm=gigpo algorithm.step_weight=0,0.4,0.8\n"
                    "key=v1,v2,... forms the grid (cartesian product); key=v is a fixed override. The seed axis is\n"
                    "train.seed. Rerunning skips finished runs; failed runs are listed, never hidden.\n"
                    "  gigpo sweep --config lock --seeds 8 --paired grpo,gigpo algorithm=grpo,gigpo\n"
                    "compares two arms seed by seed (paired differences, bootstrap CI, sign test, verdict).",
    )
    p.add_argument("--config", help="YAML file or preset name in configs/ (default: quickstart)")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                   help="import MODULE first, here and in every run (repeatable): a module that registers envs "
                        "(gigpo.envs.register) or estimators")
    p.add_argument("--seeds", type=int, default=3, help="number of seeds (default 3)")
    p.add_argument("--seed-start", type=int, default=0, help="first seed (seeds are consecutive)")
    p.add_argument("--workers", type=int, default=1, help="concurrent runs (default 1)")
    p.add_argument("--threads", type=int, default=None, help="torch/BLAS threads per run (default cores // workers)")
    p.add_argument("--out", default="", help="output directory (default runs/sweep-<timestamp>)")
    p.add_argument("--name", default="sweep", help="file name stem of the aggregates (default: sweep)")
    p.add_argument("--last-k", type=int, default=10,
                   help="final rollout success = mean over the last k iterations (default 10)")
    p.add_argument("--smooth", type=int, default=1, help="moving-average window of the plotted curves")
    p.add_argument("--timeout", type=float, default=None, help="seconds per run before it is killed (failed)")
    p.add_argument("--aggregate-only", action="store_true", help="do not train; aggregate what exists")
    p.add_argument("--paired", default="", metavar="A,B",
                   help="compare arm B with arm A on the same seeds (two values of one grid key, e.g. grpo,gigpo "
                        "or algorithm=grpo,algorithm=gigpo): per seed B - A of sampled success AUC and final "
                        "held-out success, mean with bootstrap 95%% CI, better/worse/tie, two-sided sign test, "
                        "verdict by docs/results/credit.md's rule; runs seed-major")
    p.add_argument("params", nargs="*", metavar="key=v1,v2,...")
    return p


def sweep_main(argv: list[str]) -> int:
    """Entry point of ``gigpo sweep``. Exit status 0 when every run finished, 1 if any failed, 2 on bad input."""
    from gigpo.envs.registry import EnvImportError, import_env_modules
    from gigpo.train.config import ConfigError, resolve_config_path

    # intermixed: grid keys may sit on either side of an option (`a=1,2 --seeds 2 b=3`), as `gigpo train` allows
    args = build_parser().parse_intermixed_args(argv)
    try:
        import_env_modules(args.imports)  # the grid's configs name its envs: resolved (and checked) here first
        config = str(resolve_config_path(args.config).resolve()) if args.config else None
        grid, fixed = parse_params(args.params)
        cells = build_cells(config, grid, fixed)
        if args.seeds < 1 or args.workers < 1 or args.last_k < 1:
            raise ValueError("--seeds, --workers and --last-k must be >= 1")
        spec = resolve_paired(split_values(args.paired), grid, cells, args.seeds) if args.paired else None
    except (ConfigError, ValueError, EnvImportError) as e:
        print(f"gigpo sweep: error: {e}", file=sys.stderr)
        return 2
    out = Path(args.out or f"runs/sweep-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.seed_start, args.seed_start + args.seeds))
    t0 = time.perf_counter()
    paired_file = out / f"{args.name}_paired.json"
    if args.aggregate_only:
        locate_runs(out, cells, seeds)
        results = [RunResult(c, s, "done" if run_finished(c.runs[s], c.iterations) else "failed",
                             error="" if run_finished(c.runs[s], c.iterations) else "not finished")
                   for c in cells for s in seeds]
    else:
        if spec is not None:  # the arms' runs are known before training: `gigpo view --serve` pairs them live
            locate_runs(out, cells, seeds)
            write_json(paired_file, paired_json(spec, seeds, out, None))
        results = run_sweep(config, cells, seeds, out, args.workers, args.threads, args.timeout,
                            order="seed" if spec is not None else "cell", imports=args.imports)
    failed = [r for r in results if r.status == "failed"]
    agg = aggregate(cells, seeds, args.last_k)
    command = "gigpo sweep " + " ".join(argv)
    files = write_outputs(out, args.name, agg, grid, failed, command, args.last_k, args.smooth)
    if spec is not None:
        compared = compare_spec(spec, seeds)
        text = markdown(spec.key, spec.a, spec.b, compared, seeds)
        print(text)
        with files[1].open("a", encoding="utf-8") as f:
            f.write("\n" + text)
        write_json(paired_file, paired_json(spec, seeds, out, compared))
        files.append(paired_file)
    print(f"sweep finished in {time.perf_counter() - t0:.0f}s; {len(failed)} failed run(s)")
    for r in failed:
        print(f"  FAILED {r.cell.label} seed={r.seed}: {r.error.splitlines()[0] if r.error else ''} "
              f"(see {r.cell.runs[r.seed] / 'sweep_error.txt'})")
    for f in files:
        print(f"  wrote {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(sweep_main(sys.argv[1:]))
