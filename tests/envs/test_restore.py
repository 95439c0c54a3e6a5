"""Restoring an env's state by verified replay (issue 41): every built-in env and the TextArena, gymnasium and
reasoning-gym adapters replay a recorded episode exactly; an env that does not is refused with one line naming the
env, the seed and the step."""

from __future__ import annotations

import importlib.util
import random

import pytest

from gigpo.envs import make, register
from gigpo.envs.base import Env
from gigpo.envs.restore import ReplayDivergence, Visit, determinism_problem, random_episode, replay

BUILTIN = ["gridgoal", "sokoban", "frozenlake", "webshop", "search", "lock", "dialogue-guess", "dialogue-booking",
           "gridgoal-noisy", "sokoban-noisy", "webshop-noisy", "lock-noisy"]


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_envs_replay_deterministically(name):
    assert determinism_problem(lambda: make(name), name) is None


def test_alfworld_gen_replays_deterministically():
    pytest.importorskip("textworld", reason="alfworld-gen needs textworld (pip install 'gigpo[alfworld]')")
    assert determinism_problem(lambda: make("alfworld-gen"), "alfworld-gen") is None


ADAPTERS = [("textarena", "textarena:TicTacToe-v0"), ("textarena", "textarena:GuessTheNumber-v0"),
            ("gymnasium", "gym:Taxi-v4"), ("gymnasium", "gym:FrozenLake-v1"),
            ("reasoning_gym", "reasoning-gym:basic_arithmetic")]


@pytest.mark.parametrize("package, name", ADAPTERS)
def test_adapters_replay_deterministically(package, name):
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"needs the {package} package")
    assert determinism_problem(lambda: make(name), name) is None


def test_a_noisy_env_is_compared_on_its_clean_observation():
    """The ads wrapper shows each instance its own ads (by design): a restored copy is another instance, so replay
    compares info["clean_observation"] and the state key, and the shown observations do differ."""
    a, b = make("gridgoal-noisy", ad_rate=1.0), make("gridgoal-noisy", ad_rate=1.0)
    actions, visits = random_episode(a, 3, 4, random.Random(0))
    obs, info = replay(b, 3, actions, visits, "gridgoal-noisy")
    assert info["clean_observation"] == visits[-1].observation and obs != visits[-1].observation


class CoinEnv(Env):
    """Reset is seeded; each step flips a coin from an unseeded generator into the observation (from
    ``flip_from``) — deterministic at reset, not along the episode."""

    instructions = "say heads or tails"
    max_steps = 5

    def __init__(self, *, flip_from: int = 1):
        self.flip_from, self.t, self.rng = flip_from, 0, random.Random()

    def reset(self, seed):
        self.t = 0
        return f"start {seed}", {"task": "", "state_key": None, "admissible_actions": ["heads", "tails"]}

    def step(self, action):
        self.t += 1
        coin = self.rng.random() if self.t >= self.flip_from else 0
        return f"t={self.t} coin={coin}", 0.0, self.t >= 5, {"won": False, "action_valid": True}


class UnseededEnv(CoinEnv):
    def reset(self, seed):
        self.t = 0
        return f"start {self.rng.random()}", {"task": "", "admissible_actions": ["heads", "tails"]}


register("test-coin", CoinEnv, "test env: random along the episode")
register("test-unseeded", UnseededEnv, "test env: random from the reset")


def test_a_non_deterministic_env_is_refused_with_one_line_naming_env_seed_and_step():
    problem = determinism_problem(lambda: make("test-coin", flip_from=2), "test-coin")
    assert problem is not None and "\n" not in problem
    assert problem.startswith("env 'test-coin' is not deterministic given its seed and actions: replaying seed 11, "
                              "the observation after step 2 differs from the recorded one ('t=2 coin=0.")
    assert problem.endswith("it cannot be branched (rollout.branch=off)")
    problem = determinism_problem(UnseededEnv, "test-unseeded")
    assert "replaying seed 11, the observation after reset differs" in problem


def test_replay_stands_the_env_where_the_recording_ended_and_checks_state_keys():
    env, twin = make("lock", rooms=3, lock_seed=1), make("lock", rooms=3, lock_seed=1)
    actions, visits = random_episode(env, 7, 5, random.Random(1))
    replay(twin, 7, actions[:3], visits[:4])
    assert twin.step(actions[3])[0] == visits[4].observation  # it continues as the recording did
    forged = [*visits[:2], Visit(visits[2].observation, ("not", "the", "state"))]
    with pytest.raises(ReplayDivergence, match=r"replaying seed 7, the state key after step 2 differs"):
        replay(twin, 7, actions[:2], forged, "lock")
    with pytest.raises(ValueError, match="one recorded visit per action plus the reset's"):
        replay(twin, 7, actions[:2], visits[:2])
