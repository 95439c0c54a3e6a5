"""Behaviour unchanged by a refactor: the same presets trained from two source trees give equal non-timing metrics.

    python benchmarks/same_metrics.py --before /path/to/old/src --after src [--iterations 12] [--work DIR]
    python benchmarks/same_metrics.py --compare RUN_A/metrics.jsonl RUN_B/metrics.jsonl

Trains ``quickstart``, ``lock`` and ``quickstart`` with similarity grouping (``grouping.metric=ro``, threshold 0.8)
for ``--iterations`` iterations with each tree on ``PYTHONPATH`` (same seeds, ``OMP_NUM_THREADS=1``), then compares
every ``metrics.jsonl`` record key by key, leaving out ``time/*`` (wall and CPU seconds, throughput). Exit 0 when
every run's records are equal (floats exactly), else 1 with the first differences.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

RUNS = {
    "quickstart": ["--config", "quickstart"],
    "lock": ["--config", "lock"],
    "quickstart-ro": ["--config", "quickstart", "grouping.metric=ro", "grouping.threshold=0.8"],
}


def records(path: Path) -> list[dict]:
    """The metrics records of a run without their ``time/*`` keys."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.append({k: v for k, v in json.loads(line).items() if not k.startswith("time/")})
    return out


def differences(a: list[dict], b: list[dict], limit: int = 10, added: frozenset = frozenset()) -> list[str]:
    """Up to ``limit`` lines naming where two runs' records differ (record count, keys, values); ``added``: metrics
    the new tree logs that the old one did not (compared only where both have them)."""
    out = [f"{len(a)} records vs {len(b)}"] if len(a) != len(b) else []
    for i, (ra, rb) in enumerate(zip(a, b)):
        for k in sorted(ra.keys() | rb.keys()):
            if k in added and k not in ra:
                continue
            if ra.get(k, "<missing>") != rb.get(k, "<missing>"):
                out.append(f"record {i} (iteration {ra.get('iteration')}): {k}: {ra.get(k, '<missing>')!r} vs "
                           f"{rb.get(k, '<missing>')!r}")
    return out[:limit]


def train(src: str, name: str, run_dir: Path, iterations: int) -> Path:
    env = {**os.environ, "PYTHONPATH": str(Path(src).resolve()), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "gigpo", "train", *RUNS[name], f"train.iterations={iterations}",
           f"train.run_dir={run_dir}", "train.progress=false"]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return run_dir / "metrics.jsonl"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", help="the old tree's src/ directory")
    ap.add_argument("--after", default="src", help="the new tree's src/ directory")
    ap.add_argument("--iterations", type=int, default=12)
    ap.add_argument("--work", help="where the runs go (default: a temporary directory)")
    ap.add_argument("--runs", nargs="*", default=list(RUNS), choices=list(RUNS))
    ap.add_argument("--added", action="append", default=[], metavar="KEY",
                    help="a metric only the new tree logs (repeatable): not a difference where the old lacks it")
    ap.add_argument("--compare", nargs=2, metavar="METRICS_JSONL", help="only compare two metrics.jsonl files")
    args = ap.parse_args(argv)
    if args.compare:
        pairs = {"given": tuple(Path(p) for p in args.compare)}
    else:
        if not args.before:
            ap.error("--before is required unless --compare is given")
        work = Path(args.work or tempfile.mkdtemp(prefix="same_metrics_"))
        pairs = {name: (train(args.before, name, work / f"before_{name}", args.iterations),
                        train(args.after, name, work / f"after_{name}", args.iterations)) for name in args.runs}
    ok = True
    for name, (a, b) in pairs.items():
        diff = differences(records(a), records(b), added=frozenset(args.added))
        n = len(records(a))
        print(f"{name}: {'equal' if not diff else 'DIFFERENT'} ({n} records, time/* left out)")
        for line in diff:
            print("   ", line)
        ok = ok and not diff
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
