"""Branch rollouts (issue 41): the group's budget and tree plan, a branched GiGPO collection on lock (siblings form
one step group of size >= M at each branch point; the same env steps as an unbranched group), the uncertain rule,
the tree recorded on the trajectories, restore through process workers, and a diverging replay stopping the run."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from gigpo.agent.prompt import PromptBuilder
from gigpo.envs import register
from gigpo.envs.faults import can_snapshot
from gigpo.envs.guard import EnvGuard, registered_factory
from gigpo.envs.lock import LockEnv
from gigpo.envs.restore import ReplayDivergence, Visit, determinism_problem
from gigpo.models import load_model
from gigpo.rollout import Collector, HFEngine
from gigpo.rollout.batch import merge_batches
from gigpo.rollout.branching import BranchSpec, budget_problem, plan, restore_by_replay
from gigpo.train.config import load_config
from gigpo.train.config.algorithms import resolve_estimator
from gigpo.train.update.estimate import step_batch
from gigpo.train.update.grouping import grouping_spec

# 8 rooms, 6 steps: no episode can be won, so every trajectory runs to the cap and the step counts are exact
LOCK = {"rooms": 8, "max_steps": 6, "lock_seed": 0}


class ReplayedLock(LockEnv):
    """lock without its snapshot()/restore(): restored by verified replay."""

    snapshot = None
    restore = None


register("test-lock-replayed", ReplayedLock, "test env: lock restored by replay")


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", tiny={"english_words": False})


def _collect(tiny, branch, group_size=4, seeds=(3, 5), env="lock"):
    torch.manual_seed(0)
    engine = HFEngine(tiny.model, tiny.tokenizer, tiny.device)
    prompts = PromptBuilder(tiny.tokenizer, 256, include_instructions=False)
    col = Collector(registered_factory(env, **LOCK), engine, prompts, max_response_tokens=1, branch=branch,
                    env_name=env)
    try:
        return col.collect(list(seeds), group_size=group_size), engine
    finally:
        col.close()


def test_plan_spends_the_groups_budget_and_refuses_one_that_cannot_branch():
    assert plan(BranchSpec("every", 2, 2), 4, 6) == {"roots": 2, "branches": 4, "trajectories": 6, "budget": 24,
                                                     "leftover": 0}
    assert plan(BranchSpec("uncertain", 3), 4, 6)["leftover"] == 0
    # 2 roots of 15 steps; at step 5 both branch (3 siblings x 10 steps each), at step 10 two of the 8 (3 x 5)
    p = plan(BranchSpec("every", 4, 5), 8, 15)
    assert (p["roots"], p["branches"], p["trajectories"], p["leftover"]) == (2, 4, 14, 0)
    assert budget_problem(BranchSpec("every", 2, 3), 4, 6) is None
    assert budget_problem(BranchSpec("every", 2, 6), 4, 6).startswith(
        "rollout.branching.every=6: no step before the episode cap (6)")
    assert budget_problem(BranchSpec("every", 8, 2), 2, 15).startswith(
        "rollout.branching: a group's budget is rollout.group_size x the episode cap = 2 x 15 = 30 env steps, "
        "smaller than one branch")
    for bad in ({"siblings": 1}, {"siblings": 65}, {"every": 0}):
        with pytest.raises(ValueError):
            BranchSpec("every", **bad)


def _branch_points(batch):
    """Per sibling: (row of its parent at the branch step, its own first row)."""
    row = {(t, s): i for i, (t, s) in enumerate(zip(batch.traj_id, batch.step))}
    return [(row[(t.parent, t.branch_step)], row[(t.traj_id, t.branch_step)])
            for t in batch.trajectories if t.parent >= 0]


@pytest.mark.parametrize("siblings, every, env", [(2, 2, "lock"), (3, 1, "lock"), (3, 1, "test-lock-replayed")])
def test_a_branched_gigpo_group_matches_the_env_steps_and_groups_its_siblings(tiny, siblings, every, env):
    assert can_snapshot(LockEnv()) and not can_snapshot(ReplayedLock())  # both restore paths are exercised
    plain, _ = _collect(tiny, None, env=env)
    spec = BranchSpec("every", siblings, every)
    tree, _ = _collect(tiny, spec, env=env)
    want = plan(spec, 4, 6)
    assert want["leftover"] == 0
    assert len(plain) == len(tree) == 2 * 4 * 6  # the same env steps as the unbranched group
    assert len(tree.trajectories) == 2 * want["trajectories"]
    points = _branch_points(tree)
    assert len(points) == 2 * want["branches"] * (siblings - 1)
    for t in tree.trajectories:  # a sibling's rows start at its branch step, and it plays to the cap
        rows = [s for tid, s in zip(tree.traj_id, tree.step) if tid == t.traj_id]
        assert rows == list(range(t.first_step, 6)) and t.length == 6
    cfg = load_config("lock", ["rollout.branch=every", f"rollout.branching.siblings={siblings}",
                               f"rollout.branching.every={every}"])
    est, common, options = resolve_estimator(cfg)
    sg = est(step_batch(cfg, tree, grouping_spec(cfg), True), common, options).step_group_ids
    sizes = np.bincount(sg[sg >= 0])
    for parent_row, child_row in points:  # one anchor state: the parent's row and each sibling's first row
        assert sg[parent_row] == sg[child_row] >= 0
        assert tree.state_key[parent_row] == tree.state_key[child_row]
    assert sizes[sg[[p for p, _ in points]]].mean() >= siblings
    merged = merge_batches([tree, tree])  # shards and rounds renumber ids: the tree's parent links follow
    assert _branch_points(merged) == [(i, j) for i, j in points] + [(i + len(tree), j + len(tree)) for i, j in points]


def test_the_uncertain_rule_branches_the_lowest_log_probability_action(tiny):
    tree, _ = _collect(tiny, BranchSpec("uncertain", 2), group_size=4, seeds=(4,))
    # a sibling takes its first step the turn after its parent's: turn of a row = step + the trajectory's lag
    lag = {}
    for t in tree.trajectories:  # parents come before their siblings
        lag[t.traj_id] = 0 if t.parent < 0 else lag[t.parent] + 1
    turn = [s + lag[t] for t, s in zip(tree.traj_id, tree.step)]
    firsts = [t for t in tree.trajectories if t.parent >= 0]
    assert len(firsts) >= 2 and len(tree) == 4 * 6
    for t in firsts:  # the parent's action was the least likely of its turn's candidates (not at a first step)
        when = t.branch_step + lag[t.parent]
        cands = {tid: sum(lps) for tid, s, lps, tt in zip(tree.traj_id, tree.step, tree.sampling_logprobs, turn)
                 if tt == when and s > [u for u in tree.trajectories if u.traj_id == tid][0].branch_step}
        assert cands[t.parent] == min(cands.values())


def test_restore_by_replay_through_process_workers():
    guard = EnvGuard(registered_factory("lock", **LOCK), workers="process", timeout_s=60, name="lock")
    try:
        from gigpo.envs import make

        env = make("lock", **LOCK)
        obs, info = env.reset(9)
        visits, actions = [Visit.of(obs, info)], ["down", "up", "left"]
        for a in actions:
            obs, _, _, info = env.step(a)
            visits.append(Visit.of(obs, info))
        h = guard.new()
        (got,) = restore_by_replay(guard, [(h, 9, actions, visits)], "lock")
        assert Visit.of(*got) == visits[-1]
        bad = [*visits[:-1], Visit("room 7", visits[-1].state_key)]
        with pytest.raises(ReplayDivergence, match=r"^env 'lock' is not deterministic .* replaying seed 9, the "
                                                   r"observation after step 3 differs"):
            restore_by_replay(guard, [(h, 9, actions, bad)], "lock")
    finally:
        guard.close()


def test_snapshots_restore_through_process_workers_and_a_bad_one_is_refused():
    from gigpo.envs import make

    guard = EnvGuard(registered_factory("lock", **{**LOCK, "slip": 0.5}), workers="process", timeout_s=60,
                     name="lock")
    try:
        a, b = guard.new(), guard.new()
        guard.call_many([(a, "reset", 9), (b, "reset", 2)])
        for word in ("up", "down", "up"):
            guard.call_many([(a, "step", word)])
        assert a.can_snapshot and b.can_snapshot
        (snap,) = guard.call_many([(a, "snapshot", None)])
        (shown,) = guard.call_many([(b, "restore", snap)])
        assert shown == guard.call_many([(a, "restore", snap)])[0]
        # the slip RNG travels in the snapshot: both play on identically
        outs = [guard.call_many([(h, "step", w) for h in (a, b)]) for w in ("left", "up", "up")]
        assert all(isinstance(x, tuple) and x == y for x, y in outs)
    finally:
        guard.close()
    env = make("lock", **LOCK)

    class Forgetful(LockEnv):  # restores the room but not the slip RNG: refused by the probe
        def restore(self, snapshot):
            self._code, self._trap_sets, self._room, self._steps, self._done = snapshot[:5]
            return self.render(), self._shown_info()

    assert env.snapshot() is not None
    problem = determinism_problem(lambda: Forgetful(rooms=8, max_steps=12, slip=1.0), "forgetful")
    assert problem and problem.startswith("env 'forgetful' does not restore its snapshots: seed 11, the ")
    assert determinism_problem(lambda: LockEnv(rooms=8, max_steps=12, slip=1.0), "lock") is None


def test_ray_workers_restore_by_snapshot_and_by_replay():
    ray = pytest.importorskip("ray", reason="needs the ray package")
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ReplayedLock: not importable in Ray's workers
    for env in ("lock", "test-lock-replayed"):
        guard = EnvGuard(registered_factory(env, **LOCK), workers="ray", timeout_s=60, name=env, num_workers=1)
        try:
            a, b = guard.new(), guard.new()
            obs, info = guard.call_many([(a, "reset", 9)])[0]
            visits, actions = [Visit.of(obs, info)], ["down", "up"]
            for word in actions:
                obs, _, _, info = guard.call_many([(a, "step", word)])[0]
                visits.append(Visit.of(obs, info))
            if a.can_snapshot:
                shown = guard.call_many([(b, "restore", guard.call_many([(a, "snapshot", None)])[0])])[0]
            else:
                (shown,) = restore_by_replay(guard, [(b, 9, actions, visits)], env)
            assert (a.can_snapshot, Visit.of(*shown)) == (env == "lock", visits[-1])
        finally:
            guard.close()
