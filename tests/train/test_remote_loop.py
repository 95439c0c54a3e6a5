"""A learner + `gigpo serve` loop on 127.0.0.1 (rollout.engine=openai): what the server samples equals what the
in-process hf engine samples, and after every update the server holds the learner's weights."""

import threading

import numpy as np
import pytest

from gigpo.models import load_model, save_pretrained
from gigpo.rollout import HFEngine
from gigpo.rollout.engines.openai import CompletionsEngine
from gigpo.serve.server import make_server
from gigpo.train.config import load_config
from gigpo.train.trainer import Trainer

TINY = "{english_words: false, hidden_size: 32, intermediate_size: 64}"
SMALL = [
    f"model.tiny={TINY}", "optim.lr_schedule=constant", "optim.lr=0.01", "env.size=3", "env.max_steps=3",
    "rollout.groups=2", "rollout.group_size=3", "rollout.temperature=0", "rollout.max_response_tokens=3",
    "optim.micro_batch_size=8", "optim.mini_batches=2", "optim.ppo_epochs=1",
    "train.eval_episodes=0", "train.progress=false", "train.iterations=2", "train.checkpoint_every=0",
]
PROBE = [5, 17, 42, 7, 99, 3, 12]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`gigpo serve` on a tiny model of the learner's shape but other weights (seed 99): only pushes make it
    equal to the learner."""
    d = tmp_path_factory.mktemp("served")
    save_pretrained(load_model("tiny", device="cpu", seed=99, tiny=eval_tiny()), d / "model")
    # pushes land in each test's run dir: all under the session's temp root, the server's --weights-dir
    srv = make_server(str(d / "model"), port=0, device="cpu", served_model_name="tiny", wait_ms=20.0,
                      weights_dir=tmp_path_factory.getbasetemp())
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.close()


def eval_tiny() -> dict:
    import yaml

    return yaml.safe_load(TINY)


def probe(engine) -> tuple[list[int], list[float]]:
    g = engine.generate([PROBE], max_new_tokens=8, temperature=0.0)[0]
    return g.token_ids, g.logprobs


def run(tmp_path, *extra):
    """Two iterations; per iteration the batch's sampled tokens and log-probs and a greedy probe of the
    learner's model after the update, plus the same probe answered by the rollout engine."""
    tr = Trainer(load_config(None, SMALL + [f"train.run_dir={tmp_path}", *extra]))
    learner = HFEngine(tr.model, tr.tok, tr.device)
    batches, probes, recs = [], [], []
    collect = tr.collector.collect

    def recording(*a, **k):
        b = collect(*a, **k)
        batches.append(([list(x) for x in b.response_ids], [list(x) for x in b.sampling_logprobs]))
        return b

    tr.collector.collect = recording
    for it in (1, 2):
        recs.append(tr.iteration(it))
        probes.append((probe(learner), probe(tr.engine)))
    return batches, probes, recs, tr


@pytest.mark.slow
def test_openai_engine_loop_equals_hf_and_tracks_learner_weights(tmp_path, server):
    remote_engine = CompletionsEngine([server.url], "tiny", eos_ids=[0])
    served_before = probe(remote_engine)
    hf_batches, hf_probes, _, _ = run(tmp_path / "hf")
    batches, probes, recs, tr = run(tmp_path / "openai", "rollout.engine=openai", f"rollout.openai.urls={server.url}",
                                    "rollout.openai.model=tiny")
    # the server's own weights (seed 99) answer differently from the learner's initial ones: the probe can fail
    assert not np.allclose(served_before[1], hf_probes[0][0][1][:len(served_before[1])], atol=1e-3)
    for (ids_a, lps_a), (ids_b, lps_b) in zip(hf_batches, batches, strict=True):
        assert ids_a == ids_b  # greedy: identical tokens
        for a, b in zip(lps_a, lps_b, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-5)
    for (learner, served), (hf_learner, _) in zip(probes, hf_probes, strict=True):
        assert learner[0] == served[0]
        np.testing.assert_allclose(learner[1], served[1], atol=1e-5)  # the server holds the updated weights
        np.testing.assert_allclose(learner[1], hf_learner[1], atol=1e-5)  # and training went the same way
    assert probes[0][0][1] != probes[1][0][1]  # the weights did change between the iterations
    for it, rec in enumerate(recs, 1):
        assert rec["weights/version"] == it and rec["rollout/stale_generations"] == 0
        assert rec["rollout/logprob_gap_max"] < 1e-4
    assert server.batcher.weights_version == 2
    assert len(list((tmp_path / "openai" / "pushed_weights").glob("*.safetensors"))) == 1  # only the newest
    tr.collector.close()


def serve_tiny(tmp_path, seed=99):
    save_pretrained(load_model("tiny", device="cpu", seed=seed, tiny=eval_tiny()), tmp_path / "served")
    srv = make_server(str(tmp_path / "served"), port=0, device="cpu", served_model_name="tiny", weights_dir=tmp_path)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_a_server_that_dies_mid_run_is_retried_then_a_clear_error_and_the_checkpoint_is_intact(tmp_path):
    from gigpo.rollout.engines.openai import RemoteEngineError
    from gigpo.train.rundir.checkpoint import list_checkpoints, verify_checkpoint

    srv = serve_tiny(tmp_path)
    cfg = load_config(None, SMALL + [f"train.run_dir={tmp_path / 'run'}", "train.iterations=3", "train.checkpoint_every=1",
                                     "rollout.engine=openai", f"rollout.openai.urls={srv.url}",
                                     "rollout.openai.model=tiny", "rollout.openai.max_retries=2"])
    tr = Trainer(cfg)
    save = tr.save

    def save_then_kill_the_server(it):
        path = save(it)
        srv.close()  # after the first checkpoint: iteration 2's rollout finds nobody
        return path

    tr.save = save_then_kill_the_server
    with pytest.raises(RemoteEngineError, match=r"gave up after 3 attempts"):  # 503 or refused: both retried
        tr.train()
    ckpts = list_checkpoints(tmp_path / "run")
    assert [c.name for c in ckpts] == ["iter_000001"] and verify_checkpoint(ckpts[0]) is None


def test_a_failed_weight_push_is_tolerated_within_max_staleness_then_refused(tmp_path, server):
    import socket

    from gigpo.rollout.engines.openai import RemoteEngineError
    from gigpo.train.collect.weight_sync import FullWeightSync

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    learner = load_model("tiny", device="cpu", seed=99, tiny=eval_tiny())  # the server's own weights
    engine = CompletionsEngine([server.url, dead], "tiny", eos_ids=[0], max_retries=0, max_staleness=1)
    sync = FullWeightSync(learner.model, engine, tmp_path / "w")
    rec = sync.push(1)  # the dead server stays at version 0: one behind, allowed
    assert rec["weights/push_failures"] == 1 and engine.server_versions == [1, 0]
    with pytest.raises(RemoteEngineError, match="2 versions old"):
        sync.push(2)


def test_a_lora_learner_pushes_merged_weights_equal_to_its_outputs(tmp_path):
    import torch
    from safetensors.torch import load_model as load_into

    from gigpo.train.collect.weight_sync import save_weights

    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    learner = load_model("tiny", device="cpu", seed=5, tiny=eval_tiny(), lora=lora)
    with torch.no_grad():  # a trained adapter: B is zero at init, so give it weights
        for name, p in learner.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    save_weights(learner.model, tmp_path / "w.safetensors")
    plain = load_model("tiny", device="cpu", seed=6, tiny=eval_tiny())
    load_into(plain.model, str(tmp_path / "w.safetensors"), strict=True)
    ids = torch.tensor([PROBE])
    with torch.no_grad():
        want, got = learner.model(input_ids=ids).logits, plain.model(input_ids=ids).logits
        base = learner.model.get_base_model()
        with learner.model.disable_adapter():
            without = base(input_ids=ids).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(without, want, atol=1e-3)  # the adapter matters: the comparison can fail
    assert all(p.requires_grad is False or "lora" in n for n, p in learner.model.named_parameters())


def test_a_server_of_another_architecture_stops_the_run_before_the_first_rollout(tmp_path):
    from gigpo.train.config import ConfigError

    save_pretrained(load_model("tiny", device="cpu", seed=1, tiny={"hidden_size": 16, "intermediate_size": 32}),
                    tmp_path / "other")
    srv = make_server(str(tmp_path / "other"), port=0, device="cpu", served_model_name="tiny", weights_dir=tmp_path)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        cfg = load_config(None, SMALL + [f"train.run_dir={tmp_path / 'run'}", "rollout.engine=openai",
                                         f"rollout.openai.urls={srv.url}", "rollout.openai.model=tiny",
                                         "rollout.max_staleness=5"])
        with pytest.raises(ConfigError, match="rollout.openai.urls: .*size mismatch: model.embed_tokens.*never received"):
            Trainer(cfg)
    finally:
        srv.close()
