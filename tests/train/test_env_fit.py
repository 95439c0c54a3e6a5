"""A user's own game on the first try: settings that fit the env's actions for a run that names it without a
preset (gigpo.train.config.env_settings), a run that cannot act stops with one line (gigpo.train.preflight.action_check), and held-out
evaluation of an env whose start ignores the seed says so (gigpo.train.preflight.heldout)."""

from __future__ import annotations

import warnings

import pytest
import tests.train.elevator_env  # noqa: F401 - registers "elevator-test", the reader's own env

from gigpo.envs import register
from gigpo.envs.base import Env
from gigpo.train.config import load_config

TINY = "model.tiny={english_words: false, hidden_size: 32, intermediate_size: 64}"


class LongMoves(Env):
    """Moves no 1-token response can spell (the ConnectFour case of the issue, without TextArena's 100 turns)."""

    instructions = "Answer ascend-one-floor or descend-one-floor."
    max_steps = 2

    def reset(self, seed):
        return "lobby", {"task": "", "state_key": 0, "admissible_actions": ["ascend-one-floor", "descend-one-floor"]}

    def step(self, action):
        valid = action.strip() in ("ascend-one-floor", "descend-one-floor")
        return "lobby", 0.0, False, {"won": False, "action_valid": valid, "state_key": 0,
                                     "admissible_actions": ["ascend-one-floor", "descend-one-floor"]}


register("long-moves-test", LongMoves, "moves of 16 characters (tests)")


def _fit(*overrides: str, config: str | None = None):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfg = load_config(config, list(overrides))
    return cfg, [str(w.message) for w in caught if type(w.category).__name__ != "FutureWarning"]


def test_an_own_env_named_without_a_preset_gets_constrained_decoding_and_a_budget_its_moves_fit():
    cfg, notes = _fit("env=elevator-test")
    assert (cfg.rollout.decoding, cfg.rollout.max_response_tokens) == ("constrained", len("down") + 1)
    assert any("rollout.decoding=constrained" in n and "elevator-test" in n for n in notes)
    # the user's own keys win, and are not mentioned
    cfg, notes = _fit("env=elevator-test", "rollout.max_response_tokens=9", "rollout.decoding=free")
    assert (cfg.rollout.decoding, cfg.rollout.max_response_tokens) == ("free", 9) and not notes
    # the built-in envs keep their presets' settings (the quickstart's, here)
    cfg, notes = _fit("env=sokoban")
    assert (cfg.rollout.decoding, cfg.rollout.max_response_tokens) == ("free", 1) and not notes


@pytest.mark.peers("textarena")
def test_textarena_one_line_form_fits_the_game_and_a_preset_for_the_game_is_kept():
    cfg, _ = _fit("env=textarena:ConnectFour-v0")
    assert (cfg.rollout.decoding, cfg.rollout.max_response_tokens) == ("constrained", len("[col 0]") + 1)
    cfg, _ = _fit("env=textarena:Mastermind-v0")  # no legal-move list: free text, the prompt's example's length
    assert (cfg.rollout.decoding, cfg.rollout.max_response_tokens) == ("free", len("[2 1 4 5]") + 1)
    cfg, notes = _fit(config="textarena-tictactoe")  # the file names the env: the file was written for it
    assert cfg.rollout.max_response_tokens == 4 and not notes


@pytest.mark.peers("textarena")
def test_textarena_instructions_give_each_games_own_move_format():
    from gigpo.envs import make

    expected = {"ConnectFour-v0": "e.g. [col 4] or [col 1]", "TowerOfHanoi-v0": "e.g. [A C].",
                "Mastermind-v0": "e.g. [2 1 4 5].", "TicTacToe-v0": "e.g. [4]."}
    for game, hint in expected.items():
        assert hint in make(f"textarena:{game}").instructions, game


def test_a_run_whose_first_iterations_make_no_valid_action_stops_naming_the_keys(tmp_path):
    from gigpo.train.preflight.action_check import NoValidActions
    from gigpo.train.trainer import Trainer

    cfg = load_config(None, [TINY, "env=long-moves-test", "rollout.decoding=free", "rollout.max_response_tokens=1",
                             "rollout.groups=2", "rollout.group_size=2", "train.eval_episodes=0",
                             "train.progress=false", "train.iterations=5", "train.stop_without_valid_actions=2",
                             f"train.run_dir={tmp_path / 'run'}"])
    with pytest.raises(NoValidActions) as err:
        Trainer(cfg).train()
    msg = str(err.value)
    assert "first 2 iterations" in msg and "\n" not in msg
    assert "rollout.decoding=constrained" in msg and f"rollout.max_response_tokens={len('descend-one-floor') + 1}" in msg
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 2  # it stopped after iteration 2 of 5
    # with the keys it names, the same run acts (every constrained move is valid)
    cfg = load_config(None, [TINY, "env=long-moves-test", "rollout.groups=2", "rollout.group_size=2",
                             "train.eval_episodes=0", "train.progress=false", "train.iterations=1",
                             f"train.run_dir={tmp_path / 'ok'}"])
    assert Trainer(cfg).train()["rollout/valid_action_rate"] == 1.0


def test_an_evaluation_whose_first_episodes_are_all_invalid_stops_and_the_cli_says_one_line(capsys):
    from gigpo.cli import main

    argv = ["eval", "--model", "tiny", "--env", "long-moves-test", "--episodes", "40", TINY,
            "rollout.decoding=free", "rollout.max_response_tokens=1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("gigpo eval: error: no valid action in the first 8 of 40 episodes")
    assert f"rollout.max_response_tokens={len('descend-one-floor') + 1}" in err
    assert main([*argv, "train.stop_without_valid_actions=0"]) == 0  # the switch that evaluates regardless


def test_an_env_whose_start_ignores_the_seed_is_named_and_its_evaluation_labelled():
    from gigpo.train.compose import probe_env
    from gigpo.train.evaluate import SAME_START_KEY, format_table
    from gigpo.train.preflight.heldout import SAME_START, SameStartWarning

    with pytest.warns(SameStartWarning, match="gym:FrozenLake-v1.*starts the same for every seed"):
        assert probe_env(load_config(None, ["env=gym:FrozenLake-v1"])) is True
    with warnings.catch_warnings():
        warnings.simplefilter("error", SameStartWarning)
        assert probe_env(load_config(None, [])) is False  # gridgoal: the seed places agent and goal
    table = format_table({"success_rate": 1.0, SAME_START_KEY: 1.0})
    assert table.splitlines()[0] == f"{SAME_START}:" and SAME_START_KEY not in table
    assert "held-out" not in format_table({"success_rate": 1.0})


def test_an_untrained_greedy_baseline_that_could_move_is_not_stopped(capsys):
    """The README's untrained baseline: greedy tiny on gridgoal makes no valid move, but a move fits its budget
    (one token): a true 0.00 baseline, not a setting to fix."""
    from gigpo.cli import main

    assert main(["eval", "--model", "tiny", "--env", "gridgoal", "--episodes", "12"]) == 0
    assert "| valid_action_rate | 0.0000 |" in capsys.readouterr().out
