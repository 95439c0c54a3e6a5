"""``rollout.engine=vllm``: an in-process ``vllm.LLM`` (vLLM's default multi-process executor, CPU build) as the
trainer's engine. One engine for the module (one Trainer): greedy tokens and log-probs equal the hf engine's; two
training iterations, after each of which the engine holds the learner's weights (``collective_rpc``
``reload_weights``: strings only cross to vLLM's engine process, no insecure serialization); constrained
decoding with log-probs equal to the learner's renormalised ones."""

from __future__ import annotations

import os

import numpy as np
import pytest
from vllm_servers import PROBE, SMALL, assert_serves, learner_logprobs

from gigpo.rollout import HFEngine


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    from gigpo.train.config import load_config
    from gigpo.train.trainer import Trainer

    d = tmp_path_factory.mktemp("inprocess")
    os.environ["GIGPO_VLLM_CACHE"] = str(d / "vllm-cache")  # the engine's stable model directory
    assert "VLLM_ALLOW_INSECURE_SERIALIZATION" not in os.environ
    tr = Trainer(load_config(None, SMALL + [f"train.run_dir={d / 'run'}", "rollout.engine=vllm",
                                           "rollout.vllm.enforce_eager=true"]))
    yield tr
    tr.collector.close()
    tr.engine.close()


def test_greedy_tokens_and_logprobs_equal_the_hf_engine(trainer):
    from gigpo.rollout.engines.vllm import VLLMEngine

    assert isinstance(trainer.engine, VLLMEngine) and trainer.engine.model_dir.parent.name == "vllm-cache"
    hf = HFEngine(trainer.model, trainer.tok, "cpu").generate(PROBE, max_new_tokens=6, temperature=0.0)
    got = trainer.engine.generate(PROBE, max_new_tokens=6, temperature=0.0)
    assert [g.token_ids for g in got] == [h.token_ids for h in hf]
    assert max(float(np.max(np.abs(np.subtract(a.logprobs, b.logprobs)))) for a, b in zip(hf, got)) <= 1e-4
    sampled = trainer.engine.generate(PROBE * 3, max_new_tokens=6, temperature=1.0)
    for g, w in zip(sampled, learner_logprobs(trainer.model, PROBE * 3, [g.token_ids for g in sampled])):
        np.testing.assert_allclose(g.logprobs, w, atol=1e-4)


def test_two_iterations_keep_the_engine_on_the_learners_weights(trainer):
    probes, recs = [], []
    for it in (1, 2):
        recs.append(trainer.iteration(it))
        probes.append(assert_serves(trainer.engine, trainer.model))
    assert not np.allclose(probes[0][0].logprobs, probes[1][0].logprobs, atol=1e-4)  # the weights did change
    for it, rec in enumerate(recs, 1):
        assert rec["weights/version"] == it and rec["rollout/logprob_gap_max"] < 1e-4
    pushes = os.listdir(trainer.engine._pushes.name)
    assert pushes == ["weights-v2"]  # only the newest push stays on disk


def test_constrained_decoding_in_process(trainer):
    from gigpo.agent.constrained import ActionConstraint

    acts = ["go north", "take key", "look", "open door"]
    c = ActionConstraint(trainer.tok, acts, eos_ids=[2], slots=True)
    prompts = PROBE * 3
    gens = trainer.engine.generate(prompts, max_new_tokens=12, temperature=1.0, constraints=[c] * len(prompts))
    assert all(g.action in acts and g.token_ids[-1] == 2 and g.allowed[-1] == [2] for g in gens)
    want = learner_logprobs(trainer.model, prompts, [g.token_ids for g in gens], [g.allowed for g in gens])
    assert max(float(np.max(np.abs(g.logprobs - w))) for g, w in zip(gens, want)) <= 1e-4
