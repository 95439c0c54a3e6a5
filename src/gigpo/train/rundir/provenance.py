"""What a run ran on, kept beside its config: ``environment.json`` in the run directory.

Why: a seed fixes every random draw, but not the floating-point kernels. PyTorch picks its CPU kernels by the
machine's instruction set (``torch.backends.cpu.get_cpu_capability()``: ``AVX2``, ``AVX512``, ...), and
kernels for different instruction sets round differently. An RL run amplifies a last-bit difference into a
different trajectory: measured on `lock` (docs/results/credit.md, "Reproducing a run"), the same code and seed
gave the same 60-iteration run on 5 of 8 seeds and a different one on 3 (one solved-then-collapsed run became a
solved run) between an AVX2 and an AVX-512 machine; ``ATEN_CPU_CAPABILITY=avx2`` on the AVX-512 machine
reproduced the AVX2 runs exactly. So a run records what decides its numerics, and a resume on a machine that
differs in any of it says so: the continuation is valid, but it is not bit-identical to an uninterrupted run.

The file is a JSON list with one record per start of the run (the fresh start, then each resume), each with the
iteration it started from.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from gigpo.safefiles import read_regular_text, replace_text

log = logging.getLogger(__name__)

ENVIRONMENT_FILE = "environment.json"
#: environment.json is a few hundred bytes per start: anything near this is not gigpo's
ENVIRONMENT_MAX_BYTES = 16 * 2**20
#: the record's keys that decide a run's numbers (a difference in any of them is reported on resume); the
#: others (hostname-free machine description, Python) are there for the reader
NUMERIC_KEYS = ("torch", "cpu_capability", "aten_cpu_capability", "device", "cuda_device", "numpy",
                "transformers", "peft", "torch_threads")
_PACKAGES = ("numpy", "transformers", "tokenizers", "peft")
#: the packages of the env adapters (distribution names), recorded when installed: a game's rules and an
#: adapter's observations change with them
ENV_PACKAGES = ("gymnasium", "textarena", "reasoning-gym", "openenv-core", "verifiers", "textworld", "alfworld")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    """The CPU's marketing name (Linux: /proc/cpuinfo), else what the platform module knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_environment(device: str = "cpu", imports: list[str] | None = None) -> dict[str, Any]:
    """The record of this process: versions, the instruction set PyTorch's CPU kernels use, the device."""
    import torch

    import gigpo

    record: dict[str, Any] = {
        "gigpo": gigpo.__version__,
        "python": sys.version.split()[0],
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu": cpu_model(),
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY"),
        "torch_threads": torch.get_num_threads(),
        "device": str(device),
        "cuda_device": torch.cuda.get_device_name(0) if str(device).startswith("cuda") else None,
    }
    record.update({p: _version(p) for p in _PACKAGES})
    record["env_packages"] = {p: v for p in ENV_PACKAGES if (v := _version(p)) is not None}
    record["imports"] = list(imports or [])  # the --import modules the run's env (or estimator) came from
    return record


def recorded_imports(path: str | Path) -> list[str]:
    """The ``--import`` modules recorded by the run that ``path`` belongs to (a run directory or one of its
    checkpoints, ``RUN/checkpoints/iter_N``): its newest start's; [] when none are recorded."""
    p = Path(path)
    for run in (p, p.parent.parent):
        history = read_environment(run)
        if history:
            names = history[-1].get("imports") or []
            return [str(n) for n in names] if isinstance(names, list) else []
    return []


def import_recorded(path: str | Path, already: list[str]) -> None:
    """Import the ``--import`` modules the run at ``path`` recorded (but those in ``already``), before its config
    is read, so ``--resume RUN`` and ``eval --checkpoint RUN`` find its env; one that cannot be imported is one
    :class:`EnvImportError` naming it and the run."""
    from gigpo.envs.registry import EnvImportError, import_env_modules

    recorded = recorded_imports(path)
    try:
        import_env_modules([n for n in recorded if n not in already])
    except EnvImportError as err:
        raise EnvImportError(f"{err} (run {path} was trained with --import {' --import '.join(recorded)}: run "
                             "this where that module is importable, e.g. its directory)") from None


def read_environment(run_dir: str | Path) -> list[dict[str, Any]]:
    """The run's records, oldest first; [] when the run has none (made before this file existed) or it is not a
    list of records (a damaged informational file must not stop a resume)."""
    path = Path(run_dir) / ENVIRONMENT_FILE
    try:  # bounded, regular files only: a FIFO planted there must not block a resume (safefiles)
        text, _cut = read_regular_text(path, ENVIRONMENT_MAX_BYTES)
        data = json.loads(text)
    except (OSError, ValueError):  # NotRegularFile is an OSError; a cut file is not valid JSON
        return []
    return [r for r in data if isinstance(r, dict)] if isinstance(data, list) else []


def numeric_differences(old: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """``{key: (old, new)}`` for the :data:`NUMERIC_KEYS` whose values differ."""
    return {k: (old.get(k), new.get(k)) for k in NUMERIC_KEYS if old.get(k) != new.get(k)}


def record_start(run_dir: str | Path, iteration: int, device: str = "cpu",
                 imports: list[str] | None = None) -> dict[str, tuple[Any, Any]]:
    """Append this start's record (``iteration`` = where it starts; ``imports``: the run's ``--import`` modules)
    and return how its numerics differ from the previous start's (empty for a fresh run or the same machine); a
    difference is logged as a warning."""
    path = Path(run_dir) / ENVIRONMENT_FILE
    history = read_environment(run_dir) if iteration > 0 else []
    record = {"start_iteration": int(iteration), **run_environment(device, imports)}
    changed = numeric_differences(history[-1], record) if history else {}
    if changed:
        log.warning(
            "resuming on a different numeric environment than the run's last start (%s): the continuation is "
            "valid but not bit-identical to an uninterrupted run",
            ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in changed.items()),
        )
    replace_text(path, json.dumps(history + [record], indent=1) + "\n")  # a crash mid-write: the old history
    return changed
