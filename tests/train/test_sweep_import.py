"""An own env through ``--import`` all the way: ``gigpo sweep --import``, the run directory records the module
(and the env packages' versions), and ``eval --checkpoint`` / ``--resume`` import it or name it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

TINY = "model.tiny={english_words: false, hidden_size: 32, intermediate_size: 64}"


def _gigpo(cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""),
                                                                    str(Path(__file__).parents[2] / "src")) if p)}
    return subprocess.run([sys.executable, "-m", "gigpo.cli", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_sweep_import_records_the_module_and_eval_and_resume_find_it(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(Path(__file__).with_name("elevator_env.py"), work / "elevator.py")
    out = tmp_path / "sweep"
    res = _gigpo(work, "sweep", "--import", "elevator", "--seeds", "1", "--out", str(out), "env=elevator-test",
                 TINY, "rollout.groups=2", "rollout.group_size=2", "train.iterations=1", "train.eval_episodes=2",
                 "train.checkpoint_every=1", "algorithm=grpo,gigpo")
    assert res.returncode == 0, res.stdout + res.stderr
    runs = sorted(out.glob("cells/*/seed0"))
    assert len(runs) == 2 and all((r / "metrics.jsonl").exists() for r in runs)
    record = json.loads((runs[0] / "environment.json").read_text())[-1]
    assert record["imports"] == ["elevator"]  # the module the run's env came from
    assert record["env_packages"]["gymnasium"]  # the adapters' packages that are installed, with versions
    # eval of the run without --import: the recorded module is imported
    ok = _gigpo(work, "eval", "--checkpoint", str(runs[0]), "--episodes", "2")
    assert ok.returncode == 0 and "success_rate" in ok.stdout, ok.stderr
    # from a directory where the module is not importable: one line naming it and the run
    elsewhere = _gigpo(tmp_path, "eval", "--checkpoint", str(runs[0]), "--episodes", "2")
    assert elsewhere.returncode == 2
    assert "--import elevator: no module named 'elevator'" in elsewhere.stderr
    assert "was trained with --import elevator" in elsewhere.stderr
    # a resume (two more iterations) imports it too
    cfg = yaml.safe_load((runs[0] / "config.yaml").read_text())
    assert cfg["env"]["name"] == "elevator-test"
    resumed = _gigpo(work, "train", "--resume", str(runs[0]), "train.iterations=2")
    assert resumed.returncode == 0, resumed.stderr


def test_sweep_import_of_a_missing_module_is_one_line(tmp_path):
    res = _gigpo(tmp_path, "sweep", "--import", "no_such_module_43", "--seeds", "1", "env=x")
    assert res.returncode == 2
    line = res.stderr.strip()
    assert "\n" not in line and line.startswith(
        "gigpo sweep: error: --import no_such_module_43: no module named 'no_such_module_43' (looked in sys.path "
        "and the current directory")
    assert "--import takes a module name" in line  # and says what --import takes (issue 39)
