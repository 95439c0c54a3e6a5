"""alfworld (the real games): a small data folder in ALFWorld's layout, written here, read like the real one."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gigpo.envs.alfworld.real import DATA_ENV, AlfWorldEnv, list_games, resolve_data_dir
from gigpo.envs.base import EnvError


def test_missing_data_names_the_path_and_alfworld_download(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    with pytest.raises(EnvError, match=r"ALFWORLD_DATA.*alfworld-download.*nothing is downloaded"):
        resolve_data_dir(None)
    with pytest.raises(EnvError, match=rf"{tmp_path}/json_2.1.1.*alfworld-download"):
        resolve_data_dir(str(tmp_path))
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(EnvError, match="nowhere/json_2.1.1"):
        resolve_data_dir(None)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    pytest.importorskip("textworld")
    pytest.importorskip("fast_downward")
    pytest.importorskip("alfworld.agents.utils.misc")
    from gigpo.envs.alfworld.layout import generate
    from gigpo.envs.alfworld.pddl import write_game

    root = tmp_path_factory.mktemp("alfworld_data")
    split = root / "json_2.1.1" / "valid_seen"
    games = {"pick_cool_then_place_in_recep-Mug-None-Cabinet-10/trial_T20190908_1": "Cool",
             "look_at_obj_in_light-Book-None-DeskLamp-301/trial_T20190907_2": "Look",
             "pick_and_place_with_movable_recep-Pen-Mug-Desk-1/trial_T1": "Pick",  # left out, as ALFWorld does
             "pick_and_place_simple-Pillow-None-Sofa-2/trial_T3": "Pick"}
    for i, (folder, short) in enumerate(games.items()):
        write_game(generate(np.random.default_rng([i, 3]), short), split / folder)
    unsolvable = split / "pick_two_obj_and_place-Book-None-Sofa-1/trial_T4/game.tw-pddl"
    write_game(generate(np.random.default_rng(9), "Pick2"), unsolvable.parent)
    unsolvable.write_text(json.dumps({**json.loads(unsolvable.read_text()), "solvable": False}))
    return root


@pytest.mark.peers("textworld", "fast_downward", "alfworld")
def test_games_listed_sorted_solvable_and_typed(data_dir):
    games = list_games(str(data_dir / "json_2.1.1" / "valid_seen"), ("Pick", "Look", "Clean", "Heat", "Cool", "Pick2"))
    assert [t for _, t in games] == ["look_at_obj_in_light", "pick_and_place_simple", "pick_cool_then_place_in_recep"]
    assert [p for p, _ in games] == sorted(p for p, _ in games)
    assert len(list_games(str(data_dir / "json_2.1.1" / "valid_seen"), ("Cool",))) == 1


@pytest.mark.peers("textworld", "fast_downward", "alfworld")
def test_real_layout_plays_with_alfworld_names_and_wins(data_dir, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(data_dir))
    env = AlfWorldEnv(split="valid_seen", task_types=["Look", "Cool"])
    assert [t for _, t in env.games] == ["look_at_obj_in_light", "pick_cool_then_place_in_recep"]
    obs, info = env.reset(3)  # 3 % 2 -> the cool game, on every machine
    assert info["task_type"] == "pick_cool_then_place_in_recep" and info["data_source"] == "Cool"
    assert "a cabinet 1" in obs and "_bar_" not in obs  # ALFWorld's Demangler named the mangled ids
    assert info["gamefile"].endswith("trial_T20190908_1/game.tw-pddl")
    for _ in range(50):
        assert env.oracle_action() in info["admissible_actions"]
        obs, reward, done, info = env.step(env.oracle_action())
        if done:
            break
    assert info["won"] and reward == 10.0
    with pytest.raises(EnvError, match="valid_unseen.*alfworld-download"):
        AlfWorldEnv(data_dir=str(data_dir), split="test")  # test = valid_unseen, absent here
    with pytest.raises(ValueError, match="split must be one of"):
        AlfWorldEnv(data_dir=str(data_dir), split="dev")
