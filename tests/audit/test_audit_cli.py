"""`gigpo audit` end to end (issue 41 part 3): on a quickstart run it prints the table (every estimator, CIs) and
writes the JSON `gigpo view` shows, in well under 5 minutes; bad input is one line and exit 2."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from gigpo.cli import main

QUICK = ["--config", "quickstart", "train.iterations=2", "train.checkpoint_every=2", "train.eval_episodes=0",
         "train.progress=false", "rollout.groups=4"]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("audit") / "run"
    assert main(["train", *QUICK, f"train.run_dir={run}"]) == 0
    return run


def test_audit_of_a_quickstart_run_prints_the_table_and_writes_its_json(quick_run, capsys):
    started = time.monotonic()
    assert main(["audit", str(quick_run), "--states", "24", "--continuations", "4", "--resamples", "300",
                 "--no-progress"]) == 0
    took = time.monotonic() - started
    out = capsys.readouterr().out
    assert took < 300
    for label in ("GRPO", "RLOO", "GiGPO exact", "GiGPO similarity", "HGPO", "GraphGPO", "GiGPO, branched"):
        assert f"| {label}" in out
    written = json.loads((quick_run / "audit" / "audit_000002.json").read_text())
    assert written["iteration"] == 2 and written["continuations"] == 4
    names = [e["name"] for e in written["estimators"]]
    assert names == ["grpo", "rloo", "gigpo", "gigpo-similarity", "hgpo", "graphgpo", "gigpo-branched"]
    by = {e["name"]: e for e in written["estimators"]}
    assert by["grpo"]["step_signal"]["value"] == 0  # no step term, no step-level signal
    assert written["collections"]["plain"]["sampled"] == 24
    # the branched collection is grown as a tree: it has more trajectories than the plain one at the same budget
    assert written["collections"]["branched"]["trajectories"] >= written["collections"]["plain"]["trajectories"]


@pytest.mark.parametrize("args, line", [
    (["--states", "0"], "--states must be in [1, 10000], got 0"),
    (["--continuations", "1"], "--continuations must be in [2, 1000]"),
    (["--estimators", "gigpo,nope"], "--estimators: unknown nope; choose from grpo, rloo"),
    (["--iteration", "7"], "has no checkpoint of iteration 7 (it has: 2)"),
])
def test_bad_options_are_one_line_and_exit_2(quick_run, args, line, capsys):
    assert main(["audit", str(quick_run), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gigpo audit: error: ") and "\n" not in err and line in err


def test_a_run_dir_without_a_checkpoint_is_one_line_and_exit_2(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--config", "quickstart", "train.iterations=1", "train.checkpoint_every=0",
                 "train.eval_episodes=0", "train.progress=false", "rollout.groups=1", f"train.run_dir={run}"]) == 0
    shutil.rmtree(run / "checkpoints")  # as a run stopped before its first checkpoint leaves it
    capsys.readouterr()
    assert main(["audit", str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"gigpo audit: error: run directory {run} has no checkpoint to audit (train.checkpoint_every was "
                   "0, or the run stopped before its first); give a run with checkpoints")
    assert main(["audit", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
