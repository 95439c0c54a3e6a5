"""API evaluation against a scripted loopback server: retries with backoff, failed-episode accounting, resume,
and clear errors before any episode for an unreachable URL or a missing/rejected key."""

from __future__ import annotations

import json
import socket

import pytest
from serve_fakeapi import FakeAPI

from gigpo.envs import make
from gigpo.serve import APIError, ChatClient, OpenAIEngine, eval_api_main, run_api_evaluation
from gigpo.serve.evaluate_api import load_results
from gigpo.train.compose import eval_seeds
from gigpo.train.config import ConfigError, load_config

SHORT = ["env.max_steps=3"]


def _visited(seed: int, steps: int = 3) -> list[str]:
    """Observations an always-"up" agent sees in gridgoal (quickstart options, max_steps=3) from ``seed``."""
    from gigpo.train.config import load_config

    env = make("gridgoal", **{**load_config().env.options, "max_steps": steps})
    obs, _ = env.reset(seed)
    seen = [obs]
    for _ in range(steps - 1):
        obs, _, done, _ = env.step("up")
        if done:
            break
        seen.append(obs)
    return seen


def _user(body: dict) -> str:
    return body["messages"][-1]["content"]


def test_retries_on_5xx_429_and_timeouts_with_seeded_exponential_backoff():
    script = {0: ("status", 500), 1: ("status", 429), 2: ("status", 503), 3: ("stall", 0.5)}
    with FakeAPI(fault=lambda n, b: script.get(n)) as api:
        delays: list[float] = []
        client = ChatClient(api.url, timeout=0.2, max_retries=4, backoff_base=0.01, seed=5, sleep=delays.append)
        engine = OpenAIEngine(client, "fake-model")
        gens = engine.generate([[{"role": "user", "content": "hi"}]], max_new_tokens=4, temperature=0.0, top_p=1.0)
        client.close()
    assert gens[0].text == "up"
    assert engine.usage.retries == 4 and engine.usage.requests == 1 and engine.usage.prompt_tokens == 10
    assert len(api.bodies) == 5 and api.bodies[0]["temperature"] == 0.0 and api.bodies[0]["max_tokens"] == 4
    # delay_k = 0.01 * 2^k * (0.5 + U_k), U_k from random.Random(5): exponential, jittered, reproducible
    import random

    rng = random.Random(5)
    assert delays == pytest.approx([0.01 * 2**k * (0.5 + rng.random()) for k in range(4)])


def test_non_retryable_status_fails_at_once():
    with FakeAPI(fault=lambda n, b: ("status", 400)) as api:
        client = ChatClient(api.url, max_retries=5, sleep=lambda s: None)
        with pytest.raises(APIError, match="HTTP 400") as e:
            OpenAIEngine(client, "m").generate([[{"role": "user", "content": "x"}]], max_new_tokens=1,
                                               temperature=0, top_p=1)
        client.close()
    assert e.value.status == 400 and len(api.bodies) == 1


def test_failing_episodes_are_recorded_and_the_rest_continue(tmp_path, capsys):
    seeds = eval_seeds(0, 6)
    bad500, stalled = _visited(seeds[1])[0], _visited(seeds[4])[0]

    def fault(n, body):
        if bad500 in _user(body):
            return ("status", 500)
        if stalled in _user(body):
            return ("stall", 0.6)
        return None

    expect_failed = {s for s in seeds if bad500 in _visited(s) or stalled in _visited(s)}
    with FakeAPI(fault=fault) as api:
        rc = eval_api_main(["--agent", "openai:fake-model", "--base-url", api.url, "--episodes", "6",
                            "--concurrency", "3", "--output", str(tmp_path), "--timeout", "0.2",
                            "--max-retries", "2", *SHORT])
    out = capsys.readouterr()
    assert rc == 1
    results = load_results(tmp_path)
    assert set(results) == set(seeds)
    failed = {s for s, r in results.items() if r.failed}
    assert failed == expect_failed and {seeds[1], seeds[4]} <= failed
    assert "HTTP 500" in results[seeds[1]].error and "gave up after 3 attempts" in results[seeds[1]].error
    assert "timed out" in results[seeds[4]].error
    assert results[seeds[1]].usage["failed_requests"] == 1 and results[seeds[1]].usage["retries"] == 2
    ok = [r for r in results.values() if not r.failed]
    assert ok and all(r.length >= 1 and r.usage["requests"] == r.length for r in ok)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["failed"] == len(expect_failed) and summary["episodes"] == 6
    assert f"| failed | {len(expect_failed)} |" in out.out and "usage/retries" in out.out
    assert f"{len(expect_failed)} of 6 episodes failed" in out.err
    assert len(list((tmp_path / "trajectories").iterdir())) == 6


def test_resume_skips_finished_seeds_and_reruns_failed_ones(tmp_path):
    cfg = load_config(None, SHORT)
    seeds = eval_seeds(0, 5)
    poison = _visited(seeds[0])[0]
    broken = True
    with FakeAPI(fault=lambda n, b: ("status", 500) if broken and poison in _user(b) else None) as api:
        client = ChatClient(api.url, max_retries=1, backoff_base=0.001)
        s1, r1 = run_api_evaluation(cfg, client, "fake-model", episodes=3, concurrency=2, output_dir=tmp_path)
        first = len(api.bodies)
        failed1 = {r.seed for r in r1 if r.failed}
        assert seeds[0] in failed1 and s1["failed"] == len(failed1)
        broken = False
        s2, r2 = run_api_evaluation(cfg, client, "fake-model", episodes=5, concurrency=2, output_dir=tmp_path)
        client.close()
    # Only the failed seeds and the two new ones were run again: count their requests exactly.
    rerun = failed1 | set(seeds[3:])
    assert len(api.bodies) - first == sum(r.usage["requests"] for r in r2 if r.seed in rerun)
    assert [r.seed for r in r2] == seeds and s2["failed"] == 0 and s2["episodes"] == 5
    kept = [a for a in r1 if not a.failed]
    assert all(next(b for b in r2 if b.seed == a.seed) == a for a in kept)
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 3 + len(rerun) - len(failed1 & set(seeds[3:]))
    # Another configuration must not be mixed into the same results.
    other = load_config(None, ["env.max_steps=4"])
    with pytest.raises(ConfigError, match="different evaluation"):
        run_api_evaluation(other, ChatClient(api.url), "fake-model", episodes=1, concurrency=1, output_dir=tmp_path)
    concat = load_config(None, ["rollout.mode=concat", "rollout.concat.max_tokens=512", "algorithm=grpo"])
    with pytest.raises(ConfigError, match="rollout.mode=step"):
        run_api_evaluation(concat, ChatClient(api.url), "fake-model", episodes=1, concurrency=1,
                           output_dir=tmp_path / "concat")


def test_an_output_folder_of_an_older_gigpo_resumes_and_holds_no_engine_keys(tmp_path):
    """The identity names the rollout keys that shape episodes: a folder written before the rollout split (every
    flat rollout key, an API key among them) resumes, and a new one records no URL or key."""
    from gigpo.serve.evaluate_api import IDENTITY_ROLLOUT_KEYS

    cfg = load_config(None, SHORT)
    with FakeAPI() as api:
        client = ChatClient(api.url)
        run_api_evaluation(cfg, client, "fake-model", episodes=1, concurrency=1, output_dir=tmp_path)
        meta = next(p for p in tmp_path.iterdir() if p.suffix == ".json" and "identity" in p.read_text())
        data = json.loads(meta.read_text())
        assert set(data["identity"]["rollout"]) == set(IDENTITY_ROLLOUT_KEYS)
        old_rollout = {**data["identity"]["rollout"], "groups": 8, "temperature": 1.0, "engine_urls": "",
                       "engine_api_key": "s3cret", "max_context_tokens": 0, "dynamic_sampling": False}
        meta.write_text(json.dumps({**data, "identity": {**data["identity"], "rollout": old_rollout}}))
        _, results = run_api_evaluation(cfg, client, "fake-model", episodes=2, concurrency=1, output_dir=tmp_path)
        client.close()
    assert len(results) == 2 and not any(r.failed for r in results)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_url_fails_before_any_episode(tmp_path, capsys):
    out = tmp_path / "out"
    rc = eval_api_main(["--agent", "openai:m", "--base-url", f"http://127.0.0.1:{_free_port()}/v1",
                        "--episodes", "3", "--output", str(out)])
    assert rc == 2 and "cannot reach the API" in capsys.readouterr().err
    assert not out.exists()


def test_missing_or_rejected_key_fails_before_any_episode(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GIGPO_TEST_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeAPI(api_key="sk-right") as api:
        args = ["--agent", "openai:fake-model", "--base-url", api.url, "--episodes", "2", "--output", str(tmp_path)]
        assert eval_api_main([*args, "--api-key-env", "GIGPO_TEST_KEY"]) == 2
        assert "GIGPO_TEST_KEY is not set" in capsys.readouterr().err
        assert eval_api_main(args) == 2  # no key at all: the server's 401 is explained
        err = capsys.readouterr().err
        assert "HTTP 401" in err and "set OPENAI_API_KEY" in err
        monkeypatch.setenv("GIGPO_TEST_KEY", "sk-wrong")
        assert eval_api_main([*args, "--api-key-env", "GIGPO_TEST_KEY"]) == 2
        assert "check the API key" in capsys.readouterr().err
        assert api.bodies == [] and not (tmp_path / "results.jsonl").exists()
        monkeypatch.setenv("GIGPO_TEST_KEY", "sk-right")
        assert eval_api_main([*args, "--api-key-env", "GIGPO_TEST_KEY", *SHORT]) == 0
    assert len(load_results(tmp_path)) == 2


def test_server_without_models_route_is_probed_with_a_tiny_request(tmp_path, capsys):
    with FakeAPI(models=False) as api:
        rc = eval_api_main(["--agent", "openai:fake-model", "--base-url", api.url, "--episodes", "1",
                            "--output", str(tmp_path), *SHORT])
    assert rc == 0 and api.bodies[0]["max_tokens"] == 1 and "1-token request" in capsys.readouterr().err
