"""What a run tells the outside while it trains: metrics.jsonl and curves, trackers, health alerts, readable and
machine-readable samples.

What a run tells the outside while it trains, beside metrics.jsonl: the machine-readable samples
(:mod:`gigpo.train.reporting.step_records`), the health alerts (:mod:`gigpo.train.reporting.health`) and the trackers
(:mod:`gigpo.train.reporting.trackers`). The trainer calls three methods; rank 0 only."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from gigpo.train.reporting.health import HealthMonitor, HealthThresholds
from gigpo.train.reporting.metrics import read_metrics
from gigpo.train.reporting.step_records import read_step_records, write_step_records
from gigpo.train.reporting.trackers import Trackers

log = logging.getLogger("gigpo.health")


class RunReporting:
    def __init__(self, cfg: Any, run_dir: Path, start_iteration: int = 0):
        self.cfg, self.run_dir = cfg, run_dir
        self.health = HealthMonitor(HealthThresholds.from_config(cfg))
        metrics = run_dir / "metrics.jsonl"
        if start_iteration and metrics.exists():  # a resume: the monitor continues from the run's history
            for rec in read_metrics(metrics):
                if isinstance(rec.get("iteration"), int) and rec["iteration"] <= start_iteration:
                    self.health.observe(rec)
        self.trackers = Trackers(cfg, run_dir)
        self._pending: tuple[int, list[dict], Path] | None = None

    def samples(self, it: int, batch: Any, advantages: np.ndarray) -> None:
        """Write samples/iter_N.jsonl; the trackers get its table with the iteration's metrics."""
        path = write_step_records(self.run_dir / "samples" / f"iter_{it:06d}.jsonl", self.cfg, it, batch,
                                  advantages)
        if path is not None and self.trackers.active:
            self._pending = (it, read_step_records(path)[1], path)

    def record(self, rec: dict) -> None:
        """One iteration's metrics record (as written to metrics.jsonl): health check, then the trackers."""
        alerts = self.health.observe(rec)
        for a in alerts:
            log.warning("iteration %d: %s alert: %s", a.iteration, a.kind, a.message)
        it = rec.get("iteration")
        if not self.trackers.active or not isinstance(it, int):
            return
        self.trackers.metrics(it, rec)
        if self._pending is not None and self._pending[0] == it:
            self.trackers.samples(*self._pending)
            self._pending = None
        for a in alerts:
            self.trackers.alert(a)

    def finish(self, curves: Path | None, ok: bool = True) -> None:
        self.trackers.finish(curves, ok)
