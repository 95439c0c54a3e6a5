"""env=verifiers:MODULE against verifiers 0.3.1 (its classic MultiTurnEnv API): a SingleTurnEnv and a MultiTurnEnv
with rubrics (vf_test_envs.py beside this file, datasets in memory), the group contract, truncation vs
termination, env.args, the env guard, one-line errors, and a 2-iteration `gigpo train` / `gigpo eval` on it."""

from __future__ import annotations

import json
import logging
import signal
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.peers("verifiers")
pytest.importorskip("verifiers", reason="needs the [verifiers] extra (pip install 'gigpo[verifiers]')")

from gigpo import cli  # noqa: E402
from gigpo.envs import make  # noqa: E402
from gigpo.envs.base import EnvError  # noqa: E402
from gigpo.envs.guard import EnvFault, GuardedEnv, registered_factory  # noqa: E402

MODULE = str(Path(__file__).with_name("vf_test_envs.py"))
NAME = f"verifiers:{MODULE}"
TINY = "model.tiny={english_words: false, hidden_size: 32, intermediate_size: 64}"


def test_single_turn_env_scored_by_its_rubric():
    env = make(NAME, **{"args.kind": "single"})
    assert env.instructions == "Answer with the number only." and env.max_steps == 1
    obs, info = env.reset(10)  # row 10: 3 + 1
    assert obs == "What is 3 + 1?" == info["task"] and info["admissible_actions"] is None
    obs, reward, done, info = env.step("4")
    assert (reward, done, info["won"], info["truncated"], info["score"]) == (1.0, True, True, False, 1.0)
    assert info["metrics"]["exact"] == 1.0 and info["metrics"]["length"] == 1.0  # the weight-0 metric is reported
    env.reset(10)
    assert env.step("5")[1:3] == (0.0, True)
    with pytest.raises(EnvError, match="after the episode ended"):
        env.step("4")
    env.close()


def test_multi_turn_env_replies_stops_and_discounts():
    env = make(NAME)  # guess my number in 1..4, 3 turns
    obs, info = env.reset(2)  # row 2: the number is 3
    assert "Guess my number" in obs and env.max_steps == 3
    obs, reward, done, info = env.step("1")
    assert (obs, reward, done) == ("1 is wrong: go higher.", 0.0, False) and not info["won"]
    obs, reward, done, info = env.step("3")  # the @vf.stop condition fires: terminated, scored
    assert done and info["won"] and reward == 0.75 and not info["truncated"] and info["stop_condition"] == "guessed"
    env.close()


def test_max_turns_is_truncation_and_max_steps_cuts_earlier():
    env = make(NAME)
    env.reset(2)
    env.step("1"), env.step("2")
    obs, reward, done, info = env.step("4")
    assert done and info["truncated"] and reward == 0.0 and info["stop_condition"] == "max_turns_reached"
    short = make(NAME, max_steps=1)
    short.reset(2)
    obs, reward, done, info = short.step("1")
    assert done and info["truncated"] and info["stop_condition"] == "max_steps"
    env.close(), short.close()


def test_group_contract_same_seed_same_actions_same_episode():
    a, b = make(NAME), make(NAME)
    assert a.reset(7) == b.reset(7)
    for action in ("1", "x", "2"):
        assert a.step(action) == b.step(action)
    assert len({a.reset(s)[1]["state_key"] for s in range(4)}) == 1  # one prompt, rows differ only in the answer
    assert a.reset(5)[1]["state_key"] != a.step("2")[3]["state_key"]  # the key follows the message history
    a.close(), b.close()


def test_a_seed_that_does_not_fix_the_start_is_one_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="gigpo.envs.adapters.verifiers"):
        make(NAME, **{"args.kind": "noisy"}).close()
    assert sum("not identical starts" in r.getMessage() for r in caplog.records) == 1


def test_env_args_reach_load_environment_and_bad_ones_are_one_line():
    env = make(NAME, **{"args.top": 9, "args.max_turns": 5})
    assert "1 to 9" in env.reset(0)[0] and env.max_steps == 5
    with pytest.raises(ValueError, match=r"load_environment takes no colour; its arguments \(env.args.KEY\): kind"):
        make(NAME, **{"args.colour": 1})
    with pytest.raises(ValueError, match="has no option turns; its options: max_steps"):
        make(NAME, turns=2)


def test_unknown_module_is_exit_2_before_any_model(capsys, tmp_path):
    run_dir = tmp_path / "run"
    code = cli.main(["train", "env=verifiers:no_such_vf_module", f"train.run_dir={run_dir}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "no module named 'no_such_vf_module'" in err
    assert not run_dir.exists()


def test_a_raising_env_is_the_guards_fault_and_is_replaced():
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    # built lazily on the guard's runner thread (args not loaded before in this process): verifiers' constructor
    # installs signal handlers, which the adapter keeps from replacing gigpo's (and from failing off main thread)
    env = GuardedEnv(registered_factory(NAME, **{"args.kind": "raising", "args.rows": 5}), timeout_s=30,
                     name="verifiers")
    env.reset(0)  # row 0: the number is 1
    with pytest.raises(EnvFault) as fault:
        env.step("2")
    assert "the env's backend is down" in str(fault.value) and len(str(fault.value).splitlines()) == 1
    assert env.reset(1)[0].startswith("Guess my number")  # a fresh instance
    env.close()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_no_thread_is_left_behind():
    before = set(threading.enumerate())
    env = make(NAME)
    env.reset(0)
    env.step("2")  # its env_response goes through asyncio.to_thread
    env.close()
    assert set(threading.enumerate()) - before == set()


def test_two_iteration_train_and_eval(capsys, tmp_path):
    run = tmp_path / "run"
    code = cli.main(["train", f"env={NAME}", TINY, "rollout.groups=2", "rollout.group_size=2", "optim.micro_batch_size=8",
                     "optim.mini_batches=1", "optim.ppo_epochs=1", "train.eval_episodes=0", "train.progress=false",
                     "train.sample_trajectories=0", "train.iterations=2", "train.checkpoint_every=0",
                     "rollout.max_response_tokens=2", f"train.run_dir={run}"])
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in rows if "rollout/steps" in r][-1]
    assert last["rollout/failed_trajectories"] == 0 and 1 <= last["rollout/episode_length"] <= 3
    capsys.readouterr()
    out = tmp_path / "eval.json"
    assert cli.main(["eval", "--agent", "random", "--env", NAME, "--episodes", "8", "--output", str(out)]) == 0
    summary = json.loads(out.read_text())["summary"]
    assert summary["failed_trajectories"] == 0 and 0.0 <= summary["success_rate"] <= 1.0
