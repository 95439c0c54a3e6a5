"""Paired per-seed comparison of two sweep cells found in one or more ``gigpo sweep`` output folders (same seed =
same initial weights and task draws), e.g. runs of one arm spread over two sweeps.

Reads ``<sweep dir>/cells/<cell>-<hash>/seed<k>/metrics.jsonl``, takes every seed that both cells finished, and
prints what ``gigpo sweep --paired A,B`` prints (the same code, :mod:`gigpo.train.sweep.paired`): per seed B − A
of sampled success AUC and of final held-out success, the mean with a bootstrap 95% CI, better/worse/tie counts,
the two-sided exact sign test and the verdict by docs/results/credit.md's rule. Within one sweep, use
``gigpo sweep ... --paired A,B`` itself.

    python benchmarks/paired_seeds.py runs/sparse_credit runs/sparse_credit_more \
        --a algorithm=grpo --b algorithm=gigpo
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gigpo.safefiles import json_lines
from gigpo.train.sweep.paired import compare, markdown, seed_values


def runs_of(dirs: list[Path], cell: str) -> dict[int, Path]:
    """seed -> metrics file of the cell named ``cell`` (the part before the config hash) in any of ``dirs``."""
    out: dict[int, Path] = {}
    for d in dirs:
        for cell_dir in sorted((d / "cells").glob(f"{cell}-*")):
            if cell_dir.name.rsplit("-", 1)[0] != cell:
                continue
            for seed_dir in cell_dir.glob("seed*"):
                f = seed_dir / "metrics.jsonl"
                if f.is_file() and seed_dir.name[4:].isdigit():
                    out[int(seed_dir.name[4:])] = f
    return out


def values(path: Path) -> dict[str, float] | None:
    """:func:`gigpo.train.sweep.paired.seed_values` of a run, its length read off its last training record."""
    recs = [json.loads(ln) for ln in json_lines(path.read_text(encoding="utf-8")) if ln.strip()]
    its = [r["iteration"] for r in recs if "rollout/success_rate" in r and isinstance(r.get("iteration"), int)]
    return seed_values(recs, max(its)) if its else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--a", required=True, help="baseline cell, e.g. algorithm=grpo")
    ap.add_argument("--b", required=True, help="compared cell, e.g. algorithm=gigpo")
    args = ap.parse_args(argv)
    ra, rb = runs_of(args.dirs, args.a), runs_of(args.dirs, args.b)
    seeds = sorted(set(ra) & set(rb))
    if not seeds:
        raise SystemExit(f"no seed ran both {args.a} and {args.b} in {', '.join(map(str, args.dirs))}")
    result = compare({s: values(ra[s]) for s in seeds}, {s: values(rb[s]) for s in seeds})
    print(markdown("cell", args.a, args.b, [{"label": "", **result}], seeds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
