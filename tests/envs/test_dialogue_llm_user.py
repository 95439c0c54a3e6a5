"""The LLM user (`env.user=openai:MODEL`): `gigpo serve` with the tiny model plays the user on loopback; a user
LLM that is unreachable, errors or says nothing fails cleanly."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from gigpo.envs import make
from gigpo.envs.base import EnvError
from gigpo.envs.guard import EnvFault, EnvGuard, registered_factory

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))
from serve_fakeapi import FakeAPI  # noqa: E402  (the project's scripted failure-injection server)


@pytest.fixture(scope="module")
def tiny_user_server():
    from gigpo.serve import make_server

    before = torch.get_num_threads()
    torch.set_num_threads(1)  # a spinning thread pool would stall the shared 2-core box
    srv = make_server("tiny", port=0, served_model_name="tiny-user", wait_ms=5.0, max_batch=8)
    th = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    th.start()
    yield srv
    srv.close()
    th.join(timeout=5)
    torch.set_num_threads(before)


def test_served_tiny_model_plays_the_user_and_the_env_judges(tiny_user_server):
    llm = make("dialogue-booking", user="openai:tiny-user", user_base_url=tiny_user_server.url,
               user_temperature=0.0)  # greedy: the random-init model then fits its context on every turn
    rules = make("dialogue-booking")
    obs, info = llm.reset(1)
    rules_obs, _ = rules.reset(1)
    assert info["user"] == "openai:tiny-user" and obs and obs != rules_obs
    done = False
    while not done:
        action = llm.oracle_action()
        obs, reward, done, info = llm.step(action)
        rules.step(action)
        assert isinstance(obs, str) and obs  # the random-init model's words, whatever they are
        assert info["state_key"] == rules._state_key()  # the facts are the env's, not the LLM's
    # Success is judged from the goal: the oracle's booking meets it although the "user" spoke gibberish.
    assert info["won"] and info["booked"]
    llm.close()


def test_unreachable_user_llm_is_one_clear_error():
    with FakeAPI() as api:
        url = api.url
    with pytest.raises(ValueError) as err:
        make("dialogue-guess", user="openai:m", user_base_url=url)
    msg = str(err.value)
    assert "user_base_url" in msg and "cannot reach" in msg and "\n" not in msg


def test_empty_or_failing_user_reply_fails_the_trajectory():
    # Reply 0 (the opening) and 1 are fine; then the user LLM says nothing.
    with FakeAPI(reply=lambda m: "sure" if len(m) <= 4 else "") as api:
        env = make("dialogue-guess", user="openai:fake-model", user_base_url=api.url)
        env.reset(0)
        env.step("what kind of animal?")
        with pytest.raises(EnvError, match="empty reply"):
            env.step("where does it live?")
    # Server errors after retries: through the env guard the trajectory's step becomes a fault, not a crash.
    with FakeAPI(fault=lambda n, body: ("status", 500) if n >= 1 else None) as api:
        guard = EnvGuard(registered_factory("dialogue-booking", user="openai:fake-model", user_base_url=api.url,
                                            user_retries=1), timeout_s=30)
        h = guard.new()
        assert not isinstance(guard.call_many([(h, "reset", 0)])[0], EnvFault)
        (fault,) = guard.call_many([(h, "step", "how many people?")])
        assert isinstance(fault, EnvFault) and fault.method == "step" and "HTTP 500" in fault.message
        guard.close()


def test_persona_holds_the_goal():
    with FakeAPI(reply=lambda m: "ok") as api:
        env = make("dialogue-booking", user="openai:fake-model", user_base_url=api.url)
        env.reset(2)
        env.step("what day?")
        system = api.bodies[-1]["messages"][0]
        assert system["role"] == "system" and str(env.goal["day"]) in system["content"]
        assert "what day?" in api.bodies[-1]["messages"][-1]["content"]
