"""Per-iteration metrics: RUN_DIR/metrics.jsonl (one JSON object per line), optional TensorBoard, curves.png."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from gigpo.safefiles import json_lines, open_nofollow, replace_text


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):
        return _clean(v.item())
    return v


class MetricsLog:
    def __init__(self, run_dir: Path, tensorboard: bool = False):
        self.path = run_dir / "metrics.jsonl"
        self.tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(run_dir / "tensorboard"))
            except ImportError:  # tensorboard is an optional extra
                import warnings

                warnings.warn("train.tensorboard=true but tensorboard is not installed; logging to jsonl only",
                              stacklevel=2)

    def truncate_after(self, iteration: int) -> None:
        """On resume: drop records of iterations after the checkpoint (they will be recomputed), and a line
        half-written by a crash. Rewritten via a temporary file, so a crash here cannot lose the kept rows."""
        if not self.path.exists():
            return
        keep = []
        for ln in json_lines(self.path.read_text(encoding="utf-8")):
            try:
                if int(json.loads(ln)["iteration"]) <= iteration:
                    keep.append(ln)
            except (ValueError, KeyError, TypeError):
                continue
        replace_text(self.path, "".join(ln + "\n" for ln in keep))

    def write(self, record: dict) -> None:
        record = {k: _clean(v) for k, v in record.items()}
        with open_nofollow(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
        if self.tb is not None:
            for k, v in record.items():
                if isinstance(v, (int, float)) and k != "iteration":
                    self.tb.add_scalar(k.replace(".", "/"), v, record["iteration"])
            self.tb.flush()


def read_metrics(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in json_lines(Path(path).read_text(encoding="utf-8")) if ln.strip()]


def plot_curves(metrics_path: Path, out: Path) -> Path | None:
    """Learning curves (train success/return, eval success, loss, step-group size) as one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_path)
    if not rows:
        return None
    panels = [
        ("rollout/success_rate", "eval/success_rate", "success rate"),
        ("rollout/episode_return", None, "episode return"),
        ("rollout/valid_action_rate", None, "valid-action rate"),
        ("loss/policy", None, "policy loss"),
        ("grouping/mean_step_group_size", None, "mean step-group size"),
        ("loss/entropy", None, "entropy"),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, (key, key2, title) in zip(axes.flat, panels):
        for k, style in ((key, "-"), (key2, "o-")):
            if k is None:
                continue
            pts = [(r["iteration"], r[k]) for r in rows if r.get(k) is not None]
            if pts:
                ax.plot(*zip(*pts), style, label=k, markersize=3)
        ax.set_title(title)
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
        if key2:
            ax.legend(fontsize=7)
    fig.tight_layout()
    with open_nofollow(out, "wb") as f:  # never through a link planted at curves.png
        fig.savefig(f, format="png", dpi=100)
    plt.close(fig)
    return out
