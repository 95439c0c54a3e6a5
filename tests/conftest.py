"""Shared test settings.

* Tiny-model tests run on one torch thread (their ops are too small to split).
* ``@pytest.mark.peers("textarena", ...)``: the test needs optional peers (packages of an extra, or an executable
  such as ``chromium``); where one is missing it skips, naming it and what installs it. The README's test command
  therefore passes in a venv made by its install command alone, and ``.ci/run`` runs the marked tests again
  (``pytest -m peers``) once the extras are installed, so a skip cannot hide a failure there.
"""

from __future__ import annotations

import importlib.util
import shutil

import pytest
import torch

torch.set_num_threads(1)

#: what installs each peer (for the skip message)
PEER_INSTALL = {
    "textarena": "pip install 'gigpo[textarena]'",
    "reasoning_gym": "pip install 'gigpo[reasoning-gym]'",
    "openenv": "pip install 'gigpo[openenv]'",
    "verifiers": "pip install 'gigpo[verifiers]'",
    "ray": "pip install 'gigpo[ray]'",
    "openai": "pip install openai",
    "pyarrow": "pip install pyarrow",
    "textworld": "pip install 'gigpo[alfworld]'",
    "fast_downward": "pip install 'gigpo[alfworld]'",
    "alfworld": "pip install 'gigpo[alfworld]'",
    "wandb": "pip install 'gigpo[wandb]'",
    "mlflow": "pip install 'gigpo[mlflow]'",
    "tensorboard": "pip install tensorboard",
    "chromium": "apt-get install chromium",
}
#: peers that are programs on PATH rather than Python packages
EXECUTABLES = {"chromium": ("chromium", "chromium-browser")}


def peer_missing(name: str) -> bool:
    if name in EXECUTABLES:
        return not any(shutil.which(exe) for exe in EXECUTABLES[name])
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):  # a parent package missing, or a module set to None in sys.modules
        return True


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("peers"):
        missing = [p for p in mark.args if peer_missing(p)]
        if missing:
            how = sorted({PEER_INSTALL.get(p, f"pip install {p}") for p in missing})
            pytest.skip(f"needs {', '.join(missing)} (optional peer{'s' * (len(missing) > 1)}: {'; '.join(how)})")
