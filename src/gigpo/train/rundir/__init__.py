"""What a run leaves on disk and finds again: the run directory, its lock, atomic verified checkpoints and provenance
(environment.json).

Run directories: a fresh run never writes into another run's directory, and a resume continues exactly the run
it names (same config unless told otherwise, from its newest intact checkpoint, or a clear refusal).

Everything here runs before any model loads, so a refusal costs nothing and leaves the directory as it was.
"""

from __future__ import annotations

import copy
import logging
import re
import shutil
import signal
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from gigpo.safefiles import read_regular, replace_text
from gigpo.train.config import Config, ConfigError, apply_overrides, config_from_dict, validate
from gigpo.train.config.secrets import has_secret, is_secret_key, mask_flat
from gigpo.train.rundir.checkpoint import (
    NoCheckpointError,
    load_optimizer_state,
    load_rng_state,
    load_trainer_state,
    newest_intact_checkpoint,
    remove_stale_tmp,
)
from gigpo.train.rundir.provenance import ENVIRONMENT_FILE, record_start
from gigpo.train.rundir.runlock import LOCK_FILE, RunDirLocked, lock_run_dir  # noqa: F401 - RunDirLocked: re-exported

log = logging.getLogger(__name__)

#: what a run writes into its directory; train.overwrite=true deletes these (and only these)
RUN_ENTRIES = ("checkpoints", "metrics.jsonl", "config.yaml", ENVIRONMENT_FILE, "curves.png", "samples",
               "tensorboard", "wandb", "mlruns", "trackers.json", "report.html")

#: keys a resume may change without --allow-config-change: how long, how often to evaluate/save/log, where and
#: how fast it runs; none changes what one iteration computes from the checkpoint (micro_batch_size sets
#: memory, not the math). Any other difference (env and its options, model, algorithm, rollout shape, optimiser,
#: seed, ...) would continue the weights under a different experiment.
SAFE_RESUME_KEYS = frozenset({
    "train.iterations", "train.checkpoint_every", "train.keep_checkpoints", "train.sample_trajectories",
    "train.progress", "train.tensorboard", "train.threads", "train.max_failed_iterations",
    "rollout.env_timeout_s", "model.device", "optim.micro_batch_size",
})
#: how often / where to evaluate, which samples to write, which trackers log, when to warn
SAFE_RESUME_PREFIXES = ("train.eval_", "train.sample_", "train.health_", "train.loggers")
#: the run directory is --resume's argument and overwrite applies to fresh runs only
FORBIDDEN_ON_RESUME = ("train.run_dir", "train.overwrite")


class RunDirError(ConfigError):
    """A run directory that cannot be used as asked (holds another run, or is not a run)."""


class NothingToDo(Exception):
    """A resume whose run already reached ``train.iterations`` (not an error: the run is complete)."""


def default_run_dir(cfg: Config) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    # one directory level whatever the env's name: an adapter's id may hold '/' or ':' (openenv:http://host:port)
    env = re.sub(r"[^A-Za-z0-9._-]+", "-", cfg.env.name).strip("-") or "env"
    return Path("runs") / f"{env}-{cfg.algorithm.name.replace('+', '-')}-{stamp}"


#: the first line of every config.yaml gigpo writes into a run directory: a config.yaml without it is the user's
CONFIG_MARKER = "# gigpo run config: the resolved configuration of this run, written by gigpo train (--resume reads it)"
#: run entries that are directories: a run directory inside one of another run's would be taken for its files
NESTED_ENTRIES = ("checkpoints", "samples", "tensorboard", "wandb", "mlruns")


def written_by_gigpo(config_file: Path) -> bool:
    """``config_file`` is a regular file (not a link) whose first line is :data:`CONFIG_MARKER`."""
    if config_file.is_symlink():
        return False
    try:
        head, _ = read_regular(config_file, len(CONFIG_MARKER.encode()) + 2)
    except OSError:
        return False
    return head.decode("utf-8", "replace").splitlines()[:1] == [CONFIG_MARKER]


def _enclosing_run(path: Path) -> tuple[Path, Path] | None:
    """``(entry, run)`` when ``path`` is, or lies inside, an entry of :data:`NESTED_ENTRIES` of another run's
    directory (resolved whole, links included); None otherwise."""
    try:
        full = path.resolve()
    except (OSError, RuntimeError):
        return None
    for entry in (full, *full.parents):
        run = entry.parent
        if entry.name in NESTED_ENTRIES and run != entry and (
                written_by_gigpo(run / "config.yaml") or (run / "metrics.jsonl").is_file()):
            return entry, run
    return None


def check_run_files(run_dir: Path, *, fresh: bool) -> None:
    """RunDirError when a file a run writes is a symlink (it would be written wherever the link points) or, on a
    resume (``fresh=False``), one it reads back is not a regular file (a FIFO would block the resume forever)."""
    for name in (*RUN_ENTRIES, LOCK_FILE):
        p = run_dir / name
        if p.is_symlink():
            raise RunDirError(f"{p} is a symlink: a run writes its own files in its directory, never through a "
                              "link; remove it" + (", or choose another train.run_dir" if fresh else ""))
        if not fresh and p.exists() and not (p.is_file() or p.is_dir()):
            raise RunDirError(f"{p} is not a regular file (a FIFO, socket or device): remove it to resume")


def run_contents(run_dir: Path) -> list[str]:
    """What makes ``run_dir`` another run's directory: checkpoints or metrics (a lone config.yaml does not)."""
    used = []
    ck = run_dir / "checkpoints"
    if ck.is_dir() and any(ck.iterdir()):
        used.append("checkpoints/")
    if (run_dir / "metrics.jsonl").exists():
        used.append("metrics.jsonl")
    return used


def check_fresh_run_dir(cfg: Config, run_dir: str | Path | None = None) -> None:
    """Refuse a fresh run into a directory that holds a run, unless ``train.overwrite``. No side effects."""
    explicit = run_dir or cfg.train.run_dir
    if not explicit:
        return  # default names are created exclusively (create_run_dir)
    path = Path(explicit)
    if path.exists() and not path.is_dir():
        raise RunDirError(f"train.run_dir={path} is a file, not a directory")
    check_run_files(path, fresh=True)
    nested = _enclosing_run(path)
    if nested is not None:
        raise RunDirError(f"train.run_dir={path} is inside {nested[0]} of the run {nested[1]}: its files would be "
                          "taken for that run's (gigpo eval, --resume); choose a directory outside it")
    used = run_contents(path) if path.is_dir() else []
    if used and not cfg.train.overwrite:
        raise RunDirError(
            f"{path} already holds a run ({', '.join(used)}); continue it with `gigpo train --resume {path}`, "
            "or pass train.overwrite=true to delete its checkpoints and metrics and start over"
        )
    own = path / "config.yaml"
    if not used and (own.exists() or own.is_symlink()) and not written_by_gigpo(own):
        # a lone config.yaml gigpo did not write is the user's own (often the --config file itself): the run
        # would replace it with its resolved dump, comments and all
        raise RunDirError(f"{own} is not a run's config (gigpo did not write it; your own config file?): a run "
                          "writes its resolved config.yaml there and would replace it; choose another "
                          "train.run_dir, or move the file")


def create_run_dir(cfg: Config, run_dir: str | Path | None = None) -> Path:
    """:func:`_create_run_dir`, with a directory that cannot be written (read-only filesystem, no permission,
    a full disk) reported as one RunDirError naming it instead of an OSError traceback."""
    try:
        return _create_run_dir(cfg, run_dir)
    except RunDirError:
        raise
    except OSError as e:
        where = e.filename or run_dir or cfg.train.run_dir or "runs/"
        raise RunDirError(f"cannot create the run directory {where}: {e.strerror or e}; choose a writable "
                          "train.run_dir") from None


def _create_run_dir(cfg: Config, run_dir: str | Path | None = None) -> Path:
    """The directory of a fresh run, created now (call it once the config is valid and the model source exists).

    An explicit one is checked again and, with ``train.overwrite``, cleared of a previous run's files. A default
    name is created with ``mkdir(exist_ok=False)``: two runs started in the same second get ``-2``, ``-3``, ...
    instead of sharing one directory. Either way the directory's lock (:mod:`gigpo.train.rundir.runlock`) is taken
    for this process before anything is written, and the explicit one is checked once more under it: of two runs
    started at the same instant into one directory, the second stops with :class:`RunDirLocked` (exit 2)."""
    explicit = run_dir or cfg.train.run_dir
    if explicit:
        path = Path(explicit)
        check_fresh_run_dir(cfg, path)
        path.mkdir(parents=True, exist_ok=True)
        lock_run_dir(path)
        check_fresh_run_dir(cfg, path)  # a run that finished between the first check and the lock
        if cfg.train.overwrite and path.is_dir():
            for name in RUN_ENTRIES:
                p = path / name
                if p.is_dir():
                    shutil.rmtree(p)
                elif p.exists():
                    p.unlink()
        path.mkdir(parents=True, exist_ok=True)
        return path
    base = default_run_dir(cfg)
    base.parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        path = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            path.mkdir()
            lock_run_dir(path)
            return path
        except FileExistsError:
            n += 1


def write_run_records(run_dir: Path, cfg: Config, start_iteration: int, device: str) -> None:
    """At each start of a run (fresh or resumed): its resolved config.yaml, and the environment record of
    :mod:`gigpo.train.rundir.provenance` (what decides its numerics)."""
    saved = cfg.to_dict()
    # overwrite cleared the directory once; a copy of this file used as --config must not clear it again
    saved["train"]["overwrite"] = False
    # the marker line tells this file from a user's own config.yaml; a key in it (rollout.openai.api_key, kept:
    # a resume needs it) makes it readable by its owner only; never written through a symlink
    replace_text(run_dir / "config.yaml", CONFIG_MARKER + "\n" + yaml.safe_dump(saved, sort_keys=False),
                 perms=0o600 if has_secret(saved) else 0o644)
    from gigpo.envs.registry import imports_for

    record_start(run_dir, start_iteration, device, imports_for(cfg.env.name, cfg.algorithm.name))


# -------------------------------------------------------------------------------------------------------- resume
def read_run_config(run_dir: Path) -> Config:
    """The run's config.yaml as a validated Config, or one clear error."""
    cfg_file = run_dir / "config.yaml"
    if not run_dir.is_dir():
        raise RunDirError(f"--resume {run_dir}: no such run directory")
    if not cfg_file.is_file():
        raise RunDirError(f"{run_dir} is not a gigpo run directory (no config.yaml)")
    try:
        data = yaml.safe_load(cfg_file.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise RunDirError(f"{cfg_file} is not valid YAML ({getattr(e, 'problem', None) or e}{where}); restore it "
                          "to resume this run") from None
    except (OSError, UnicodeDecodeError) as e:
        raise RunDirError(f"{cfg_file} cannot be read ({e})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{cfg_file} is not a gigpo config (expected a mapping)")
    try:
        return config_from_dict(data)
    except ConfigError as e:
        raise RunDirError(f"{cfg_file}: {e}") from None


def _flat(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = list(v) if isinstance(v, tuple) else v
    return out


def config_changes(old: Config, new: Config) -> dict[str, tuple[Any, Any]]:
    """``{key: (old, new)}`` for every leaf that differs (env/model options included), run_dir excluded."""
    a, b = mask_flat(_flat(old.to_dict())), mask_flat(_flat(new.to_dict()))  # messages never show a secret
    unset = "<unset>"
    return {k: (a.get(k, unset), b.get(k, unset)) for k in sorted(set(a) | set(b))
            if a.get(k, unset) != b.get(k, unset) and k != "train.run_dir"}


def safe_on_resume(key: str) -> bool:
    # a rotated API key changes who may call the servers, not what is trained
    return key in SAFE_RESUME_KEYS or key.startswith(SAFE_RESUME_PREFIXES) or is_secret_key(key)


@dataclass
class ResumePlan:
    """Everything a resume needs, read and checked before the model loads."""

    run_dir: Path
    cfg: Config
    checkpoint: Path
    iteration: int
    state: dict
    optimizer_state: dict
    rng: dict
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)


def plan_resume(run_dir: str | Path, overrides: dict | None = None, *, allow_config_change: bool = False
                ) -> ResumePlan:
    """Check a resume of ``run_dir`` with ``overrides`` and load its newest intact checkpoint's state.

    Raises RunDirError/ConfigError (no run, broken config.yaml, forbidden or experiment-changing overrides),
    NoCheckpointError (nothing intact to resume from; never a silent restart), CheckpointError (a file that
    would run code) or NothingToDo (the run already reached train.iterations)."""
    run_dir = Path(run_dir)
    if run_dir.is_dir():
        check_run_files(run_dir, fresh=False)
    base = read_run_config(run_dir)
    overrides = dict(overrides or {})
    forbidden = [k for k in overrides if k in FORBIDDEN_ON_RESUME]
    if forbidden:
        raise ConfigError(f"{', '.join(forbidden)} cannot be set with --resume (the run directory is --resume's "
                          "argument; to start over use a fresh `gigpo train train.run_dir=... train.overwrite=true`)")
    cfg = copy.deepcopy(base)
    if overrides:
        apply_overrides(cfg, overrides)
        validate(cfg)
    changes = config_changes(base, cfg)
    unsafe = [k for k in changes if not safe_on_resume(k)]
    if unsafe and not allow_config_change:
        listed = ", ".join(f"{k} ({changes[k][0]!r} -> {changes[k][1]!r})" for k in unsafe)
        raise ConfigError(
            f"--resume {run_dir}: these overrides change what the run trains: {listed}; pass "
            "--allow-config-change to continue its weights under the new config, or start a new run. Allowed "
            f"without it: {', '.join(sorted(SAFE_RESUME_KEYS))}, train.eval_*"
        )
    cfg.train.run_dir = str(run_dir)  # the directory may have moved since config.yaml was written

    lock_run_dir(run_dir)  # a live run's .tmp-* save must not be taken for a stale one, nor its run continued twice
    for p in remove_stale_tmp(run_dir):
        log.warning("removed %s (a temporary folder left by an interrupted save)", p)
    ckpt, skipped = newest_intact_checkpoint(run_dir)
    for p, why in skipped:
        log.warning("skipping checkpoint %s: %s", p, why)
    fresh = f"start over with `gigpo train train.run_dir={run_dir} train.overwrite=true`"
    if ckpt is None:
        if skipped:
            why = "; ".join(f"{p.name}: {reason}" for p, reason in skipped)
            raise NoCheckpointError(f"{run_dir} has no intact checkpoint to resume from ({why}); {fresh}")
        raise NoCheckpointError(f"{run_dir} has no checkpoint to resume from (the run stopped before its first "
                                f"save); {fresh}")
    state = load_trainer_state(ckpt)
    it = int(state["iteration"])
    if cfg.train.iterations <= it:
        raise NothingToDo(f"nothing to do: {run_dir} already finished iteration {it} of {cfg.train.iterations}; "
                          f"pass train.iterations=N (N > {it}) to continue")
    return ResumePlan(run_dir, cfg, ckpt, it, state, load_optimizer_state(ckpt), load_rng_state(ckpt), skipped,
                      changes)


def install_sigterm_as_interrupt() -> None:
    """Treat SIGTERM like Ctrl-C so a killed run also stops between atomic checkpoint writes."""
    def _raise(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _raise)
