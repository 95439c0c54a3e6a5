"""GridGoal: seeding, group identity, dynamics, rewards, observation format, speed, registry."""

from __future__ import annotations

import random
import time

import pytest

from gigpo.envs import EnvError, make
from gigpo.envs.gridgoal import GridGoalEnv

ACTIONS = ["up", "down", "left", "right"]


def parse(obs: str) -> tuple[tuple[int, int], tuple[int, int] | None]:
    rows = [line.split(" ") for line in obs.split("\n")]
    cells = {ch: (r, c) for r, row in enumerate(rows) for c, ch in enumerate(row) if ch != "."}
    return cells["P"], cells.get("G")


def greedy(agent: tuple[int, int], goal: tuple[int, int]) -> str:
    if agent[0] != goal[0]:
        return "down" if goal[0] > agent[0] else "up"
    return "right" if goal[1] > agent[1] else "left"


def test_reset_is_a_function_of_the_seed():
    a, b = GridGoalEnv(), GridGoalEnv()
    for seed in range(50):
        oa, ia = a.reset(seed)
        ob, ib = b.reset(seed)
        assert oa == ob and ia == ib
    starts = {GridGoalEnv().reset(s)[1]["state_key"] for s in range(100)}
    assert len(starts) > 50  # seeds spread over the 16*15 start pairs


def test_observation_format_and_state_key():
    env = GridGoalEnv(size=5)
    for seed in range(100):
        obs, info = env.reset(seed)
        rows = obs.split("\n")
        assert len(rows) == 5 and all(len(r.split(" ")) == 5 for r in rows)
        assert obs.count("P") == 1 and obs.count("G") == 1
        agent, goal = parse(obs)
        assert info["state_key"] == (agent, goal) and agent != goal
        assert info["task"] and info["admissible_actions"] == ACTIONS


@pytest.mark.parametrize("seed", [0, 7, 123])
def test_group_starts_and_stays_identical(seed):
    group = [GridGoalEnv(max_steps=30) for _ in range(6)]
    starts = {e.reset(seed) == group[0].reset(seed) for e in group}
    assert starts == {True}
    rng = random.Random(seed)
    for _ in range(30):
        action = rng.choice(ACTIONS + ["jump", " UP "])
        outs = [e.step(action) for e in group]
        assert all(o == outs[0] for o in outs)
        if outs[0][2]:
            break


def test_greedy_walk_wins_with_reward_one():
    env = GridGoalEnv(size=4, max_steps=8)
    for seed in range(50):
        obs, info = env.reset(seed)
        agent, goal = info["state_key"]
        dist = abs(agent[0] - goal[0]) + abs(agent[1] - goal[1])
        rewards = []
        done = False
        while not done:
            obs, r, done, info = env.step(greedy(*info["state_key"]))
            rewards.append(r)
        assert info["won"] and info["score"] == 1.0 and info["action_valid"]
        assert rewards == [0.0] * (dist - 1) + [1.0]
        assert obs.count("G") == 0 and obs.count("P") == 1  # P stands on the goal


def test_off_grid_is_valid_noop_and_invalid_word_keeps_state():
    env = GridGoalEnv(size=3)
    for seed in range(40):
        obs, info = env.reset(seed)
        (r, c), _ = info["state_key"]
        edge = "up" if r == 0 else "down" if r == 2 else "left" if c == 0 else "right" if c == 2 else None
        if edge is None:
            continue
        obs2, rew, done, info2 = env.step(edge.upper())
        assert (obs2, rew, info2["state_key"], info2["action_valid"]) == (obs, 0.0, info["state_key"], True)
        obs3, rew3, done3, info3 = env.step("teleport")
        assert (obs3, rew3, info3["state_key"], info3["action_valid"]) == (obs, 0.0, info["state_key"], False)
        assert not done3 and not info3["won"] and info3["score"] == 0.0


def test_episode_ends_at_max_steps_and_step_after_done_raises():
    env = GridGoalEnv(max_steps=3)
    env.reset(5)
    dones = [env.step("nonsense")[2] for _ in range(3)]
    assert dones == [False, False, True]
    with pytest.raises(EnvError):
        env.step("up")
    with pytest.raises(EnvError):
        GridGoalEnv().step("up")  # before reset


def test_fast():
    env = GridGoalEnv()
    t0 = time.perf_counter()
    n = 0
    for seed in range(2000):
        env.reset(seed)
        for a in ("up", "left", "down", "right", "up"):
            n += 1
            if env.step(a)[2]:
                break
    per_step = (time.perf_counter() - t0) / n
    assert per_step < 1e-4, f"{per_step * 1e6:.1f} us per step"


def test_registry():
    env = make("gridgoal", size=5, max_steps=4)
    assert isinstance(env, GridGoalEnv) and env.size == 5 and env.max_steps == 4
    with pytest.raises(ValueError, match="does not accept walls"):
        make("gridgoal", walls=3)
    with pytest.raises(ValueError):
        GridGoalEnv(size=1)


def test_distance_shaping_is_potential_based():
    import random

    from gigpo.envs import make

    rng = random.Random(0)
    for seed in range(20):
        env = make("gridgoal", size=4, max_steps=12, shaping=0.1)
        _, info = env.reset(seed)
        (ar, ac), (gr, gc) = info["state_key"]
        dist, total, done = abs(gr - ar) + abs(gc - ac), 0.0, False
        start = dist
        while not done:
            _, r, done, info = env.step(rng.choice(["up", "down", "left", "right"]))
            (ar, ac), _ = info["state_key"]
            new = abs(gr - ar) + abs(gc - ac)
            assert abs(r - (float(info["won"]) + 0.1 * (dist - new))) < 1e-9
            assert info["score"] == float(info["won"])
            dist, total = new, total + r
        # potential-based: the shaping terms telescope to 0.1 * (start - end distance)
        assert abs(total - (float(info["won"]) + 0.1 * (start - dist))) < 1e-9
    env = make("gridgoal", size=4)  # sparse by default
    env.reset(5)
    assert env.step("left")[1] in (0.0, 1.0)
