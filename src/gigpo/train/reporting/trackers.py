"""Experiment trackers behind ``train.loggers``: TensorBoard, Weights & Biases, MLflow — and any tracker a
user's module registers with :func:`register_tracker` (loaded with ``--import MODULE``): a class implementing
:class:`Tracker`, named in ``train.loggers`` like a built-in.

Each gets the resolved config, every metric of every iteration, the sample tables (samples/iter_N.jsonl), the
health alerts (:mod:`gigpo.train.reporting.health`) and, at the end, ``curves.png``:

* ``tensorboard``: RUN_DIR/tensorboard (``train.tensorboard=true`` is the same); config, samples and alerts as
  text, the curves as an image.
* ``wandb``: offline into RUN_DIR/wandb unless a W&B key is set (``WANDB_API_KEY`` or a ``wandb login`` entry in
  ~/.netrc); ``WANDB_MODE`` / ``WANDB_PROJECT`` (default ``gigpo``) are honoured. ``wandb sync RUN_DIR/wandb/
  offline-run-*`` uploads an offline run later. Metrics use ``iteration`` as their step metric, so a resumed run
  that recomputes iterations after its checkpoint logs them again instead of being dropped as out of order.
* ``mlflow``: MLflow's local file store RUN_DIR/mlruns unless ``MLFLOW_TRACKING_URI`` is set;
  ``MLFLOW_EXPERIMENT_NAME`` (default ``gigpo``). MLflow 3 keeps the file store in maintenance mode behind
  ``MLFLOW_ALLOW_FILE_STORE=true``, which is set for this process when the file store is ours. Read it with
  ``MlflowClient("file:RUN_DIR/mlruns")`` or ``mlflow ui --backend-store-uri RUN_DIR/mlruns``.

A resume continues the same W&B / MLflow run (their ids are kept in RUN_DIR/trackers.json). A tracker that fails
while training is logged once and switched off: a tracker is never worth the run.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import netrc
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import yaml

from gigpo.safefiles import write_text_nofollow
from gigpo.train.config.secrets import mask_config

log = logging.getLogger(__name__)

@runtime_checkable
class Tracker(Protocol):
    """One tracker of a run (rank 0 only), built as ``cls(run_dir, cfg_dict, ids)``: ``cfg_dict`` is the resolved
    config with secrets masked; ``ids`` a mapping kept in RUN_DIR/trackers.json across resumes (store a run id
    under the tracker's name to continue the same remote run). Every call may raise: the tracker is then warned
    about once and switched off, the run goes on."""

    name: str

    def metrics(self, it: int, rec: dict) -> None:
        """Iteration ``it``'s metrics record (numbers, plus a few strings)."""
        ...

    def samples(self, it: int, trajectories: list[dict], path: Path) -> None:
        """The sample records of iteration ``it`` (:mod:`gigpo.train.reporting.step_records`), written to ``path``."""
        ...

    def alert(self, a: Any) -> None:
        """A health alert (:class:`gigpo.train.reporting.health.Alert`: ``kind``, ``iteration``, ``message``)."""
        ...

    def finish(self, curves: Path | None, ok: bool) -> None:
        """The end of the run: ``curves`` the curves image (None when not drawn); ``ok`` false when it failed."""
        ...


@dataclass(frozen=True)
class TrackerEntry:
    """A registered tracker: its class; ``requires``, a module that must be importable (checked with the
    config) and ``install``, how to get it; ``description`` (``--help``)."""

    name: str
    cls: Callable[[Path, dict, dict], Tracker]
    description: str = ""
    requires: str = ""
    install: str = ""


#: ``train.loggers`` name -> its :class:`TrackerEntry`, the one table of trackers.
TRACKERS: dict[str, TrackerEntry] = {}


def register_tracker(name: str, cls: type | None = None, *, description: str = "", requires: str = "",
                     install: str = "") -> Any:
    """Register tracker class ``cls`` as ``train.loggers`` name ``name`` (without ``cls``: a class decorator).
    The class implements :class:`Tracker`; ``requires`` names a module it needs (``install``: how to install it).
    A name taken by another class is a ValueError (the same class again — its module imported twice — is not)."""

    def deco(klass: type) -> type:
        missing = [m for m in ("metrics", "samples", "alert", "finish") if not callable(getattr(klass, m, None))]
        if missing:
            raise TypeError(f"tracker {name!r}: {klass.__qualname__} lacks {', '.join(missing)} (gigpo.train."
                            "trackers.Tracker)")
        old = TRACKERS.get(name)
        if old is not None and (old.cls.__module__, old.cls.__qualname__) != (klass.__module__, klass.__qualname__):
            raise ValueError(f"tracker {name!r} is already registered (by {old.cls.__module__})")
        doc = description or (klass.__doc__ or "").strip().split("\n")[0]
        TRACKERS[name] = TrackerEntry(name, klass, doc, requires, install)
        return klass

    return deco if cls is None else deco(cls)


def registered_trackers() -> dict[str, TrackerEntry]:
    """Every registered tracker, in registration order (the built-ins first)."""
    return dict(TRACKERS)


IDS_FILE = "trackers.json"
_TABLE_TEXT = 300  #: characters of an observation / response kept in a tracker's sample table
_TABLE_COLUMNS = ["iteration", "group", "traj", "t", "action", "reward", "R", "A_E", "A_S", "A", "sg", "won",
                  "observation", "response"]


def logger_names(cfg: Any) -> list[str]:
    """``train.loggers`` as a list of names (a list, or a string ``"wandb,mlflow"`` / ``"[wandb, mlflow]"``),
    plus ``tensorboard`` when ``train.tensorboard`` is true; order kept, duplicates dropped."""
    raw = cfg.train.loggers
    if isinstance(raw, str):
        raw = [x for x in re.split(r"[\s,\[\]'\"]+", raw) if x]
    elif raw is None:
        raw = []
    names = [str(x).strip().lower() for x in raw] + (["tensorboard"] if cfg.train.tensorboard else [])
    return list(dict.fromkeys(names))


def check_loggers(cfg: Any, check: Any) -> None:
    """A name that is no registered tracker, or a tracker that is not installed: one config error naming the
    registered ones, or the install."""
    raw = cfg.train.loggers
    check(raw is None or isinstance(raw, (str, list, tuple)),
          f"train.loggers must be a list of {', '.join(TRACKERS)}, got {raw!r}")
    for name in logger_names(cfg):
        check(name in TRACKERS, f"train.loggers: {name!r} is not one of {', '.join(TRACKERS)} (a tracker of your "
                                "own: register_tracker in a module loaded with --import MODULE)")
        entry = TRACKERS[name]
        check(not entry.requires or importlib.util.find_spec(entry.requires) is not None,
              f"train.loggers: {name} is not installed ({entry.install or 'pip install ' + entry.requires})")


def flat_config(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flat_config(v, key + "."))
        else:
            out[key] = v
    return out


def _scalars(rec: dict) -> dict[str, float]:
    return {k: float(v) for k, v in rec.items()
            if k != "iteration" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def table_rows(iteration: int, trajectories: list[dict]) -> list[list[Any]]:
    """One row per step of the sample records (see :mod:`gigpo.train.reporting.step_records`), texts cut short."""
    rows = []
    for t in trajectories:
        for s in t.get("steps", ()):
            rows.append([iteration, t.get("group"), t.get("traj"), s.get("t"), s.get("action"), s.get("reward"),
                         s.get("R"), s.get("A_E"), s.get("A_S"), s.get("A"), s.get("sg"), t.get("won"),
                         str(s.get("obs", ""))[:_TABLE_TEXT], str(s.get("response", ""))[:_TABLE_TEXT]])
    return rows


@register_tracker("tensorboard", requires="tensorboard", install="pip install tensorboard",
                  description="TensorBoard event files in RUN_DIR/tensorboard")
class _TensorBoard:
    name = "tensorboard"

    def __init__(self, run_dir: Path, cfg_dict: dict, ids: dict):
        from torch.utils.tensorboard import SummaryWriter

        self.w = SummaryWriter(str(run_dir / "tensorboard"))
        self.w.add_text("config", "```\n" + yaml.safe_dump(cfg_dict, sort_keys=False) + "\n```", 0)

    def metrics(self, it: int, rec: dict) -> None:
        for k, v in _scalars(rec).items():
            self.w.add_scalar(k, v, it)
        self.w.flush()

    def samples(self, it: int, trajectories: list[dict], path: Path) -> None:
        rows = table_rows(it, trajectories)[:64]
        head = "| " + " | ".join(_TABLE_COLUMNS[3:11]) + " |\n|" + "---|" * 8 + "\n"
        body = "".join("| " + " | ".join(str(x) for x in r[3:11]) + " |\n" for r in rows)
        self.w.add_text("samples", head + body, it)

    def alert(self, a: Any) -> None:
        self.w.add_text(f"health/{a.kind}", a.message, a.iteration)
        self.w.add_scalar(f"health/alert_{a.kind}", 1.0, a.iteration)

    def finish(self, curves: Path | None, ok: bool) -> None:
        if curves is not None and curves.exists():
            import numpy as np
            from PIL import Image

            self.w.add_image("curves", np.asarray(Image.open(curves).convert("RGB")), dataformats="HWC")
        self.w.close()


def _wandb_key_present() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:  # `wandb login` writes ~/.netrc, or the file $NETRC names (as wandb reads it)
        return netrc.netrc(os.environ.get("NETRC") or None).authenticators("api.wandb.ai") is not None
    except (OSError, netrc.NetrcParseError):
        return False


@register_tracker("wandb", requires="wandb", install="pip install 'gigpo[wandb]'",
                  description="Weights & Biases: offline into RUN_DIR/wandb unless a W&B key is set")
class _Wandb:
    name = "wandb"

    def __init__(self, run_dir: Path, cfg_dict: dict, ids: dict):
        mode = os.environ.get("WANDB_MODE") or ("online" if _wandb_key_present() else "offline")
        if mode == "offline":
            # process-wide, before wandb is imported: wandb's own telemetry (an OpenTelemetry exporter started
            # with its global settings) then stays off too. Otherwise an offline run still probes W&B's
            # servers, and where they cannot be reached the process hangs ~30 s at exit (measured)
            os.environ["WANDB_MODE"] = "offline"
        import wandb

        self.wandb = wandb
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "gigpo"), name=run_dir.name,
                              dir=str(run_dir), config=cfg_dict, id=ids.get("wandb"), resume="allow", mode=mode,
                              settings=wandb.Settings(silent=True, console="off"))
        ids["wandb"] = self.run.id
        self.run.define_metric("iteration")
        self.run.define_metric("*", step_metric="iteration")
        self.online = mode == "online"

    def metrics(self, it: int, rec: dict) -> None:
        self.run.log({"iteration": it, **_scalars(rec)})

    def samples(self, it: int, trajectories: list[dict], path: Path) -> None:
        table = self.wandb.Table(columns=_TABLE_COLUMNS, data=table_rows(it, trajectories))
        self.run.log({"iteration": it, "samples": table})

    def alert(self, a: Any) -> None:
        self.run.log({"iteration": a.iteration, f"health/alert_{a.kind}": 1.0})
        self.run.summary[f"health/last_{a.kind}"] = a.message
        if self.online:  # W&B's own alert (mail/Slack) exists for online runs only
            self.run.alert(title=f"gigpo: {a.kind}", text=a.message, level=self.wandb.AlertLevel.WARN)

    def finish(self, curves: Path | None, ok: bool) -> None:
        if curves is not None and curves.exists():
            self.run.log({"curves": self.wandb.Image(str(curves))})
        self.run.finish(exit_code=0 if ok else 1)


@register_tracker("mlflow", requires="mlflow", install="pip install 'gigpo[mlflow]'",
                  description="MLflow: file store RUN_DIR/mlruns unless MLFLOW_TRACKING_URI is set")
class _Mlflow:
    name = "mlflow"

    def __init__(self, run_dir: Path, cfg_dict: dict, ids: dict):
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            uri = (run_dir / "mlruns").resolve().as_uri()
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3: the file store is opt-in
        self.c = MlflowClient(tracking_uri=uri)
        run_id = ids.get("mlflow")
        if run_id:
            self.c.update_run(run_id, status="RUNNING")
        else:
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "gigpo")
            exp = self.c.get_experiment_by_name(name)
            exp_id = exp.experiment_id if exp is not None else self.c.create_experiment(name)
            run_id = self.c.create_run(exp_id, run_name=run_dir.name, tags={"gigpo.run_dir": str(run_dir)}).info.run_id
            params = [Param(k, str(v)[:6000]) for k, v in flat_config(cfg_dict).items()]
            for i in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
                self.c.log_batch(run_id, params=params[i:i + 100])
            self.c.log_text(run_id, yaml.safe_dump(cfg_dict, sort_keys=False), "config.yaml")
        ids["mlflow"] = self.run_id = run_id

    def metrics(self, it: int, rec: dict) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        ms = [Metric(re.sub(r"[^\w\-. /]", "_", k), v, now, it) for k, v in _scalars(rec).items()]
        for i in range(0, len(ms), 1000):
            self.c.log_batch(self.run_id, metrics=ms[i:i + 1000])

    def samples(self, it: int, trajectories: list[dict], path: Path) -> None:
        self.c.log_artifact(self.run_id, str(path), "samples")

    def alert(self, a: Any) -> None:
        self.c.log_metric(self.run_id, f"health/alert_{a.kind}", 1.0, step=a.iteration)
        self.c.set_tag(self.run_id, f"health.{a.kind}.iter_{a.iteration}", a.message[:5000])

    def finish(self, curves: Path | None, ok: bool) -> None:
        if curves is not None and curves.exists():
            self.c.log_artifact(self.run_id, str(curves))
        self.c.set_terminated(self.run_id, "FINISHED" if ok else "KILLED")


class Trackers:
    """The trackers of one run (rank 0 only). Every call is guarded: a tracker that raises is warned about once
    and dropped, the others and the run go on."""

    def __init__(self, cfg: Any, run_dir: Path):
        self.run_dir = run_dir
        self.active: list[Any] = []
        names = logger_names(cfg)
        if not names:
            return
        ids_path = run_dir / IDS_FILE
        try:
            ids = json.loads(ids_path.read_text()) if ids_path.exists() else {}
        except ValueError:
            ids = {}
        cfg_dict = mask_config(cfg.to_dict())  # a tracker's config is shared with a team or a service
        for name in names:
            try:
                self.active.append(TRACKERS[name].cls(run_dir, cfg_dict, ids))
            except Exception as e:  # noqa: BLE001 - e.g. W&B online without a reachable server
                log.warning("tracker %s could not start (%s: %s); training goes on without it",
                            name, type(e).__name__, e)
        write_text_nofollow(ids_path, json.dumps(ids, indent=1) + "\n")

    def _each(self, method: str, *args: Any) -> None:
        for t in list(self.active):
            try:
                getattr(t, method)(*args)
            except Exception as e:  # noqa: BLE001
                log.warning("tracker %s failed in %s (%s: %s); it is switched off for this run",
                            getattr(t, "name", type(t).__name__), method, type(e).__name__, e)
                self.active.remove(t)

    def metrics(self, it: int, rec: dict) -> None:
        self._each("metrics", it, rec)

    def samples(self, it: int, trajectories: list[dict], path: Path) -> None:
        self._each("samples", it, trajectories, path)

    def alert(self, a: Any) -> None:
        self._each("alert", a)

    def finish(self, curves: Path | None, ok: bool = True) -> None:
        self._each("finish", curves, ok)
        self.active = []
