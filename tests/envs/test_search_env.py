"""SearchEnv: the Env contract, Search-R1 protocol steps, turn limit, failures, per-source EM, oracle and baseline."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from gigpo.envs import make
from gigpo.envs.base import EnvError
from gigpo.envs.search import SearchEnv, summarize_by_source
from gigpo.envs.search.oracle import HopOracle, RetrieveThenAnswer, evaluate, run_episode
from gigpo.envs.search.protocol import INVALID_ACTION_MESSAGE, parse_information


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("search-cache")


@pytest.fixture(scope="module")
def env(cache: Path) -> SearchEnv:
    return SearchEnv(split="test", cache_dir=cache)


def test_registry_builds_the_env_and_it_takes_raw_responses(cache: Path) -> None:
    e = make("search", split="test", cache_dir=cache, data_sources="fict-single", topk=2, max_turns=3)
    assert isinstance(e, SearchEnv) and SearchEnv.raw_action is True
    assert e.max_steps == 3 and {q.data_source for q in e.questions} == {"fict-single"}
    assert "<search>" in e.instructions and "<answer>" in e.instructions
    with pytest.raises(ValueError, match="does not accept"):
        make("search", cache_dir=cache, nope=1)


def test_same_seed_same_episode_and_seeds_cover_questions(env: SearchEnv, cache: Path) -> None:
    other = SearchEnv(split="test", cache_dir=cache)
    assert other.retriever is env.retriever  # BM25 index shared across env instances
    for seed in (0, 5, 12345):
        obs_a, info_a = env.reset(seed)
        obs_b, info_b = other.reset(seed)
        assert obs_a == obs_b and info_a == info_b
        assert info_a["task"] == obs_a == env.record.question and info_a["state_key"] == obs_a
        assert info_a["admissible_actions"] is None and info_a["won"] is False
        step_a, step_b = env.step("<search>river</search>"), other.step("<search>river</search>")
        assert step_a == step_b
    n = len(env.questions)
    ids = set()
    for seed in range(n):
        env.reset(seed)
        ids.add(env.record.id)
    assert len(ids) == n  # consecutive seeds visit every question once
    env.reset(3)
    first = env.record.id
    env.reset(3 + n)
    assert env.record.id == first


def test_search_then_answer(env: SearchEnv) -> None:
    env.reset(7)
    rec = env.record
    subject = rec.metadata["subject"]
    obs, reward, done, info = env.step(f"<think>look it up</think><search>{subject}</search>")
    assert (reward, done, info["action_valid"]) == (0.0, False, True)
    assert obs.startswith("<information>Doc 1(Title: ") and obs.endswith("</information>")
    assert 1 <= len(parse_information(obs)) <= 3 and info["state_key"] == obs
    assert info["em"] == 0.0 and info["data_source"] == rec.data_source and info["turn"] == 1
    obs, reward, done, info = env.step(f"<answer>The {rec.golden_answers[0]}.</answer>")  # normalised EM
    assert (reward, done, info["won"], info["score"], info["em"], info["f1"]) == (1.0, True, True, 1.0, 1.0, 1.0)
    assert info["answer"] == f"The {rec.golden_answers[0]}." and info["golden_answers"] == list(rec.golden_answers)
    with pytest.raises(RuntimeError, match="reset"):
        env.step("<answer>x</answer>")
    env.reset(7)
    _, reward, done, info = env.step("<answer>definitely wrong words</answer>")
    assert (reward, done, info["won"], info["em"]) == (0.0, True, False, 0.0)


def test_invalid_steps_keep_state_and_turn_limit_ends(env: SearchEnv) -> None:
    question, _ = env.reset(11)
    for i, bad in enumerate(["no tags at all", "<search>a</search><answer>b</answer>", "<search> </search>"], 1):
        obs, reward, done, info = env.step(bad)
        assert obs == INVALID_ACTION_MESSAGE and reward == 0.0 and info["action_valid"] is False
        assert info["state_key"] == question and info["invalid_reason"] and not done and info["turn"] == i
    obs, reward, done, info = env.step("<search>river</search>")  # 4th turn: the last one
    assert obs.startswith("<information>") and done and reward == 0.0 and info["action_valid"]
    assert info["answer"] is None and info["won"] is False and info["golden_answers"]


def test_user_data_file_needs_a_corpus_and_filters_sources(tmp_path: Path, env: SearchEnv) -> None:
    rows = [{"question": "Which river flows through Zzq?", "golden_answers": ["Nile"], "data_source": s}
            for s in ("nq", "hotpotqa", "nq")]
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ValueError, match="corpus_file or retriever_url"):
        SearchEnv(data_file=path)
    mine = SearchEnv(data_file=path, corpus_file=env.retriever.corpus_file, data_sources=["nq"])
    assert [q.data_source for q in mine.questions] == ["nq", "nq"]
    with pytest.raises(ValueError, match="unknown data source"):
        SearchEnv(data_sources=["nq"], cache_dir=tmp_path)
    with pytest.raises(ValueError, match="not both"):
        SearchEnv(corpus_file=path, retriever_url="http://127.0.0.1:1")


def test_retrieval_failure_raises_env_error(cache: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    e = SearchEnv(split="test", cache_dir=cache, retriever_url=f"http://127.0.0.1:{port}", retriever_retries=1,
                  retriever_backoff=0.0, retriever_timeout=1.0)
    e.reset(0)
    with pytest.raises(EnvError, match="failed after 2 attempt"):
        e.step("<search>anything</search>")
    with pytest.raises(RuntimeError, match="reset"):  # the trajectory is over
        e.step("<answer>x</answer>")


def test_oracle_solves_both_sources_and_baseline_is_weaker(env: SearchEnv) -> None:
    seeds = range(0, len(env.questions), 5)  # 400 of the 2,000 test questions, both sources interleaved
    oracle = evaluate(env, HopOracle(), seeds)
    summary = summarize_by_source(oracle)
    assert set(summary) == {"fict-single", "fict-multihop", "all"}
    assert summary["fict-single"]["em"] >= 0.9 and summary["fict-multihop"]["em"] >= 0.9
    assert all(r["invalid"] == 0 for r in oracle)
    assert max(r["turns"] for r in oracle if r["data_source"] == "fict-multihop") >= 3  # it really hops
    base = summarize_by_source(evaluate(env, RetrieveThenAnswer(), seeds))
    assert base["fict-single"]["em"] < summary["fict-single"]["em"]
    assert base["fict-multihop"]["em"] < 0.5 * summary["fict-multihop"]["em"]


def test_oracle_needs_a_hop_plan(tmp_path: Path, env: SearchEnv) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question": "q?", "golden_answers": ["a"], "data_source": "nq"}) + "\n")
    mine = SearchEnv(data_file=path, corpus_file=env.retriever.corpus_file)
    with pytest.raises(ValueError, match="hop plan"):
        run_episode(mine, HopOracle(), 0)
