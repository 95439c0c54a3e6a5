"""alfworld-gen: seeded layouts of the six task types, played by TextWorld's PDDL engine over ALFWorld's domain."""

from __future__ import annotations

import numpy as np
import pytest

from gigpo.envs.alfworld.env import AlfWorldGenEnv, heldout_game
from gigpo.envs.alfworld.layout import CAN_CONTAIN, generate
from gigpo.envs.alfworld.tasks import PAPER_ORDER, TASK_TYPES, task_type_of


def test_layouts_follow_alfworld_naming_and_task_rules():
    for short in PAPER_ORDER:
        for i in range(30):
            g = generate(np.random.default_rng([i, 7]), short)
            names = [r.name for r in g.receptacles]
            assert len(set(names)) == len(names) and all(n.split()[1].isdigit() for n in names)
            assert g.task.short == short and g.goal in [t.format(obj=g.obj.lower(), recep=g.recep.lower(),
                                                                   toggle=g.toggle.lower()) for t in g.task.templates]
            goal_kind = [it for it in g.items if it.kind == g.obj]
            # never solved at the start: no goal object already sits in a goal receptacle
            assert all(g.receptacles[it.place].kind != g.recep for it in goal_kind)
            assert len(goal_kind) >= (2 if short == "Pick2" else 1)
            if short != "Look":
                assert g.obj in CAN_CONTAIN[g.recep]
            need = {"Heat": "microwave 1", "Cool": "fridge 1", "Clean": "sinkbasin 1", "Look": "desklamp 1"}.get(short)
            if need:
                assert need in " ".join(g.walkthrough)


def test_task_type_from_alfworld_folder_names():
    assert task_type_of("json_2.1.1/train/pick_heat_then_place_in_recep-Egg-None-Fridge-13/trial_T1").short == "Heat"
    assert task_type_of("look_at_obj_in_light-Book-None-DeskLamp-301").short == "Look"
    assert task_type_of("pick_and_place_with_movable_recep-Pen-Mug-Desk-1") is None
    assert [t.short for t in TASK_TYPES] == ["Pick", "Look", "Clean", "Heat", "Cool", "Pick2"]


def test_thousands_of_distinct_training_games_apart_from_the_heldout_set():
    env = AlfWorldGenEnv.__new__(AlfWorldGenEnv)  # the game table only: no engine needed
    env.split, env.train_games, env.heldout_games, env.task_types = "train", 3553, 140, list(PAPER_ORDER)
    env._heldout_signatures = {heldout_game(i, env.task_types).signature() for i in range(140)}
    train = {env.make_game(i).signature() for i in range(2000)}
    assert len(train) >= 1990
    assert not train & env._heldout_signatures
    assert env.make_game(5).signature() == env.make_game(5 + 3553).signature()  # seed % train_games
    types = [heldout_game(i, list(PAPER_ORDER)).task.short for i in range(12)]
    assert types == list(PAPER_ORDER) * 2  # the held-out set cycles through the types


@pytest.fixture(scope="module")
def engine():
    pytest.importorskip("textworld")
    pytest.importorskip("fast_downward")
    pytest.importorskip("alfworld.agents.utils.misc")
    return True


@pytest.mark.peers("textworld", "fast_downward", "alfworld")
def test_every_task_type_is_won_by_its_walkthrough_through_the_engine(engine):
    env = AlfWorldGenEnv(split="test", heldout_games=6)
    seen = set()
    for seed in range(6):
        obs, info = env.reset(seed)
        assert obs.startswith("-= Welcome to TextWorld, ALFRED! =-") and "Your task is to: " in obs
        assert info["task"] and info["data_source"] == PAPER_ORDER[seed]
        seen.add(info["task_type"])
        walkthrough = list(env.make_game(seed).walkthrough)
        for k, cmd in enumerate(walkthrough):
            assert cmd in info["admissible_actions"], (seed, k, cmd)
            assert env.oracle_action() == cmd
            obs, reward, done, info = env.step(cmd)
            assert info["action_valid"] and "Nothing happens" not in obs
            assert done == (k == len(walkthrough) - 1)
        assert info["won"] and reward == 10.0
    assert len(seen) == 6


@pytest.mark.peers("textworld", "fast_downward", "alfworld")
def test_same_seed_same_start_and_invalid_commands_change_nothing(engine):
    a, b = AlfWorldGenEnv(train_games=50), AlfWorldGenEnv(train_games=50)
    obs_a, info_a = a.reset(17)
    obs_b, info_b = b.reset(17)
    assert obs_a == obs_b and info_a["admissible_actions"] == info_b["admissible_actions"]
    assert info_a["state_key"] == info_b["state_key"] and "help" not in info_a["admissible_actions"]
    obs, reward, done, info = a.step("fly to the moon")
    assert obs == "Nothing happens." and not info["action_valid"] and reward == 0.0 and not done
    assert info["state_key"] == info_a["state_key"]
    first = info_a["admissible_actions"][0]
    _, _, _, moved = a.step(first)
    assert moved["state_key"] != info_a["state_key"]
    assert a.reset(17)[0] == obs_a  # the cached game restarts from its initial state


@pytest.mark.peers("textworld", "fast_downward", "alfworld")
def test_step_cap_counts_every_step_and_oracle_recovers_off_walkthrough(engine):
    env = AlfWorldGenEnv(split="test", heldout_games=6, max_steps=3)
    env.reset(0)
    dones = [env.step("jump")[2] for _ in range(3)]
    assert dones == [False, False, True]
    env = AlfWorldGenEnv(split="test", heldout_games=6)
    obs, info = env.reset(2)  # a clean task: wander first, then let the planner finish it
    detour = next(a for a in info["admissible_actions"] if a.startswith("go to") and a not in env.make_game(2).walkthrough)
    env.step(detour)
    for _ in range(20):
        obs, reward, done, info = env.step(env.oracle_action())
        if done:
            break
    assert info["won"]


def test_the_preset_gives_the_tiny_model_one_token_per_alfworld_word():
    from gigpo.models.tokenizer import tiny_tokenizer
    from gigpo.models.vocab import ENV_WORDS
    from gigpo.train.config import load_config

    tiny = load_config("alfworld-gen", None).model.tiny
    tok = tiny_tokenizer(tuple(tiny["extra_words"]), english=tiny["english_words"])
    words = set(tiny["extra_words"]) | set(ENV_WORDS)
    for short in PAPER_ORDER:
        for i in range(20):
            g = generate(np.random.default_rng([i, 11]), short)
            for cmd in g.walkthrough:
                assert all(w in words or w.isdigit() for w in cmd.split()), cmd
                ids = tok(cmd, add_special_tokens=False)["input_ids"]
                assert tok.unk_token_id not in ids and len(ids) <= 2 * len(cmd.split()), (cmd, ids)
