"""One run per directory and rollout shapes that cannot fit (issue 29): the run-dir lock (a second start exits 2
naming the holder's PID, a dead holder's lock is taken over, two runs started at once never mix their files),
and the up-front memory estimate (one line, exit 2, before any model loads)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from small_run import SMALL

from gigpo.cli import main as cli_main
from gigpo.train.config import ConfigError, load_config
from gigpo.train.preflight.memory_estimate import batch_bytes_floor, check_rollout_memory
from gigpo.train.rundir.runlock import LOCK_FILE, RunDirLocked, holds_lock, lock_run_dir, release_run_dir

HOLD = "import sys, time; from gigpo.train.rundir.runlock import lock_run_dir; lock_run_dir(sys.argv[1]); print('held', flush=True); time.sleep(60)"


def _holder(run: Path) -> subprocess.Popen:
    run.mkdir(parents=True, exist_ok=True)
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_a_second_start_is_refused_naming_the_holder(tmp_path, capsys):
    run = tmp_path / "run"
    p = _holder(run)
    try:
        with pytest.raises(RunDirLocked, match=f"PID {p.pid}"):
            lock_run_dir(run)
        assert cli_main(["train", *SMALL, "train.iterations=1", f"train.run_dir={run}"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"gigpo train: error: {run} is in use by another gigpo run (PID {p.pid})")
        assert sorted(x.name for x in run.iterdir()) == [LOCK_FILE]  # nothing written
    finally:
        p.kill()
        p.wait()


def test_a_dead_holders_lock_is_taken_over(tmp_path, caplog):
    run = tmp_path / "run"
    p = _holder(run)
    p.kill()  # SIGKILL: no clean-up ran, its lock file (with its PID) is still there
    p.wait()
    assert json.loads((run / LOCK_FILE).read_text())["pid"] == p.pid
    with caplog.at_level(logging.WARNING, logger="gigpo.train.rundir.runlock"):
        lock_run_dir(run)
    try:
        assert holds_lock(run) and f"left by PID {p.pid}" in caplog.text
        assert json.loads((run / LOCK_FILE).read_text())["pid"] == os.getpid()
        lock_run_dir(run)  # re-entrant within one process (train, then resume the same directory)
        release_run_dir(run)
        assert holds_lock(run)
    finally:
        release_run_dir(run)
    assert not holds_lock(run) and not (run / LOCK_FILE).exists()


def test_two_runs_started_at_once_into_one_directory(tmp_path):
    """The issue's probe: both used to pass the "already holds a run" check; one died on the other's checkpoint
    temp folder and the survivor's metrics held a stray row. Now exactly one runs, the other exits 2 at once."""
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "gigpo", "train", *SMALL, "train.iterations=2", "train.checkpoint_every=1",
           f"train.run_dir={run}"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    assert sorted(rc for rc, _, _ in outs) == [0, 2], outs
    err = next(e for rc, _, e in outs if rc == 2)  # the loser names the winner (or its finished run), one line
    assert "is in use by another gigpo run (PID" in err or "already holds a run" in err, err
    rows = [json.loads(x)["iteration"] for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows == [1, 2]
    assert not (run / LOCK_FILE).exists()  # released at exit


@pytest.mark.parametrize("override", ["rollout.groups=1000000000", "rollout.group_size=100000000",
                                      "rollout.groups=9223372036854775807"])
def test_a_rollout_that_cannot_fit_is_one_line_before_anything_loads(override, tmp_path, capsys, monkeypatch):
    def boom(*_a, **_k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("gigpo.models.load_model", boom)
    t0 = time.perf_counter()
    assert cli_main(["train", *SMALL, override, f"train.run_dir={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gigpo train: error: rollout.groups=") and "more than this machine's" in err
    assert err.count("\n") == 1 and time.perf_counter() - t0 < 10
    assert not (tmp_path / "r").exists()


def test_the_estimate_is_a_floor_that_passes_ordinary_runs():
    cfg = load_config(None, SMALL)
    need, how = batch_bytes_floor(cfg)
    # 2 groups x 2 trajectories x (512 B + 4 steps x (2048 + 64) tokens x 8 B)
    assert need == 4 * (512 + 4 * (cfg.prompt.max_prompt_tokens + cfg.rollout.max_response_tokens) * 8), how
    check_rollout_memory(cfg)  # the quickstart-sized run fits anywhere
    big = load_config(None, [*SMALL, "rollout.groups=64"])  # 128 x (512 + 4 x 2049 x 8) B = 8.07 MB
    with pytest.raises(ConfigError, match=r"needs at least 8.07 MB per iteration .* more than this machine's 1 MB"):
        check_rollout_memory(big, limit=1 << 20)
