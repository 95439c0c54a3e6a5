"""Fixtures the fault tests share."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture
def run(base_run, tmp_path) -> Path:
    """A fresh copy of the module's ``base_run`` (a run trained once per module), for a test to damage."""
    dst = tmp_path / "run"
    shutil.copytree(base_run, dst)
    return dst
