"""The openai engine's parsing of completions bodies (vLLM's and gigpo serve's spellings) and its bad-input
errors: missing token ids, mismatched log-probs, an unreachable URL (before any model loads)."""

from __future__ import annotations

import dataclasses
import socket

import pytest

from gigpo.rollout.engines.openai import CompletionsEngine, RemoteEngineError, parse_completions


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_vllm_and_gigpo_spellings_of_token_ids():
    vllm = {"choices": [  # return_tokens_as_token_ids, out of order (OpenAI orders by index, not position)
        {"index": 1, "text": "b", "logprobs": {"tokens": ["token_id:9"], "token_logprobs": [-0.5]}},
        {"index": 0, "text": "a!", "logprobs": {"tokens": ["token_id:4", "token_id:2"], "token_logprobs": [-1, -2.5]}},
    ]}
    a, b = parse_completions(vllm, 2, "s")
    assert (a.token_ids, a.logprobs, a.text, b.token_ids) == ([4, 2], [-1.0, -2.5], "a!", [9])
    ours = {"choices": [{"index": 0, "text": "x", "token_ids": [7, 8],
                         "logprobs": {"tokens": ["x", ""], "token_logprobs": [-0.1, -0.2]}}]}
    assert parse_completions(ours, 1, "s")[0].token_ids == [7, 8]


@pytest.mark.parametrize("body, words", [
    ({"choices": [{"index": 0, "text": "hi", "logprobs": {"tokens": ["hi"], "token_logprobs": [-1]}}]},
     "no token ids"),
    ({"choices": [{"index": 0, "text": "hi", "token_ids": [1, 2], "logprobs": {"token_logprobs": [-1]}}]},
     "2 token ids but log-probs"),
    ({"choices": [{"index": 0, "text": "hi", "token_ids": [1], "logprobs": None}]}, "log-probs None"),
    ({"choices": []}, "0 choices for 1 prompts"),
    ({"error": "x"}, "without choices"),
])
def test_malformed_answers_are_clear_errors(body, words):
    with pytest.raises(RemoteEngineError, match=words):
        parse_completions(body, 1, "server")


def test_unreachable_url_fails_before_the_first_rollout(tmp_path, capsys):
    from gigpo.cli import main as cli_main

    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(RemoteEngineError, match="not reachable"):
        CompletionsEngine([url], "m", eos_ids=[0], max_retries=0).probe()
    with pytest.raises(RemoteEngineError, match="constrained decoding"):
        CompletionsEngine([url], "m", eos_ids=[0]).generate([[1]], max_new_tokens=1, constraints=[object()])
    run = tmp_path / "run"
    code = cli_main(["train", "rollout.engine=openai", f"rollout.openai.urls={url}", f"train.run_dir={run}",
                     "train.iterations=1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "rollout.openai.urls" in err[0] and url in err[0]
    assert not run.exists()  # refused before the run directory or the model


@pytest.mark.parametrize("overrides, words", [
    (["rollout.engine=openai"], "needs rollout.openai.urls"),
    (["rollout.engine=openai", "rollout.openai.urls=ftp://x"], "is not an http"),
    (["rollout.openai.urls=http://h:1/v1"], "rollout.engine='hf'"),
    (["rollout.max_staleness=-1"], "max_staleness"),
    (["rollout.ray.num_actors=2"], "applies to rollout.env_workers=ray"),
])
def test_config_mistakes_are_one_line(overrides, words):
    from gigpo.train.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=words):
        load_config(None, overrides)


def test_remote_engines_need_one_learner_process(monkeypatch):
    from gigpo.train.config import ConfigError, load_config

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="one learner process"):
        load_config(None, ["rollout.engine=openai", "rollout.openai.urls=http://h:1/v1", "train.rollout_shards=2",
                           "rollout.groups=2"])


def test_the_trainer_drives_any_registered_engine_through_the_contract(tmp_path, monkeypatch):
    """The trainer builds rollout.engine from the registry and calls probe, push_weights (required before the
    first rollout, then once per update with the iteration as version), stats and close — the same calls for
    every engine, so a new engine is a class plus a registry line."""
    from gigpo.rollout import HFEngine
    from gigpo.rollout.engines import ENGINES, Engine, engine_class
    from gigpo.train.config import load_config
    from gigpo.train.trainer import Trainer

    calls: list[tuple] = []

    class Recording(HFEngine):
        shares_learner_weights = False  # as a remote engine: the trainer computes the log-prob gap too

        def probe(self):
            calls.append(("probe",))

        def push_weights(self, model, version, *, required=False):
            calls.append(("push", version, required))
            return {"weights/version": float(version)}

        def stats(self):
            return {"rollout/recorded_calls": float(len(calls))}

        def close(self):
            calls.append(("close",))

    assert {"hf", "openai", "vllm"} <= set(ENGINES) and engine_class("hf") is HFEngine
    with pytest.raises(ValueError, match=f"unknown rollout.engine 'nope'; registered: {', '.join(ENGINES)}$"):
        engine_class("nope")
    monkeypatch.setitem(ENGINES, "hf", dataclasses.replace(ENGINES["hf"], cls=Recording))
    cfg = load_config(None, ["model.tiny={english_words: false, hidden_size: 32, intermediate_size: 64}",
                             "env.size=3", "env.max_steps=3", "rollout.groups=2", "rollout.group_size=2",
                             "train.iterations=2", "train.eval_episodes=0", "train.progress=false",
                             "train.checkpoint_every=0", f"train.run_dir={tmp_path}"])
    tr = Trainer(cfg)
    assert isinstance(tr.engine, Recording) and isinstance(tr.engine, Engine)
    last = tr.train()
    assert calls == [("probe",), ("push", 0, True), ("push", 1, False), ("push", 2, False), ("close",)]
    assert last["weights/version"] == 2.0 and last["rollout/recorded_calls"] == 3.0
    assert "rollout/logprob_gap_max" in last  # the trainer prepared old log-probs for a non-shared engine


def test_auth_and_weight_sync_modes_against_gigpo_serve(tmp_path, monkeypatch):
    """The key (rollout.openai.api_key, else GIGPO_API_KEY) goes out on generation and pushes alike; a missing
    key is one line naming both; weight_sync=lora against gigpo serve (full weights only) is one line."""
    import threading

    from gigpo.models import load_model, save_pretrained
    from gigpo.rollout.engines.openai import api_key_of
    from gigpo.serve.server import make_server
    from gigpo.train.config import load_config

    tiny = {"english_words": False, "hidden_size": 32, "intermediate_size": 64}
    bundle = load_model("tiny", device="cpu", seed=3, tiny=tiny)
    save_pretrained(bundle, tmp_path / "m")
    srv = make_server(str(tmp_path / "m"), port=0, device="cpu", served_model_name="m", api_key="s3cret",
                      weights_dir=tmp_path)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with pytest.raises(RemoteEngineError, match="refused the API key .*rollout.openai.api_key or GIGPO_API_KEY"):
            CompletionsEngine([srv.url], "m", eos_ids=[0], max_retries=0).probe()
        monkeypatch.setenv("GIGPO_API_KEY", "s3cret")
        cfg = load_config(None, ["rollout.engine=openai", f"rollout.openai.urls={srv.url}"])
        assert api_key_of(cfg) == "s3cret"  # the variable when the key is unset
        engine = CompletionsEngine([srv.url], "m", eos_ids=[0], api_key=api_key_of(cfg), weights_dir=tmp_path / "w")
        engine.probe()
        assert engine.kinds == ["gigpo"] and engine.sync_mode(0) == "full"
        assert engine.push_weights(bundle.model, 4, required=True)["weights/version"] == 4.0  # authorised push
        assert engine.generate([[5, 6, 7]], max_new_tokens=2, temperature=0.0)[0].token_ids
        assert srv.batcher.weights_version == 4
        lora = CompletionsEngine([srv.url], "m", eos_ids=[0], api_key="s3cret", weight_sync="lora", lora=True)
        with pytest.raises(RemoteEngineError, match="gigpo serve, which loads full weights only"):
            lora.probe()
        constrained = CompletionsEngine([srv.url], "m", eos_ids=[0], api_key="s3cret", constrained=True)
        with pytest.raises(RemoteEngineError, match="is gigpo serve: rollout.decoding=constrained .*needs vLLM"):
            constrained.probe()  # before any model loads (the preflight) rather than at the first rollout
        for e in (engine, lora, constrained):
            e.close()
    finally:
        srv.close()


def test_the_config_accepts_exactly_the_registered_engines():
    """rollout.engine is checked against the registry (no list of names elsewhere): every registered name
    loads, any other is one line naming them; each engine's options are its rollout.<section>."""
    from gigpo.rollout.engines import ENGINES
    from gigpo.train.config import ConfigError, load_config
    from gigpo.train.config.help import describe

    with pytest.raises(ConfigError, match="^rollout.engine: 'nope' is not one of " + ", ".join(map(repr, ENGINES))):
        load_config(None, ["rollout.engine=nope"])
    help_text = describe()
    for spec in ENGINES.values():
        assert f"\n  {spec.name:{max(map(len, ENGINES))}s}  {spec.description}" in help_text, spec.name
        for f in dataclasses.fields(spec.options):
            assert f"  rollout.{spec.section}.{f.name} = " in help_text
