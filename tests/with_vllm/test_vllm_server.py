"""``rollout.engine=openai`` against a real vLLM server (CPU build) on 127.0.0.1.

One server for the module: dev mode (``/collective_rpc reload_weights``), runtime LoRA updates and
``--logprobs-mode processed_logprobs``. What is checked: greedy tokens and log-probs equal the hf engine's;
two training iterations with full-weight reloads and two with LoRA adapters, after each of which the server
answers a probe with the learner's log-probs; constrained decoding through ``structured_outputs.choice`` with
log-probs equal to the learner's renormalised ones.
"""

from __future__ import annotations

import json
import urllib.request

import numpy as np
import pytest
from vllm_servers import PROBE, SMALL, TINY, VLLMServer, assert_serves, learner_logprobs, save_tiny

from gigpo.models import load_model
from gigpo.rollout import HFEngine


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """Serves a tiny model with *other* weights (seed 99) than the learners' (seed 0): only pushes make the
    server's answers equal to a learner's."""
    d = tmp_path_factory.mktemp("vllm_server")
    srv = VLLMServer(save_tiny(d / "served", seed=99), d / "server.log", lora_rank=8).wait()
    yield srv
    srv.stop()


def engine_for(server, **kw):
    from gigpo.rollout.engines.openai import CompletionsEngine

    e = CompletionsEngine([server.url], "tiny", eos_ids=[2], **kw)
    e.probe()
    return e


def test_greedy_and_sampled_tokens_and_logprobs_equal_the_hf_engine(server, tmp_path):
    learner = load_model("tiny", device="cpu", seed=0, tiny=TINY)
    engine = engine_for(server, weights_dir=tmp_path / "w")
    assert engine.kinds == ["vllm"] and engine.sync_mode(0) == "full"
    before = engine.generate(PROBE, max_new_tokens=6, temperature=0.0)
    rec = engine.push_weights(learner.model, 0, required=True)
    assert rec["weights/version"] == 0
    hf = HFEngine(learner.model, learner.tokenizer, "cpu").generate(PROBE, max_new_tokens=6, temperature=0.0)
    got = engine.generate(PROBE, max_new_tokens=6, temperature=0.0)
    gap = max(float(np.max(np.abs(np.subtract(a.logprobs, b.logprobs)))) for a, b in zip(hf, got))
    assert [g.token_ids for g in got] == [h.token_ids for h in hf] and gap <= 1e-4
    # before the push the server held other weights: the comparison can fail
    assert max(float(np.max(np.abs(np.subtract(a.logprobs[:1], b.logprobs[:1])))) for a, b in zip(before, got)) > 1e-3
    sampled = engine.generate(PROBE * 4, max_new_tokens=6, temperature=1.0)  # processed log-probs at T = 1
    for g, w in zip(sampled, learner_logprobs(learner.model, PROBE * 4, [g.token_ids for g in sampled])):
        np.testing.assert_allclose(g.logprobs, w, atol=1e-4)
    assert len({tuple(g.token_ids) for g in sampled}) > 1
    engine.close()


def run_two_iterations(tmp_path, server, *extra):
    from gigpo.train.config import load_config
    from gigpo.train.trainer import Trainer

    tr = Trainer(load_config(None, SMALL + [f"train.run_dir={tmp_path}", "rollout.engine=openai",
                                           f"rollout.openai.urls={server.url}", "rollout.openai.model=tiny",
                                           *extra]))
    assert_serves(tr.engine, tr.model)  # the push before the first rollout
    recs, probes = [], []
    for it in (1, 2):
        recs.append(tr.iteration(it))
        probes.append(assert_serves(tr.engine, tr.model))  # after each update's push
    assert not np.allclose(probes[0][0].logprobs, probes[1][0].logprobs, atol=1e-4)  # the weights did change
    for it, rec in enumerate(recs, 1):
        assert rec["weights/version"] == it and rec["rollout/stale_generations"] == 0
        assert rec["rollout/logprob_gap_max"] < 1e-4  # what the learner trained on is what the server sampled
    tr.collector.close()
    return tr, recs


def test_two_iterations_with_full_weight_reloads(server, tmp_path):
    tr, recs = run_two_iterations(tmp_path, server, "rollout.openai.weight_sync=full")
    tr.engine.close()
    pushed = sorted(p.name for p in (tmp_path / "pushed_weights").iterdir())
    assert pushed == ["weights-v2"]  # only the newest push stays on disk


def served_models(server) -> list[str]:
    with urllib.request.urlopen(f"{server.url}/models", timeout=10) as r:
        return [m["id"] for m in json.loads(r.read())["data"]]


def test_two_iterations_with_lora_adapters(server, tmp_path):
    # the server's base must be the LoRA learner's base: the full tests above left other weights there
    base = load_model("tiny", device="cpu", seed=0, tiny=TINY)
    engine_for(server, weights_dir=tmp_path / "base").push_weights(base.model, 0, required=True)
    tr, recs = run_two_iterations(tmp_path / "run", server, "lora.enabled=true", "lora.r=4", "lora.alpha=8",
                                  "lora.dropout=0.0", "lora.target_modules=[q_proj,v_proj]")
    (name,) = tr.engine.request_model
    assert tr.engine.sync_mode(0) == "lora" and name.startswith("tiny-gigpo-") and name.endswith("-v2")
    assert sorted(served_models(server)) == ["tiny", name]  # the older versions' adapters were unloaded
    assert sorted(p.name for p in (tmp_path / "run" / "pushed_weights").iterdir()) == ["lora-v2"]
    tr.engine.close()
    assert served_models(server) == ["tiny"]  # and the run's last one at close


def test_constrained_decoding_through_structured_outputs(server, tmp_path):
    from gigpo.agent.constrained import ActionConstraint

    learner = load_model("tiny", device="cpu", seed=0, tiny=TINY)
    engine = engine_for(server, weights_dir=tmp_path / "w", tokenizer=learner.tokenizer,
                        model_config=learner.model.config)
    engine.push_weights(learner.model, 0, required=True)
    acts = ["go north", "take key", "look", "open door", "go"]  # "go" is a prefix of "go north"
    c = ActionConstraint(learner.tokenizer, acts, eos_ids=[2], slots=True)
    prompts = PROBE * 4
    # any tokenisation of an action may be sampled (one token per letter at worst): room for the longest + EOS
    gens = engine.generate(prompts, max_new_tokens=12, temperature=1.0, constraints=[c] * len(prompts))
    assert all(g.action in acts and g.text == g.action for g in gens), [(g.text, g.token_ids) for g in gens]
    assert all(g.token_ids[-1] == 2 and 2 in g.allowed[-1] for g in gens)  # a choice ends at its stop token
    # ... forced (log-prob 0) unless a longer action continues it ("go" -> "go north": EOS is one option)
    assert all((g.allowed[-1] == [2]) == (g.action != "go") for g in gens)
    assert all(g.logprobs[-1] == 0.0 for g in gens if g.action != "go")
    want = learner_logprobs(learner.model, prompts, [g.token_ids for g in gens], [g.allowed for g in gens])
    gap = max(float(np.max(np.abs(g.logprobs - w))) for g, w in zip(gens, want))
    assert gap <= 1e-4
    assert len({g.action for g in gens}) > 1  # sampled, not one forced answer
    # mixed: a free prompt in the same call is sampled unconstrained
    mixed = engine.generate(PROBE[:2], max_new_tokens=4, temperature=0.0, constraints=[c, None])
    assert mixed[0].action in acts and mixed[1].allowed is None and mixed[1].action is None
    engine.close()


def test_free_text_slots_are_a_clear_refusal(server, tmp_path):
    from gigpo.agent.constrained import ActionConstraint
    from gigpo.rollout.engines import EngineError

    learner = load_model("tiny", device="cpu", seed=0, tiny=TINY)
    engine = engine_for(server, tokenizer=learner.tokenizer, model_config=learner.model.config)
    c = ActionConstraint(learner.tokenizer, ["look", "search[<your query>]"], eos_ids=[2], slots=True)
    with pytest.raises(EngineError, match=r"free-text slot: .*needs rollout.engine=hf"):
        engine.generate(PROBE[:1], max_new_tokens=4, temperature=1.0, constraints=[c])
    engine.close()
