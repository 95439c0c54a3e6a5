"""env=gym:ENV_ID against gymnasium itself: text observations, named actions, the group contract, termination
vs truncation, invalid actions, won."""

import pytest

from gigpo.envs import make


def _play(env, seed, actions):
    out = [env.reset(seed)[0]]
    for a in actions:
        obs, reward, done, info = env.step(a)
        out.append((obs, reward, done, info["state_key"], info["truncated"]))
        if done:
            break
    return out


@pytest.mark.parametrize("env_id,actions", [
    ("Taxi-v4", ["south", "east", "pickup", "north", "west", "dropoff"] * 2),
    ("FrozenLake-v1", ["right", "down", "down", "right", "down", "right"]),
    ("Blackjack-v1", ["hit", "hit", "stick"]),
])
def test_group_contract_same_seed_same_actions_same_observations(env_id, actions):
    a, b = make(f"gym:{env_id}"), make(f"gym:{env_id}")
    assert _play(a, 7, actions) == _play(b, 7, actions)
    assert _play(a, 7, actions) != _play(a, 8, actions) or env_id == "FrozenLake-v1"  # FrozenLake's map is fixed


def test_taxi_text_marks_the_taxi_and_names_passenger_and_destination():
    env = make("gym:Taxi-v4")
    obs, info = env.reset(3)
    assert "T" in obs and "Passenger: waiting at" in obs and "Destination:" in obs and "\x1b" not in obs
    assert info["admissible_actions"] == ["south", "north", "east", "west", "pickup", "dropoff"]
    assert isinstance(info["state_key"], int)


def test_time_limit_is_truncation_not_termination():
    env = make("gym:Taxi-v4", max_steps=3)
    env.reset(0)
    for _ in range(2):
        assert env.step("pickup")[2] is False
    obs, reward, done, info = env.step("pickup")
    assert done and info["truncated"] and not info["won"]


def test_cliffwalking_reaching_the_goal_is_won_and_not_truncated():
    env = make("gym:CliffWalking-v1")
    env.reset(0)
    for a in ["up"] + ["right"] * 11:
        assert not env.step(a)[2]
    obs, reward, done, info = env.step("down")
    assert done and info["won"] and not info["truncated"] and info["score"] == 1.0


def test_an_invalid_action_leaves_the_state_and_is_marked():
    env = make("gym:FrozenLake-v1")
    obs, info = env.reset(0)
    obs2, reward, done, info2 = env.step("jump")
    assert (obs2, reward, done) == (obs, 0.0, False) and info2["action_valid"] is False


def test_a_retired_version_runs_the_current_one(caplog):
    env = make("gym:Taxi-v3")
    assert env.env_id == "Taxi-v4"


def test_a_non_discrete_action_space_is_refused():
    with pytest.raises(ValueError, match="needs a Discrete one"):
        make("gym:Pendulum-v1")


def test_state_key_observation_uses_the_text():
    env = make("gym:Taxi-v4", state_key="observation")
    obs, info = env.reset(1)
    assert info["state_key"] == obs


def test_gym_keyword_options_reach_gym_make_and_unknown_ones_are_named():
    from gigpo.train.config import load_config

    slippery, still = make("gym:FrozenLake-v1"), make("gym:FrozenLake-v1", is_slippery=False)
    # the transition table: three outcomes per move on ice, one without slipping
    assert len(slippery._gym.unwrapped.P[0][0]) == 3 and len(still._gym.unwrapped.P[0][0]) == 1
    # FrozenLake without slipping is deterministic: right, right, down, down, down, right reaches the goal
    assert _play(still, 0, ["right", "right", "down", "down", "down", "right"])[-1][2] is True
    # the two documented spellings give the same options
    assert load_config(None, ["env=gym:FrozenLake-v1", "env.is_slippery=false"]).env.options == {"is_slippery": False}
    assert load_config(None, ["env=gym:FrozenLake-v1", "env.make_kwargs.is_slippery=false"]).env.options == {
        "make_kwargs": {"is_slippery": False}}
    with pytest.raises(ValueError, match=r"does not accept is_slipery; its options are: .*is_slippery"):
        make("gym:FrozenLake-v1", is_slipery=False)
