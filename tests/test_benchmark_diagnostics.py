"""The pure helpers of issue 42's diagnosis scripts (benchmarks/gridgoal_moves.py, gridgoal_policy_map.py,
tictactoe_tactics.py, smollm2_search.py): what they count is what their docs say."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from gigpo.envs.gridgoal import ACTIONS, MOVES, GridGoalEnv

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))
    try:
        yield lambda name: importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def test_grid_positions_and_move_effects_match_the_env(bench):
    moves = bench("gridgoal_moves")
    env = GridGoalEnv(size=4, max_steps=6)
    for seed in range(40):
        env.reset(seed)
        p, g = env.state_key
        assert moves.positions(env.render()) == (p, g)
        before = abs(p[0] - g[0]) + abs(p[1] - g[1])
        for action in ACTIONS:
            env._agent, env._goal, env._done, env._steps = p, g, False, 0
            env.step(action)
            q = env.state_key[0]
            after = abs(q[0] - g[0]) + abs(q[1] - g[1])  # the env's own move, off-grid clipping included
            assert moves.move_effect(p, g, action, 4) == (after > before) - (after < before)


def test_policy_map_closer_moves_enumerates_every_state(bench):
    pmap = bench("gridgoal_policy_map")
    states = pmap.states(4)
    assert len(states) == 16 * 15 and len(set(states)) == len(states)
    # P directly below G: only "up" is closer; P in the top-left corner, G bottom-right: down and right
    assert pmap.closer_moves((2, 1), (0, 1), 4) == [a == "up" for a in ACTIONS]
    assert pmap.closer_moves((0, 0), (3, 3), 4) == [a in ("down", "right") for a in ACTIONS]
    assert set(MOVES) == set(ACTIONS)


def test_tictactoe_board_and_one_move_tactics(bench):
    tactics = bench("tictactoe_tactics")
    obs = ("[GAME] Current Board:\n\n X | X | O \n---+---+---\n O | 4 | O \n---+---+---\n 6 | 7 | 8 \n\n"
           "Available Moves: '[4]', '[6]', '[7]', '[8]'")
    cells = tactics.board(obs)
    assert cells == ["X", "X", "O", "O", "4", "O", "6", "7", "8"]
    assert tactics.completing(cells, "O") == {4, 8}  # rows 3-4-5 and column 2-5-8
    assert tactics.completing(cells, "X") == set()  # 0-1-2 is closed by O
    assert tactics.board("no board here") is None


def test_search_table_reports_draws_and_losses_for_a_seat(bench):
    search = bench("smollm2_search")
    assert search.outcome({"eval/success_rate": 0.125}) == "0.125"
    # wins 0.5, losses 0.25 (return = wins - losses = 0.25), draws 0.25
    rec = {"eval/success_rate": 0.5, "eval/episode_return": 0.25, "eval/seat1/success_rate": 0.5}
    assert search.outcome(rec) == "0.500 (d 0.25, l 0.25)"
