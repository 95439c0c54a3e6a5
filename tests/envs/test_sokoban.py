"""Sokoban: seeding, group identity, solvability (independent BFS on the observation), push rules, rewards."""

from __future__ import annotations

import random
from collections import deque

import pytest

from gigpo.envs import EnvError, make
from gigpo.envs.sokoban import SokobanEnv

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
SYMBOLS = set("#_OX√PS")


def parse(obs: str, sep: str = ""):
    """(floor, targets, player, boxes) read from the observation text alone."""
    rows = [row.split(sep) if sep else list(row) for row in obs.split("\n")]
    floor, targets, boxes, player = set(), set(), set(), None
    for r, row in enumerate(rows):
        for c, ch in enumerate(row):
            assert ch in SYMBOLS, ch
            if ch != "#":
                floor.add((r, c))
            if ch in "O√S":
                targets.add((r, c))
            if ch in "X√":
                boxes.add((r, c))
            if ch in "PS":
                assert player is None
                player = (r, c)
    return frozenset(floor), frozenset(targets), player, frozenset(boxes)


def move(floor, player, boxes, action):
    dr, dc = MOVES[action]
    nxt = (player[0] + dr, player[1] + dc)
    if nxt not in floor:
        return player, boxes
    if nxt in boxes:
        beyond = (nxt[0] + dr, nxt[1] + dc)
        if beyond not in floor or beyond in boxes:
            return player, boxes
        return nxt, (boxes - {nxt}) | {beyond}
    return nxt, boxes


def bfs_plan(obs: str, want=None) -> list[str] | None:
    """Shortest action list from the observed state to a solved one (or to a transition satisfying ``want``)."""
    floor, targets, player, boxes = parse(obs)
    start = (player, boxes)
    parent = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if want is None and state[1] == targets:
            plan = []
            while parent[state] is not None:
                state, a = parent[state]
                plan.append(a)
            return plan[::-1]
        for a in MOVES:
            nxt = move(floor, *state, a)
            if want is not None and want(targets, state, nxt):
                plan = [a]
                while parent[state] is not None:
                    state, b = parent[state]
                    plan.append(b)
                return plan[::-1]
            if nxt not in parent:
                parent[nxt] = (state, a)
                queue.append(nxt)
    return None


def test_reset_is_a_function_of_the_seed_and_varies():
    a, b = SokobanEnv(), SokobanEnv()
    rooms = set()
    for seed in range(60):
        ra, rb = a.reset(seed), b.reset(seed)
        assert ra == rb
        rooms.add(ra[0])
    assert len(rooms) >= 50


@pytest.mark.parametrize("num_boxes,seeds", [(1, range(200)), (2, range(60)), (3, range(20))])
def test_every_room_is_solvable_in_its_stated_optimal_length(num_boxes, seeds):
    env = SokobanEnv(num_boxes=num_boxes, size=7 if num_boxes == 3 else 6, search_steps=12)
    for seed in seeds:
        obs, info = env.reset(seed)
        floor, targets, player, boxes = parse(obs)
        assert len(boxes) == len(targets) == num_boxes and not (boxes & targets)  # all boxes pulled off
        assert info["state_key"] == (player, tuple(sorted(boxes)))
        plan = bfs_plan(obs)
        assert plan is not None, f"seed {seed} unsolvable"
        assert len(plan) == env.solution_length and env.min_solution_steps <= len(plan) <= env.search_steps


def test_solution_through_the_env_earns_the_documented_rewards():
    env = SokobanEnv(max_steps=50)
    for seed in range(40):
        obs, _ = env.reset(seed)
        plan = bfs_plan(obs)
        total, done = 0.0, False
        for i, a in enumerate(plan):
            obs, r, done, info = env.step(a)
            total += r
            assert info["action_valid"] and done == (i == len(plan) - 1)
        assert info["won"] and info["score"] == 1.0
        # One box: the only push onto the target is the last one, never off it.
        assert total == pytest.approx(-0.1 * len(plan) + 1.0 + 10.0)
        assert "X" not in obs and obs.count("√") == 1


def test_custom_rewards_and_box_off_target_penalty():
    env = SokobanEnv(
        num_boxes=2,
        max_steps=60,
        step_penalty=-0.5,
        box_on_target_reward=2.0,
        box_off_target_penalty=-3.0,
        solved_reward=7.0,
    )
    checked = {"on": False, "off": False}
    for seed in range(80):
        for kind, want in (
            ("on", lambda t, s, n: len(n[1] & t) > len(s[1] & t)),
            ("off", lambda t, s, n: len(n[1] & t) < len(s[1] & t)),
        ):
            obs, _ = env.reset(seed)
            plan = bfs_plan(obs, want)
            if plan is None:
                continue
            for a in plan[:-1]:
                env.step(a)
            _, r, _, info = env.step(plan[-1])
            expected = -0.5 + (2.0 if kind == "on" else -3.0) + (7.0 if info["won"] else 0.0)
            assert r == pytest.approx(expected)
            checked[kind] = True
        if all(checked.values()):
            break
    assert all(checked.values())


def test_wall_bump_is_valid_noop_and_unknown_word_is_invalid():
    env = SokobanEnv()
    bumped = 0
    for seed in range(30):
        obs, info = env.reset(seed)
        floor, _, player, boxes = parse(obs)
        for a, (dr, dc) in MOVES.items():
            if (player[0] + dr, player[1] + dc) not in floor:
                obs2, r, done, info2 = env.step(a.capitalize())
                assert (obs2, info2["state_key"], info2["action_valid"]) == (obs, info["state_key"], True)
                assert r == pytest.approx(-0.1) and not done
                bumped += 1
                break
        obs3, r3, _, info3 = env.step("north")
        assert (obs3, r3, info3["action_valid"], info3["state_key"]) == (obs, 0.0, False, info["state_key"])
        assert info3["admissible_actions"] == ["up", "down", "left", "right"]
    assert bumped >= 10


@pytest.mark.parametrize("seed", [0, 3, 99])
def test_group_starts_and_stays_identical(seed):
    group = [SokobanEnv(max_steps=40) for _ in range(5)]
    outs = [e.reset(seed) for e in group]
    assert all(o == outs[0] for o in outs)
    rng = random.Random(seed)
    for _ in range(40):
        a = rng.choice([*MOVES, "wait", "LEFT"])
        outs = [e.step(a) for e in group]
        assert all(o == outs[0] for o in outs)
        if outs[0][2]:
            break


def test_max_steps_cell_sep_and_errors():
    env = SokobanEnv(max_steps=2, cell_sep=" ")
    obs, _ = env.reset(1)
    assert parse(obs, " ")[2] is not None and all(len(r.split(" ")) == 6 for r in obs.split("\n"))
    assert env.step("bogus")[2] is False and env.step("bogus")[2] is True
    with pytest.raises(EnvError):
        env.step("up")
    with pytest.raises(ValueError):
        SokobanEnv(size=3)
    with pytest.raises(ValueError):
        SokobanEnv(size=4, num_boxes=3)


def test_registry():
    env = make("sokoban", size=6)
    assert isinstance(env, SokobanEnv) and env.size == 6
    assert "up" in env.instructions and "√" in env.instructions
    with pytest.raises(ValueError, match="does not accept boxes"):
        make("sokoban", boxes=2)
    with pytest.raises(ValueError, match="unknown env"):
        make("sokobam")
