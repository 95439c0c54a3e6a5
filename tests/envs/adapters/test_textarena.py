"""env=textarena:GAME against TextArena 0.7.4: legal moves, the group contract (also with envs interleaved in
one process), illegal moves, the random opponent, the multi-seat (self-play) contract, refused downloads."""

import random

import pytest

pytestmark = pytest.mark.peers("textarena")
pytest.importorskip("textarena", reason="needs the [textarena] extra (pip install 'gigpo[textarena]')")

from gigpo.envs import make  # noqa: E402


def _play(env, seed, actions):
    out = [env.reset(seed)]
    for a in actions:
        step = env.step(a)
        out.append(step)
        if step[2]:
            break
    return out


def test_unknown_game_lists_close_matches():
    with pytest.raises(ValueError, match=r"unknown TextArena game 'TicTacToe'; close matches: textarena:TicTacToe-v0"):
        make("textarena:TicTacToe")


def test_tictactoe_legal_moves_state_key_and_task():
    env = make("textarena:TicTacToe-v0", opponent="self")
    obs, info = env.reset(4)
    assert info["admissible_actions"] == [f"[{i}]" for i in range(9)]
    assert info["seat"] == 0 and info["seats"] == 2 and "Player 0" in info["task"]
    obs, reward, done, info = env.step("[4]")
    assert info["seat"] == 1 and "[4]" not in info["admissible_actions"] and "O" in info["state_key"][1]


def test_group_contract_holds_with_envs_interleaved_in_one_process():
    """TextArena seeds Python's global random at reset; GuessTheNumber draws its number from it. Two envs reset
    with one seed, with other draws from the global generator between their calls, must stay identical."""
    a, b = make("textarena:GuessTheNumber-v0"), make("textarena:GuessTheNumber-v0")
    oa, ia = a.reset(11)
    random.random()
    ob, ib = b.reset(11)
    assert (oa, ia["state_key"]) == (ob, ib["state_key"])
    for guess in ("[10]", "[5]", "[15]"):
        ra, rb = a.step(guess), (random.random(), b.step(guess))[1]
        assert ra == rb


def test_random_opponent_is_seeded_by_the_reset_seed():
    def legal_game(env, seed):
        obs, info = env.reset(seed)
        out = [obs]
        while True:
            obs, reward, done, info = env.step(info["admissible_actions"][0])
            out.append((obs, reward, done))
            if done:
                return out, info

    a, b = make("textarena:TicTacToe-v0"), make("textarena:TicTacToe-v0")
    ga, ia = legal_game(a, 5)
    gb, ib = legal_game(b, 5)
    assert ga == gb and ia["outcome"] in ("win", "draw", "loss")
    assert ia["data_source"] == "seat1"  # env.seat=auto: seed % 2


def test_an_illegal_move_is_an_invalid_action_never_a_crash():
    env = make("textarena:TicTacToe-v0", opponent="self")
    env.reset(0)
    env.step("[4]")
    obs, reward, done, info = env.step("[4]")  # occupied
    assert info["action_valid"] is False and not done and info["seat"] == 1
    obs, reward, done, info = env.step("no move at all")  # TextArena's allowance used up: that seat loses
    assert info["action_valid"] is False and done
    assert info["seat_rewards"] == [1.0, -1.0] and info["seat_outcomes"] == ["win", "loss"]


def test_self_play_final_rewards_per_seat():
    env = make("textarena:TicTacToe-v0", opponent="self")
    env.reset(0)
    for move in ("[0]", "[3]", "[1]", "[4]"):
        assert not env.step(move)[2]
    obs, reward, done, info = env.step("[2]")  # seat 0: top row
    assert done and reward == 1.0 and info["seat_rewards"] == [1.0, -1.0] and info["seat_won"] == [True, False]


def test_games_with_word_lists_are_refused_without_their_corpus():
    try:
        import nltk

        nltk.data.find("corpora/words")
        pytest.skip("NLTK's words corpus is installed here: Wordle would run")
    except LookupError:
        pass
    with pytest.raises(ValueError, match="never downloads"):
        make("textarena:Wordle-v0")


def test_bad_options_are_errors():
    with pytest.raises(ValueError, match="opponent must be"):
        make("textarena:TicTacToe-v0", opponent="smart")
    with pytest.raises(ValueError, match="seat 5 does not exist"):
        make("textarena:TicTacToe-v0", seat="5")
