"""Checkpoints that load no code, are written atomically and verified before a resume.

Format 2, one directory ``checkpoints/iter_NNNNNN/`` per save:

* ``model/``: HF safetensors + config + tokenizer (JSON), as :func:`gigpo.models.save_pretrained` writes it;
* ``value_head.safetensors``: the PPO critic (only for algorithms with one);
* ``optimizer.pt``: ``optimizer.state_dict()`` (tensors + plain python) via ``torch.save``, read back with
  ``torch.load(weights_only=True)``: that unpickler only rebuilds tensors and containers, so a crafted file
  that would run code is refused with :class:`CheckpointError` instead of executed;
* ``rng.json``: torch / numpy / python RNG states as JSON lists (no pickle at all);
* ``trainer_state.json``: iteration, seed, run id, time;
* ``manifest.json``, written last: every file's size and sha256. A resume recomputes them and falls back to the
  newest checkpoint that matches (a truncated or corrupt file, a missing or unreadable manifest: skipped).

The manifest detects truncation and corruption, not malice (whoever sends a crafted directory can rewrite it);
safety against foreign code comes from the formats above, plus the refusal of any other pickle-capable file.
Checkpoints of format 1 (an older gigpo: pickled ``rng.pt``, no manifest) are skipped with that reason: their
RNG file cannot be read without unpickling. Their model weights still load with ``gigpo eval`` / ``model=DIR``.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import pickle
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

FORMAT = 2
STATE_FILE = "trainer_state.json"
OPTIMIZER_FILE = "optimizer.pt"
RNG_FILE = "rng.json"
MANIFEST_FILE = "manifest.json"
REQUIRED = (STATE_FILE, OPTIMIZER_FILE, RNG_FILE, "model/config.json")
#: suffixes of files that torch/transformers would read with pickle; only OPTIMIZER_FILE (weights_only) is allowed
PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt")
TMP_PREFIX = ".tmp-"
_ITER_RE = re.compile(r"iter_(\d+)$")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be written (full disk) or must not be read (it would run code)."""


class NoCheckpointError(FileNotFoundError):
    """Nothing to resume from: no checkpoint, or none intact (the message lists why each was skipped)."""


def checkpoint_dir(run_dir: Path, iteration: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"iter_{iteration:06d}"


def iteration_of(ckpt: Path) -> int:
    m = _ITER_RE.match(ckpt.name)
    return int(m.group(1)) if m else -1


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints, oldest first (renamed into place only once complete: the state file marks one;
    integrity is checked separately by :func:`verify_checkpoint`)."""
    root = Path(run_dir) / "checkpoints"
    if not root.exists():
        return []
    found = [p for p in root.iterdir() if _ITER_RE.match(p.name) and (p / STATE_FILE).is_file()]
    return sorted(found, key=iteration_of)


def remove_stale_tmp(run_dir: Path) -> list[Path]:
    """Remove ``checkpoints/.tmp-*`` folders left by a crash or a full disk (one run writes a run dir at a time,
    so any temporary folder found before a save or a resume is dead)."""
    root = Path(run_dir) / "checkpoints"
    stale = sorted(root.glob(f"{TMP_PREFIX}*")) if root.exists() else []
    for p in stale:
        shutil.rmtree(p, ignore_errors=True)
    return stale


# ---------------------------------------------------------------------------------------------------------- save
def rng_state() -> dict:
    """All process RNG states as JSON-able lists (torch ByteTensor → ints; numpy MT19937 key → ints)."""
    kind, key, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state = {
        "torch": torch.get_rng_state().tolist(),
        "numpy": [kind, key.tolist(), int(pos), int(has_gauss), float(gauss)],
        "python": [version, list(internal), gauss_next],
    }
    if torch.cuda.is_available():
        state["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return state


def restore_rng(state: dict) -> None:
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    kind, key, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, np.asarray(key, dtype=np.uint32), pos, has_gauss, gauss))
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    cuda = state.get("cuda")
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in cuda])


def _write_bytes(path: Path, data: bytes) -> None:
    # Python file I/O, not torch.save's C++ stream: a full disk then raises OSError(ENOSPC) rather than
    # "RuntimeError: basic_ios::clear".
    with open(path, "wb") as f:
        f.write(data)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files_of(ckpt: Path) -> list[str]:
    return sorted(p.relative_to(ckpt).as_posix() for p in ckpt.rglob("*") if p.is_file())


def write_manifest(ckpt: Path) -> None:
    files = {rel: {"size": (ckpt / rel).stat().st_size, "sha256": _sha256(ckpt / rel)}
             for rel in _files_of(ckpt) if rel != MANIFEST_FILE}
    _write_bytes(ckpt / MANIFEST_FILE, json.dumps({"format": FORMAT, "files": files}, indent=1).encode())


def _disk_full(exc: BaseException) -> bool:
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:  # the ENOSPC may sit under a library's own exception
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            return True
        if any(s in str(e) for s in ("No space left on device", "os error 28", "StorageFull")):
            return True
        e = e.__cause__ or e.__context__
    return False


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def save_checkpoint(
    run_dir: Path, iteration: int, save_model: Callable[[Path], None], optimizer: torch.optim.Optimizer,
    extra: dict, keep: int, *, optimizer_state: dict | None = None,
) -> Path:
    """Write into ``checkpoints/.tmp-iter_N-PID``, manifest last, then rename: a crash, Ctrl-C or full disk
    never leaves a half checkpoint under an ``iter_*`` name, and the previous ones stay untouched.

    ``save_model(path)`` writes the model/tokenizer (and the value head next to it). Afterwards
    :func:`prune_checkpoints` keeps ``keep`` checkpoints of this run (``extra["run_id"]``). ``optimizer_state``:
    what to store instead of ``optimizer.state_dict()`` (FSDP: the state consolidated over ranks).
    """
    run_dir = Path(run_dir)
    final = checkpoint_dir(run_dir, iteration)
    remove_stale_tmp(run_dir)
    tmp = final.parent / f"{TMP_PREFIX}{final.name}-{os.getpid()}"
    try:
        tmp.mkdir(parents=True)
        save_model(tmp / "model")
        buf = io.BytesIO()
        torch.save(optimizer.state_dict() if optimizer_state is None else optimizer_state, buf)
        _write_bytes(tmp / OPTIMIZER_FILE, buf.getvalue())
        _write_bytes(tmp / RNG_FILE, json.dumps(rng_state()).encode())
        _write_bytes(tmp / STATE_FILE, json.dumps({"iteration": iteration, "format": FORMAT, **extra}, indent=2,
                                                  default=str).encode())
        write_manifest(tmp)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, Exception) and _disk_full(e):
            root = final.parent if final.parent.exists() else run_dir
            free = shutil.disk_usage(root).free
            prev = list_checkpoints(run_dir)
            raise CheckpointError(
                f"cannot save checkpoint {final}: no space left on device ({_human(free)} free on {root}); the "
                f"partial copy was removed and {prev[-1] if prev else 'no earlier checkpoint'} is "
                f"{'intact' if prev else 'there'}. Free some space, then `gigpo train --resume {run_dir}`"
            ) from e
        raise
    if final.exists():  # the same iteration saved again (a resumed run replaying it): replace
        shutil.rmtree(final)
    os.replace(tmp, final)
    prune_checkpoints(run_dir, keep, extra.get("run_id"), final)
    return final


def _state_or_none(ckpt: Path) -> dict | None:
    try:
        state = json.loads((ckpt / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def prune_checkpoints(run_dir: Path, keep: int, run_id: str | None, newest: Path) -> list[Path]:
    """Delete checkpoints of run ``run_id`` older than ``newest`` beyond the last ``keep`` (``newest`` counts).

    Never ``newest`` itself, never a checkpoint of another run (a foreign or pre-manifest directory), never one
    newer than ``newest`` (a resumed run overwrites those when it gets there)."""
    if not run_id:
        return []
    mine = [p for p in list_checkpoints(run_dir)
            if iteration_of(p) < iteration_of(newest) and (_state_or_none(p) or {}).get("run_id") == run_id]
    doomed = mine[:max(len(mine) - (keep - 1), 0)]
    for p in doomed:
        shutil.rmtree(p, ignore_errors=True)
    return doomed


# ---------------------------------------------------------------------------------------------------------- load
def verify_checkpoint(ckpt: Path) -> str | None:
    """None when ``ckpt`` is intact (every file matches the manifest), else why it must be skipped."""
    try:
        manifest = json.loads((ckpt / MANIFEST_FILE).read_text())
    except FileNotFoundError:
        if (ckpt / "rng.pt").exists():
            return ("no manifest.json: written by an older gigpo (checkpoint format 1), whose pickled rng.pt "
                    "cannot be read safely")
        return "no manifest.json (incomplete or not written by gigpo)"
    except (OSError, ValueError) as e:
        return f"manifest.json is unreadable ({e})"
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, dict) or manifest.get("format") != FORMAT:
        return f"manifest.json is not a format-{FORMAT} manifest"
    for need in REQUIRED:
        if need not in files:
            return f"the manifest does not list {need}"
    if not any(f.startswith("model/") and f.endswith(".safetensors") for f in files):
        return "model/ holds no safetensors weights"
    present = set(_files_of(ckpt)) - {MANIFEST_FILE}
    unlisted = sorted(present - set(files))
    if unlisted:
        return f"{unlisted[0]} is not in the manifest"
    for rel, meta in files.items():
        p = ckpt / rel
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            return f"the manifest names a path outside the checkpoint ({rel})"
        if rel != OPTIMIZER_FILE and rel.endswith(PICKLE_SUFFIXES):
            return f"{rel} is a pickle-format file (a checkpoint holds no code; only {OPTIMIZER_FILE} is allowed)"
        if rel not in present:
            return f"{rel} is missing"
        size = p.stat().st_size
        if not isinstance(meta, dict) or size != meta.get("size"):
            return f"{rel} is truncated or changed ({size} bytes, the manifest says {meta.get('size')})"
        if _sha256(p) != meta.get("sha256"):
            return f"{rel} is corrupt (its sha256 differs from the manifest)"
    return None


def newest_intact_checkpoint(run_dir: Path) -> tuple[Path | None, list[tuple[Path, str]]]:
    """``(newest checkpoint that verifies, [(newer checkpoint skipped, why), ...])``."""
    skipped: list[tuple[Path, str]] = []
    root = Path(run_dir) / "checkpoints"
    candidates = sorted((p for p in root.iterdir() if _ITER_RE.match(p.name) and p.is_dir()),
                        key=iteration_of, reverse=True) if root.exists() else []
    for ckpt in candidates:
        reason = verify_checkpoint(ckpt)
        if reason is None:
            return ckpt, skipped
        skipped.append((ckpt, reason))
    return None, skipped


def load_trainer_state(ckpt: Path) -> dict:
    state = _state_or_none(ckpt)
    if state is None or not isinstance(state.get("iteration"), int):
        raise CheckpointError(f"{ckpt / STATE_FILE} is not a trainer state")
    return state


def load_optimizer_state(ckpt: Path) -> dict:
    """``optimizer.state_dict()`` of ``ckpt``, unpickled with ``weights_only=True`` (tensors and containers only)."""
    path = ckpt / OPTIMIZER_FILE
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        first = next((ln for ln in lines if "Unsupported global" in ln), lines[0] if lines else type(e).__name__)
        raise CheckpointError(
            f"refusing to load {path}: it is not a plain tensor file and loading it could run code "
            f"(torch.load(weights_only=True): {first}). gigpo never writes such a file; do not resume a run "
            "directory you do not trust"
        ) from None
    if not isinstance(state, dict) or "state" not in state or "param_groups" not in state:
        raise CheckpointError(f"{path} is not an optimizer state_dict")
    return state


def load_rng_state(ckpt: Path) -> dict:
    try:
        state = json.loads((ckpt / RNG_FILE).read_text())
        if not all(k in state for k in ("torch", "numpy", "python")):
            raise ValueError("missing torch/numpy/python")
    except (OSError, ValueError, TypeError) as e:
        raise CheckpointError(f"{ckpt / RNG_FILE} is not an RNG state ({e})") from None
    return state


def set_aside(ckpt: Path) -> Path:
    """Rename a skipped checkpoint to ``skipped-iter_N`` (kept for inspection, out of every ``iter_*`` lookup)."""
    dest = ckpt.with_name(f"skipped-{ckpt.name}")
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(ckpt, dest)
    return dest


__all__ = ["CheckpointError", "NoCheckpointError", "checkpoint_dir", "list_checkpoints", "load_optimizer_state",
           "load_rng_state", "load_trainer_state", "newest_intact_checkpoint", "prune_checkpoints",
           "remove_stale_tmp", "restore_rng", "rng_state", "save_checkpoint", "set_aside", "verify_checkpoint"]
