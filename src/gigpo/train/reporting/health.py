"""Training-health alerts: a policy that collapsed after solving, an entropy collapse, iterations without signal.

One :class:`HealthMonitor` reads the per-iteration metrics records in order and returns the alerts each one
raises. The trainer logs them (one warning line each) and sends them to the trackers; ``gigpo view`` replays the
same monitor over ``metrics.jsonl`` to place its markers, so a report shows exactly what the run warned about
(and a run made before this module existed gets its markers too). Thresholds are the ``train.health_*`` keys.

The three checks, on ``rollout/success_rate`` (s_t), ``loss/entropy`` (H_t) and ``adv/mean``/``adv/std``:

* ``collapse``: some s_u ≥ high, then s_t ≤ low with t − u ≤ window, and no recovery: s stays below high for
  ``sustain`` iterations from t on (the alert is raised at the last of them, naming the fall at t). A dip shorter
  than that is silent (a one-iteration dip that recovered in 4 is sampling noise, not a collapse). Once per solve:
  it re-arms when s reaches ≥ high again. The lock runs of docs/results/credit.md solved by ~45 and were at 0.00
  by 120.
* ``entropy``: H_t ≤ ratio · H_0, H_0 the mean over the first 3 iterations that logged entropy, while s_t < high
  (a solved policy is allowed to become deterministic). Once per run.
* ``no_signal``: n iterations in a row whose advantages are all exactly 0 (every group's returns equal), once per
  streak; the message says whether the groups all won or all failed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

ALERT_KINDS = ("collapse", "entropy", "no_signal")
_ENTROPY_BASE_ITERATIONS = 3


@dataclass(frozen=True)
class HealthThresholds:
    collapse_high: float = 0.9
    collapse_low: float = 0.5
    collapse_window: int = 50
    entropy_ratio: float = 0.1
    no_signal_iterations: int = 10
    collapse_sustain: int = 5

    @classmethod
    def from_config(cls, cfg: Any) -> HealthThresholds:
        t = cfg.train
        return cls(t.health_collapse_high, t.health_collapse_low, t.health_collapse_window,
                   t.health_entropy_ratio, t.health_no_signal_iterations, t.health_collapse_sustain)


def check_health_config(cfg: Any, check: Any) -> None:
    """Range checks of the ``train.health_*`` keys (``check(cond, message)`` raises the config error)."""
    t = cfg.train
    check(0 <= t.health_collapse_low <= 1 and 0 <= t.health_collapse_high <= 1,
          "train.health_collapse_high/low must be in [0, 1]")
    check(t.health_collapse_low < t.health_collapse_high,
          f"train.health_collapse_low ({t.health_collapse_low}) must be < train.health_collapse_high "
          f"({t.health_collapse_high})")
    check(t.health_collapse_window >= 0, "train.health_collapse_window must be >= 0 (0 disables the alert)")
    check(t.health_collapse_sustain >= 1, "train.health_collapse_sustain must be >= 1")
    check(0 <= t.health_entropy_ratio < 1, "train.health_entropy_ratio must be in [0, 1) (0 disables the alert)")
    check(t.health_no_signal_iterations >= 0, "train.health_no_signal_iterations must be >= 0 (0 disables it)")


@dataclass(frozen=True)
class Alert:
    iteration: int
    kind: str  #: one of ALERT_KINDS
    message: str

    def to_dict(self) -> dict:
        return {"iteration": self.iteration, "kind": self.kind, "message": self.message}


def _num(rec: dict, key: str) -> float | None:
    v = rec.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class HealthMonitor:
    """Feed records in iteration order with :meth:`observe`; it returns the alerts that record raises."""

    def __init__(self, thresholds: HealthThresholds):
        self.th = thresholds
        self._peak: tuple[int, float] | None = None  # (iteration, success) of the latest solve not yet alerted
        self._fall: tuple[int, float, int, float] | None = None  # (peak it, peak s, fall it, fall s): a dip pending
        self._entropy_base: list[float] = []
        self._entropy_alerted = False
        self._no_signal_run = 0
        self._no_signal_won: list[float] = []

    def observe(self, rec: dict) -> list[Alert]:
        it = rec.get("iteration")
        s = _num(rec, "rollout/success_rate")
        if not isinstance(it, int) or s is None:  # an eval-only record (iteration 0) or a foreign line
            return []
        th, out = self.th, []
        if th.collapse_window:
            if s >= th.collapse_high:  # solved (again): a pending dip was only a dip
                self._peak, self._fall = (it, s), None
            elif self._fall is None and self._peak is not None and s <= th.collapse_low:
                if it - self._peak[0] <= th.collapse_window:
                    self._fall = (*self._peak, it, s)
                self._peak = None
            if self._fall is not None and it - self._fall[2] + 1 >= th.collapse_sustain:
                pu, ps, ft, fs = self._fall
                self._fall = None
                out.append(Alert(it, "collapse", f"sampled success fell from {ps:.2f} (iteration {pu}) to {fs:.2f} "
                                 f"(iteration {ft}) and stayed below {th.collapse_high:g} for {th.collapse_sustain} "
                                 "iteration(s): the policy collapsed after solving"))
        ent = _num(rec, "loss/entropy")
        if th.entropy_ratio and ent is not None and not self._entropy_alerted:
            if len(self._entropy_base) < _ENTROPY_BASE_ITERATIONS:
                self._entropy_base.append(ent)
            else:
                base = sum(self._entropy_base) / len(self._entropy_base)
                if base > 0 and ent <= th.entropy_ratio * base and s < th.collapse_high:
                    self._entropy_alerted = True
                    out.append(Alert(it, "entropy", f"entropy {ent:.3g} is <= {th.entropy_ratio:g} x its start "
                                     f"({base:.3g}) while sampled success is {s:.2f}: the policy became "
                                     "deterministic without solving"))
        mean, std = _num(rec, "adv/mean"), _num(rec, "adv/std")
        if th.no_signal_iterations and mean is not None and std is not None:
            if mean == 0 and std == 0:
                self._no_signal_run += 1
                self._no_signal_won.append(s)
                if self._no_signal_run == th.no_signal_iterations:
                    what = ("every trajectory won" if min(self._no_signal_won) == 1 else
                            "no trajectory won" if max(self._no_signal_won) == 0 else "every group's returns equal")
                    out.append(Alert(it, "no_signal", f"{self._no_signal_run} iterations in a row without signal "
                                     f"(every advantage 0: {what}); nothing is being learned"))
            else:
                self._no_signal_run = 0
                self._no_signal_won = []
        return out


def replay(records: Iterable[dict], thresholds: HealthThresholds) -> list[Alert]:
    """Every alert a run's metrics records raise, in order (what the trainer logged, recomputed)."""
    mon = HealthMonitor(thresholds)
    return [a for r in records for a in mon.observe(r)]
