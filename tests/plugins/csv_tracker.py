"""A one-file tracker, loaded with ``--import csv_tracker`` and named in ``train.loggers=[csv]``
(tests/train/test_user_plugins.py): every numeric metric of every iteration appended to RUN_DIR/metrics.csv as
``iteration,key,value`` rows (long format: the set of keys may change between iterations)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from gigpo.train.reporting.trackers import register_tracker


@register_tracker("csv", description="every metric as iteration,key,value rows in RUN_DIR/metrics.csv")
class CsvTracker:
    name = "csv"

    def __init__(self, run_dir: Path, cfg_dict: dict, ids: dict):
        self.path = Path(run_dir) / "metrics.csv"
        if not self.path.exists():  # a resume appends to the file of the run it continues
            self.path.write_text("iteration,key,value\n")

    def metrics(self, it: int, rec: dict) -> None:
        rows = [(it, k, v) for k, v in rec.items() if k != "iteration" and isinstance(v, (int, float))
                and not isinstance(v, bool) and math.isfinite(v)]
        with self.path.open("a", newline="") as f:
            csv.writer(f).writerows(rows)

    def samples(self, it: int, trajectories: list[dict], path: Path) -> None:
        return None  # the sample tables stay in samples/iter_N.jsonl

    def alert(self, a) -> None:
        with self.path.open("a", newline="") as f:
            csv.writer(f).writerow((a.iteration, f"health/alert_{a.kind}", 1.0))

    def finish(self, curves: Path | None, ok: bool) -> None:
        return None
