"""rollout.branch from the command line (issue 41): bad input is one line and exit 2 before any model loads; a
branched GiGPO run on lock spends the env steps of the unbranched one and writes its tree for `gigpo view`."""

from __future__ import annotations

import json

import pytest

from gigpo.cli import main
from gigpo.envs import register
from gigpo.train.config import ConfigError, load_config

COMMON = ["--config", "lock", "train.iterations=1", "train.progress=false"]


class _Unseeded:
    """An env whose reset draws from an unseeded generator: it cannot be branched."""

    instructions, max_steps = "answer up or down", 5

    def __init__(self):
        import random

        self.rng = random.Random()

    def reset(self, seed):
        return f"start {self.rng.random()}", {"task": "", "admissible_actions": ["up", "down"]}

    def step(self, action):
        return "room", 0.0, True, {"won": False, "action_valid": True}

    def close(self):
        pass


register("test-branch-unseeded", _Unseeded, "test env: not deterministic given its seed")


@pytest.fixture
def no_model(monkeypatch):
    from gigpo.train import trainer

    def refuse(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(trainer.Trainer, "__init__", refuse)


@pytest.mark.parametrize("args, line", [
    (["rollout.branch=every", "rollout.branching.siblings=1"], "rollout.branching.siblings must be in [2, 64], got 1"),
    (["rollout.branch=uncertain", "rollout.branching.siblings=65"], "rollout.branching.siblings must be in [2, 64]"),
    (["rollout.branch=every", "rollout.branching.every=0"], "rollout.branching.every must be >= 1, got 0"),
    (["rollout.branch=every", "rollout.branching.every=15"],
     "rollout.branching.every=15: no step before the episode cap (15) to branch at"),
    (["rollout.branch=every", "rollout.group_size=2", "rollout.branching.siblings=8"],
     "rollout.branching: a group's budget is rollout.group_size x the episode cap = 2 x 15 = 30 env steps, "
     "smaller than one branch"),
    (["rollout.branching.siblings=3"], "rollout.branching.siblings is set but rollout.branch='off'"),
    (["rollout.branch=every", "env=test-branch-unseeded"],
     "env 'test-branch-unseeded' is not deterministic given its seed and actions: replaying seed 11, the "
     "observation after reset differs"),
    (["rollout.branch=every", "env=textarena:TicTacToe-v0", "env.opponent=self"],
     "is a multi-seat (self-play) game, which branch rollouts do not support"),
])
def test_bad_branch_input_is_one_line_and_exit_2_before_a_model_loads(args, line, no_model, tmp_path, capsys):
    if "env=textarena:TicTacToe-v0" in args:
        pytest.importorskip("textarena", reason="needs the textarena package")
    assert main(["train", *COMMON, f"train.run_dir={tmp_path / 'run'}", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("gigpo train: error: ") and "\n" not in err and line in err


def test_the_options_of_one_rule_are_refused_under_the_other_and_with_concat():
    with pytest.raises(ConfigError, match=r"^rollout.branching.every is set but rollout.branch='uncertain'"):
        load_config("lock", ["rollout.branch=uncertain", "rollout.branching.every=3"])
    with pytest.raises(ConfigError, match=r"^rollout.branch needs rollout.mode=step"):
        load_config("lock", ["rollout.branch=every", "rollout.mode=concat"])
    with pytest.raises(ConfigError, match=r"^rollout.branch with grouping.history > 0"):
        load_config("lock", ["rollout.branch=every", "grouping.history=1"])


def test_a_branched_gigpo_run_spends_the_unbranched_env_steps_and_records_its_tree(tmp_path):
    lock = ["env.rooms=8", "env.max_steps=6", "rollout.groups=2", "rollout.group_size=4", "train.sample_groups=1"]
    steps = {}
    for arm, extra in (("plain", []), ("tree", ["rollout.branch=every", "rollout.branching.every=2"])):
        run = tmp_path / arm
        assert main(["train", *COMMON, f"train.run_dir={run}", *lock, *extra]) == 0
        rec = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
        steps[arm] = rec["rollout/steps"]
    assert steps["plain"] == steps["tree"] == 2 * 4 * 6
    lines = (tmp_path / "tree" / "samples" / "iter_000001.jsonl").read_text().splitlines()
    trajs = [json.loads(x) for x in lines[1:]]
    kids = [t for t in trajs if t["parent"] >= 0]
    assert kids and all(t["steps"][0]["t"] == t["branch_step"] for t in kids)
    assert {t["parent"] for t in kids} <= {t["traj"] for t in trajs}


class _DriftingLock:
    """lock restored by replay whose instances built once training iterations run (``armed``; every check before
    training sees the plain lock, however many instances it builds) show their instance number: it passes the
    check, then a sibling's replay diverges mid-run."""

    armed = False
    built = 0

    def __init__(self, **options):
        from gigpo.envs.lock import LockEnv

        type(self).built += 1
        self.number, self.env, self.drifts = type(self).built, LockEnv(**options), type(self).armed
        self.instructions, self.max_steps = self.env.instructions, self.env.max_steps

    def _drift(self, obs):
        return obs + (f" #{self.number}" if self.drifts else "")

    def reset(self, seed):
        obs, info = self.env.reset(seed)
        return self._drift(obs), info

    def step(self, action):
        obs, reward, done, info = self.env.step(action)
        return self._drift(obs), reward, done, info

    def close(self):
        pass


register("test-branch-drifting", _DriftingLock, "test env: replay diverges after the check before training")


def test_a_replay_that_diverges_mid_run_stops_it_with_one_line(tmp_path, capsys, monkeypatch):
    from gigpo.train.trainer import Trainer

    _DriftingLock.built, _DriftingLock.armed = 0, False
    first_iteration = Trainer.iteration

    def iteration(self, it):  # envs built from here on drift (the collector's, after the checks)
        _DriftingLock.armed = True
        return first_iteration(self, it)

    monkeypatch.setattr(Trainer, "iteration", iteration)
    run = tmp_path / "run"
    code = main(["train", *COMMON, f"train.run_dir={run}", "env=test-branch-drifting", "env.rooms=8",
                 "env.max_steps=6", "rollout.groups=1", "rollout.group_size=2", "rollout.branch=every",
                 "rollout.branching.every=2"])
    out = capsys.readouterr()
    assert code == 1, (out.out[-2000:], out.err[-2000:])
    err = out.err.strip().splitlines()[-1]
    assert err.startswith("gigpo train: error: env 'test-branch-drifting' is not deterministic given its seed and "
                          "actions: replaying seed ")
    assert "differs from the recorded one (" in err and " #" in err  # a drifted instance's observation
    assert err.endswith("last checkpoint: none (intact)")
