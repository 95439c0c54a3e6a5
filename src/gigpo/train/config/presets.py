"""Where the shipped YAML presets live: inside the ``gigpo`` package, so a wheel install finds them as well as a
source checkout does (the repository's ``./configs`` is a link to the same folder)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: ``gigpo train --config NAME`` presets (quickstart, sokoban, ...).
CONFIG_DIR = Path(str(resources.files("gigpo") / "configs"))
#: Per-algorithm defaults (``algorithm=dapo`` → dapo.yaml), see :mod:`gigpo.train.config.algorithms`.
ALGO_PRESET_DIR = CONFIG_DIR / "algos"
