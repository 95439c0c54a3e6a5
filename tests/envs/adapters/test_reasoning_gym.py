"""env=reasoning-gym:DATASET against reasoning-gym 0.1.25: one question per seed, the dataset's scorer, retries
with feedback, the discounted reward, difficulty options checked."""

import pytest

pytestmark = pytest.mark.peers("reasoning_gym")
pytest.importorskip("reasoning_gym", reason="needs the [reasoning-gym] extra (pip install 'gigpo[reasoning-gym]')")

from gigpo.envs import make  # noqa: E402

OPTS = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}


def test_group_contract_same_seed_same_question_and_feedback():
    a, b = make("reasoning-gym:basic_arithmetic", **OPTS), make("reasoning-gym:basic_arithmetic", **OPTS)
    assert a.reset(3) == b.reset(3)
    assert a.step("7") == b.step("7")
    assert len({a.reset(s)[1]["task"] for s in range(3, 8)}) > 1  # the seed picks the question


def test_wrong_then_right_answer_is_discounted_and_ends_won():
    env = make("reasoning-gym:basic_arithmetic", attempt_discount=0.5, **OPTS)
    obs, info = env.reset(9)
    right = env._entry["answer"]
    obs, reward, done, info = env.step("not a number")
    assert not done and reward == 0.0 and "Attempt 2 of 3" in obs
    obs, reward, done, info = env.step(f"<answer>{right}</answer>")
    assert done and info["won"] and reward == 0.5 and not info["truncated"]


def test_attempts_used_up_is_truncation():
    env = make("reasoning-gym:basic_arithmetic", max_attempts=2, **OPTS)
    env.reset(1)
    env.step("x")
    obs, reward, done, info = env.step("y")
    assert done and info["truncated"] and not info["won"] and "No attempts left" in obs


def test_unknown_dataset_and_option_are_one_line_errors():
    with pytest.raises(ValueError, match="close matches: reasoning-gym:basic_arithmetic"):
        make("reasoning-gym:basic_arithmetc")
    with pytest.raises(ValueError, match="has no option max_termz; its options: .*max_terms"):
        make("reasoning-gym:basic_arithmetic", max_termz=2)
    with pytest.raises(ValueError, match="max_terms must be >= min_terms"):
        make("reasoning-gym:basic_arithmetic", min_terms=3, max_terms=2)


def test_random_agent_candidates_are_answers_of_other_items():
    env = make("reasoning-gym:basic_arithmetic", **OPTS)
    obs, info = env.reset(2)
    assert info["admissible_actions"] is None and 1 <= len(info["random_actions"]) <= 4
