"""One rule for exact anchors: the env's state_key when it gives one, else the observation text; the metrics say
which was used, and grouping.metric=observation keeps the text."""

from __future__ import annotations

import tests.train.elevator_env  # noqa: F401 - registers "elevator-test"

from gigpo.rollout.batch import RolloutBatch
from gigpo.train.config import load_config
from gigpo.train.update.estimate import row_advantages
from gigpo.train.update.grouping import anchors_for, grouping_spec, state_key_fraction


def _batch(state_keys: list, observations: list[str], returns: list[float]) -> RolloutBatch:
    """One group of single-step trajectories (one row each)."""
    b = RolloutBatch()
    for i, (k, o, r) in enumerate(zip(state_keys, observations, returns)):
        b.add_row(group_id=0, traj_id=i, step=0, reward=r, done=True, action_valid=True, observation=o,
                  state_key=k, prompt_ids=[1], response_ids=[2], sampling_logprobs=[0.0])
    return b


def test_exact_anchors_are_the_envs_state_when_given_and_the_text_otherwise():
    # the case: one state, two texts ("wrong floor." after a move that does not arrive)
    given = _batch([(1, 4), (1, 4)], ["floor 1 target 4", "wrong floor. floor 1 target 4"], [0.0, 1.0])
    exact = anchors_for(given, "exact", None)
    assert exact[0] == exact[1]
    text = anchors_for(given, "observation", None)
    assert text[0] != text[1]
    assert anchors_for(given, "state_key", None) == exact  # the old name of the same rule
    assert state_key_fraction(given) == 1.0
    # an env without state keys: the collector stored the text in their place, and exact groups by it
    plain = _batch(["a", "a"], ["a", "a"], [0.0, 1.0])
    assert anchors_for(plain, "exact", None) == ["a", "a"] and state_key_fraction(plain) == 0.0


def test_the_metrics_say_which_anchors_were_used_and_the_step_groups_follow_the_rule():
    given = _batch([(1, 4), (1, 4)], ["floor 1 target 4", "wrong floor. floor 1 target 4"], [0.0, 1.0])
    cfg = load_config(None, ["algorithm=gigpo", "algorithm.step_weight=1.0"])
    adv, _, stats = row_advantages(cfg, given, grouping_spec(cfg))
    assert stats["grouping/state_key_anchors"] == 1.0
    cfg_text = load_config(None, ["algorithm=gigpo", "algorithm.step_weight=1.0", "grouping.metric=observation"])
    adv_text, _, stats_text = row_advantages(cfg_text, given, grouping_spec(cfg_text))
    assert "grouping/state_key_anchors" not in stats_text
    # one step group of two (a step term) under exact; two singletons (no step term) under observation
    assert abs(adv[1] - adv[0]) > abs(adv_text[1] - adv_text[0])


def test_every_preset_groups_by_a_documented_metric():
    from gigpo.train.config import CONFIG_DIR

    for path in CONFIG_DIR.glob("*.yaml"):
        text = path.read_text()
        assert "metric: state_key" not in text, f"{path.name}: exact is the state-key rule now"
