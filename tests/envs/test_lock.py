"""Lock: determinism per seed, the oracle solves it, traps / slips / step cap behave, registry, vocabulary."""

from __future__ import annotations

import random

import pytest

from gigpo.envs import EnvError, make
from gigpo.envs.lock import ACTION_WORDS, LockEnv


def wrong_actions(env: LockEnv) -> tuple[list[str], list[str]]:
    """(trap words, no-op words) of the env's current room, read from its drawn combination."""
    room = env.state_key[0]
    correct = env._code[room]
    traps = [env.words[a] for a in sorted(env._trap_sets[room])]
    noops = [w for i, w in enumerate(env.words) if i != correct and w not in traps]
    return traps, noops


@pytest.mark.parametrize("kwargs", [{}, {"lock_seed": 3}, {"slip": 0.3, "trap": "back", "actions": 6, "traps": 2}])
def test_same_seed_same_episode(kwargs):
    a, b = LockEnv(**kwargs), LockEnv(**kwargs)
    for seed in range(20):
        assert a.reset(seed) == b.reset(seed)
        rng = random.Random(seed)
        done = False
        while not done:
            act = rng.choice(list(a.words) + ["jump"])
            out_a, out_b = a.step(act), b.step(act)
            assert out_a == out_b
            done = out_a[2]


def test_per_task_combination_is_shown_and_varies_fixed_one_does_not():
    per_task = LockEnv(rooms=6)
    codes = {per_task.reset(s)[0] for s in range(30)}
    assert len(codes) > 20 and all("code" in c for c in codes)
    fixed = LockEnv(rooms=6, lock_seed=11)
    obs = {fixed.reset(s)[0] for s in range(30)}
    assert obs == {"room 0"}  # hidden, and the same lock for every task
    assert len({(fixed.reset(s), fixed.state_key)[1] for s in range(30)}) == 1


@pytest.mark.parametrize("kwargs", [{}, {"lock_seed": 5, "rooms": 8, "max_steps": 8}, {"actions": 8, "traps": 7}])
def test_oracle_solves_in_rooms_steps(kwargs):
    env = LockEnv(**kwargs)
    for seed in range(10):
        obs, info = env.reset(seed)
        assert info["admissible_actions"] == list(env.words)
        total, steps, done = 0.0, 0, False
        while not done:
            obs, r, done, info = env.step(env.oracle_action())
            total, steps = total + r, steps + 1
        assert info["won"] and total == 1.0 and steps == env.rooms and info["score"] == 1.0
        assert obs.startswith(f"room {env.rooms}")
        with pytest.raises(EnvError):
            env.oracle_action()


def test_trap_kinds_and_noops():
    for kind, expect in (("reset", lambda r: 0), ("back", lambda r: max(r - 1, 0)), ("stay", lambda r: r)):
        env = LockEnv(rooms=5, actions=4, traps=1, trap=kind, max_steps=50)
        env.reset(7)
        for _ in range(3):
            env.step(env.oracle_action())
        traps, noops = wrong_actions(env)
        room = env.state_key[0]
        assert room == 3 and len(traps) == 1 and len(noops) == 2
        obs, r, done, info = env.step(noops[0])
        assert env.state_key[0] == 3 and info["action_valid"] and r == 0.0 and not done
        obs, r, done, info = env.step(traps[0])
        assert env.state_key[0] == expect(3) and obs.startswith(f"room {expect(3)}") and r == 0.0


def test_invalid_action_uses_a_step_and_changes_nothing():
    env = LockEnv(rooms=3, max_steps=2)
    obs0, _ = env.reset(1)
    obs, r, done, info = env.step("open sesame")
    assert obs == obs0 and r == 0.0 and not info["action_valid"] and not done
    obs, r, done, info = env.step("nope")
    assert done and not info["won"]
    with pytest.raises(EnvError):
        env.step("up")


def test_states_recur_across_a_group():
    # A group of random walkers revisits room 0 (after traps) and shares rooms with each other: exact anchors match.
    seen: dict[str, int] = {}
    for walker in range(8):
        env = LockEnv(rooms=4)
        obs, _ = env.reset(42)
        rng, done = random.Random(walker), False
        while not done:
            seen[obs] = seen.get(obs, 0) + 1
            obs, _, done, _ = env.step(rng.choice(env.words))
    assert seen[LockEnv(rooms=4).reset(42)[0]] > 8  # room 0 seen more than once per walker on average


def test_slip_one_makes_actions_random():
    env = LockEnv(rooms=3, actions=8, traps=0, slip=1.0, max_steps=200)
    env.reset(0)
    correct = env.oracle_action()
    rooms = []
    for _ in range(40):
        _, _, done, _ = env.step(correct)
        rooms.append(env.state_key[0])
        if done:
            break
    assert rooms.count(0) > 0 or len(rooms) > 3  # the oracle word no longer always opens the door


def test_bad_arguments_and_registry_and_vocabulary():
    for bad in ({"rooms": 0}, {"actions": 9}, {"traps": 4}, {"trap": "teleport"}, {"slip": 1.5}, {"max_steps": 0}):
        with pytest.raises(ValueError):
            LockEnv(**bad)
    env = make("lock", rooms=3, lock_seed=0)
    assert isinstance(env, LockEnv) and env.rooms == 3
    from gigpo.models.tokenizer import tiny_tokenizer

    tok = tiny_tokenizer((), False)
    for w in ACTION_WORDS:
        assert len(tok.encode(w, add_special_tokens=False)) == 1, w
