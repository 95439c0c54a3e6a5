"""rollout.async over a real `gigpo serve` on 127.0.0.1 (rollout.engine=openai): every batch is sampled by the
version the fixed lag names — the rows say so, the server reports it for every response, and the batch's
sampling log-probs are that version's and no other's; weight pushes happen only between batches; an
interrupted run resumes exactly (greedy: the server's sampling is not seeded); a server whose weights another
client changes mid-run stops the run with one clear error. (The refusal of rollout.engine=vllm:
test_async_math.py.)"""

from __future__ import annotations

import copy
import threading

import numpy as np
import pytest
import torch
from trainer_interrupt import interrupt_at

from gigpo.apiclient import ChatClient
from gigpo.models import load_model, save_pretrained
from gigpo.rollout.engines.openai import CompletionsEngine, RemoteEngineError
from gigpo.serve.server import make_server
from gigpo.train.async_rollout import AsyncRollout
from gigpo.train.config import load_config
from gigpo.train.reporting.metrics import read_metrics
from gigpo.train.rundir.checkpoint import list_checkpoints
from gigpo.train.trainer import Trainer

TINY = {"english_words": False, "hidden_size": 32, "intermediate_size": 64}
SMALL = [
    "model.tiny={english_words: false, hidden_size: 32, intermediate_size: 64}", "optim.lr_schedule=constant",
    "optim.lr=0.01", "env.size=3", "env.max_steps=3", "rollout.groups=2", "rollout.group_size=3",
    "rollout.max_response_tokens=3", "optim.micro_batch_size=8", "optim.mini_batches=2", "optim.ppo_epochs=1",
    "train.eval_episodes=0", "train.progress=false", "train.threads=1", "train.checkpoint_every=0",
    "rollout.engine=openai", "rollout.openai.model=tiny", "rollout.async=true", "optim.offpolicy_correction=tis",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`gigpo serve` on a tiny model of the learner's shape but other weights (seed 99): only pushes make it
    the learner's. Pushes land in each test's run dir, all under the session's temp root (--weights-dir)."""
    d = tmp_path_factory.mktemp("served")
    save_pretrained(load_model("tiny", device="cpu", seed=99, tiny=TINY), d / "model")
    srv = make_server(str(d / "model"), port=0, device="cpu", served_model_name="tiny", wait_ms=5.0,
                      weights_dir=tmp_path_factory.getbasetemp())
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.close()


def cfg_for(run_dir, server, *extra):
    return load_config(None, SMALL + [f"train.run_dir={run_dir}", f"rollout.openai.urls={server.url}", *extra])


def trace_requests(monkeypatch) -> list[tuple[str, int]]:
    """Every completion's reported ``weights_version`` and every reload's version, in order, from the server's
    answers (a spy on the real client: the server is real)."""
    events: list[tuple[str, int]] = []
    real = ChatClient.request_json

    def spy(self, method, path, payload=None, **kw):
        res = real(self, method, path, payload, **kw)
        if path == "/completions":
            events.append(("completion", res.data["weights_version"]))
        elif path == "/reload_weights":
            events.append(("reload", res.data["version"]))
        return res

    monkeypatch.setattr(ChatClient, "request_json", spy)
    return events


def response_logprobs(model, batch, row: int) -> np.ndarray:
    """Teacher-forced log-probs of ``row``'s response under ``model`` (temperature 1, top-p 1: the raw ones)."""
    prompt, resp = list(batch.prompt_ids[row]), list(batch.response_ids[row])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + resp])).logits[0].float()
    lp = torch.log_softmax(logits[len(prompt) - 1:-1], dim=-1)
    return lp[torch.arange(len(resp)), torch.tensor(resp)].numpy()


def test_each_batch_is_sampled_on_the_server_by_its_fixed_lag_version(tmp_path, server, monkeypatch):
    s, iterations = 1, 4
    events = trace_requests(monkeypatch)
    versions: dict[int, dict] = {}  # version -> the learner's weights (what the server must sample from)
    batches: dict[int, object] = {}
    real_after, real_next = AsyncRollout.after_update, AsyncRollout.next_batch

    def after_update(self, it, model):
        versions[it] = copy.deepcopy(model.state_dict())
        real_after(self, it, model)

    def next_batch(self, it):
        out = real_next(self, it)
        batches[it] = out.batch
        return out

    monkeypatch.setattr(AsyncRollout, "after_update", after_update)
    monkeypatch.setattr(AsyncRollout, "next_batch", next_batch)
    tr = Trainer(cfg_for(tmp_path / "run", server, f"rollout.max_staleness={s}", f"train.iterations={iterations}",
                         "train.eval_every=2", "train.eval_episodes=2"))
    versions[0] = copy.deepcopy(tr.model.state_dict())
    tr.train()
    recs = read_metrics(tmp_path / "run" / "metrics.jsonl")
    want = [max(0, k - 1 - s) for k in range(1, iterations + 1)]
    recs, evals = [r for r in recs if r["iteration"] > 0], recs
    assert [r["rollout/policy_version"] for r in recs] == want
    assert all(r[f"rollout/staleness_{min(k - 1, s)}"] == 1.0 for k, r in enumerate(recs, 1))
    for k, b in batches.items():
        assert len(b) > 0 and b.policy_version == [want[k - 1]] * len(b)  # every row carries its version
    # the pushes: start_engine's (0), then only those the schedule needs, between batches — v(3) = 1; the
    # evaluation after 2 pushes the learner's newest (2), which batch 4 then needs; the last evaluation's (4) —
    # never the per-update push of a synchronous run (1, 2, 3, 4 after each update)
    reloads = [v for kind, v in events if kind == "reload"]
    assert reloads == [0, 1, 2, 4] and "weights/version" in recs[2] and "weights/version" not in recs[1]
    assert [r["iteration"] for r in evals if "eval/success_rate" in r] == [0, 2, 4]
    held = None
    for kind, v in events:  # every response reports the version pushed last, i.e. its batch's
        if kind == "reload":
            held = v
        else:
            assert v == held
    assert sum(kind == "completion" for kind, _ in events) >= iterations
    # the server really sampled with version v(k)'s weights: its log-probs are v(k)'s, not the next version's
    probe = copy.deepcopy(tr.model).eval()
    for k, b in batches.items():
        v = want[k - 1]
        probe.load_state_dict(versions[v])
        got = np.asarray(b.sampling_logprobs[0])
        np.testing.assert_allclose(got, response_logprobs(probe, b, 0), atol=1e-4)
        probe.load_state_dict(versions[v + 1])
        assert not np.allclose(got, response_logprobs(probe, b, 0), atol=1e-4)  # the check can fail
    assert server.batcher.weights_version == iterations  # the final evaluation's: the learner's last weights


def _learning(path) -> list[dict]:
    """The learning metrics: no timings, no weights/* (a resumed run's first push is start_engine's, so its
    pushes fall on other iterations)."""
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "weights/"))} for r in read_metrics(path)]


@pytest.mark.slow
def test_an_interrupted_async_run_over_the_server_resumes_exactly(tmp_path, server, monkeypatch):
    extra = ("rollout.max_staleness=2", "train.iterations=5", "train.checkpoint_every=2", "rollout.temperature=0")
    Trainer(cfg_for(tmp_path / "full", server, *extra)).train()
    full = _learning(tmp_path / "full" / "metrics.jsonl")
    part = Trainer(cfg_for(tmp_path / "part", server, *extra))
    interrupt_at(monkeypatch, part, 3)
    with pytest.raises(KeyboardInterrupt):
        part.train()
    assert (list_checkpoints(tmp_path / "part")[0] / "async_batches.json").exists()
    monkeypatch.undo()
    Trainer.resume(tmp_path / "part").train()
    got = _learning(tmp_path / "part" / "metrics.jsonl")
    assert [r["rollout/policy_version"] for r in got] == [0, 0, 0, 1, 2]
    assert got == full


def test_a_server_whose_weights_another_client_changes_is_a_clear_error(tmp_path, server):
    learner = load_model("tiny", device="cpu", seed=3, tiny=TINY)
    engine = CompletionsEngine([server.url], "tiny", eos_ids=[0], weights_dir=tmp_path / "w")
    try:
        engine.probe()
        engine.push_weights(learner.model, 7, required=True)
        engine.pinned_version = 7
        assert engine.generate([[5, 6, 7]], max_new_tokens=2)[0].token_ids  # its own version: fine
        other = ChatClient(server.url)  # another client reloads the same file under another version
        other.request_json("POST", "/reload_weights", {"path": str(tmp_path / "w" / "weights-v7.safetensors"),
                                                       "version": 8})
        other.close()
        with pytest.raises(RemoteEngineError, match="version 8, but this batch is sampled by version 7"):
            engine.generate([[5, 6, 7]], max_new_tokens=2)
    finally:
        engine.close()

