"""Self-play through the collector (gigpo.rollout.multiseat) with the tiny model on TextArena TicTacToe: one
trajectory per seat, groups (seed, seat), each seat's final reward on its last row, per-seat metrics."""

import pytest
import torch

pytestmark = pytest.mark.peers("textarena")
pytest.importorskip("textarena", reason="needs the [textarena] extra (pip install 'gigpo[textarena]')")

from gigpo.agent.constrained import ActionEncodingError  # noqa: E402
from gigpo.agent.prompt import PromptBuilder  # noqa: E402
from gigpo.envs.guard import registered_factory  # noqa: E402
from gigpo.models import load_model  # noqa: E402
from gigpo.rollout import Collector, HFEngine  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", tiny={"english_words": False}, seed=0)


def _collector(tiny, opponent="self", budget=4, **kw):
    builder = PromptBuilder(tiny.tokenizer, 256, "plain", False, include_instructions=False)
    factory = registered_factory("textarena:TicTacToe-v0", opponent=opponent, observation="board", task_lines=1)
    return Collector(factory, HFEngine(tiny.model, tiny.tokenizer, tiny.device), builder, max_response_tokens=budget,
                     history_length=0, decoding="constrained", env_name="textarena:TicTacToe-v0", **kw)


def test_each_seat_is_a_trajectory_with_its_own_reward_and_group(tiny):
    col = _collector(tiny)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        batch = col.collect([101, 202], group_size=3)
    col.close()
    trajs = batch.trajectories
    assert len(trajs) == 2 * 3 * 2 and not any(t.failed for t in trajs)
    for t in trajs:  # group = (seed, seat)
        seat = t.final_info["seat"]
        assert t.group_id == (t.traj_id // 2 // 3) * 2 + seat and t.data_source == f"seat{seat}"
    by_game = {}
    for t in trajs:
        by_game.setdefault(t.traj_id // 2, []).append(t)
    for pair in by_game.values():  # zero-sum: one seat's win is the other's loss
        o = sorted(t.final_info["outcome"] for t in pair)
        assert o in (["loss", "win"], ["draw", "draw"])
        rows = [[i for i, tr in enumerate(batch.traj_id) if tr == t.traj_id] for t in pair]
        last = [r[-1] for r in rows]
        assert all(batch.done[i] for i in last) and sum(batch.done[i] for r in rows for i in r) == 2
        finals = sorted(batch.reward[i] for i in last)
        assert finals in ([-1.0, 1.0], [0.0, 0.0])
        assert all(len(r) >= 2 for r in rows)  # both seats moved
    assert batch.summary()["valid_action_rate"] == 1.0
    s = batch.summary()
    assert s["seat0_win_rate"] + s["seat0_draw_rate"] + s["seat0_loss_rate"] == pytest.approx(1.0)
    # the rows of a seat are that seat's own turns: its state keys name it as the mover
    for i, tr in enumerate(batch.traj_id):
        assert batch.state_key[i][0] == tr % 2


def test_random_opponent_is_single_seat(tiny):
    col = _collector(tiny, opponent="random")
    batch = col.collect([7], group_size=2)
    col.close()
    assert len(batch.trajectories) == 2 and not hasattr(batch, "seat0_win_rate")
    assert "seat0_win_rate" not in batch.summary()


def test_a_budget_shorter_than_every_move_is_one_error_naming_the_budget(tiny):
    col = _collector(tiny, budget=1)
    with pytest.raises(ActionEncodingError, match=r"rollout.max_response_tokens=1 is shorter than every admissible "
                                                  r"action .* set rollout.max_response_tokens=3 or more"):
        col.collect([1], group_size=1)
    col.close()


def test_openai_opponent_plays_the_other_seat_through_a_real_server(tiny):
    """env.opponent=openai:MODEL: the other seat is played by a model behind an OpenAI-compatible server (here
    `gigpo serve`'s server on 127.0.0.1 with the tiny model); only the agent's seat has trajectories."""
    import threading

    from gigpo.serve.server import make_server

    srv = make_server("tiny", port=0, wait_ms=5.0)
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    try:
        builder = PromptBuilder(tiny.tokenizer, 256, "plain", False, include_instructions=False)
        factory = registered_factory("textarena:TicTacToe-v0", opponent="openai:tiny", opponent_base_url=srv.url,
                                     observation="board", task_lines=1)
        col = Collector(factory, HFEngine(tiny.model, tiny.tokenizer, tiny.device), builder, max_response_tokens=4,
                        history_length=0, decoding="constrained", env_name="textarena:TicTacToe-v0")
        batch = col.collect([4, 6], group_size=2)  # even seeds: the agent is seat 0 and moves first
        col.close()
    finally:
        srv.close()
    assert len(batch.trajectories) == 4 and not any(t.failed for t in batch.trajectories)
    assert {t.final_info["seat"] for t in batch.trajectories} == {0}
    assert all(t.final_info["outcome"] in ("win", "draw", "loss") for t in batch.trajectories)


def test_openai_opponent_needs_a_base_url():
    from gigpo.envs import make

    with pytest.raises(ValueError, match="needs opponent_base_url"):
        make("textarena:TicTacToe-v0", opponent="openai:some-model")
