"""PPO critic: one forward gives the same log-probs plus values; the value head saves and resumes; concat masks."""

import pytest
import torch

from gigpo.train.config import load_config
from gigpo.train.update.logprobs import policy_forward
from gigpo.train.update.value import VALUE_HEAD_FILE, ValueHead

SMALL = ["rollout.groups=2", "rollout.group_size=2", "env.max_steps=3", "train.eval_every=0",
         "train.eval_episodes=0", "train.progress=false", "train.sample_trajectories=0", "optim.ppo_epochs=1",
         "optim.mini_batches=1"]


def test_policy_forward_with_a_head_gives_the_same_logprobs_plus_values():
    from gigpo.models import load_model

    b = load_model("tiny", seed=0)
    prompts, resps = [[5, 6, 7, 8], [9, 10]], [[11, 12], [13]]
    want, mask_w, _, none = policy_forward(b.model, prompts, resps, pad_id=0, device=torch.device("cpu"))
    assert none is None  # no head: no values (and no hidden states requested)
    head = ValueHead(b.model.config.hidden_size)
    torch.nn.init.normal_(head.linear.weight, generator=torch.Generator().manual_seed(0))
    lp, mask, _, v = policy_forward(b.model, prompts, resps, pad_id=0, device=torch.device("cpu"), head=head)
    torch.testing.assert_close(lp, want)
    assert torch.equal(mask, mask_w) and v.shape == (2,)
    # the value is read at the last prompt token: it does not depend on the response
    _, _, _, v2 = policy_forward(b.model, prompts, [[1, 2, 3], [4, 4]], pad_id=0, device=torch.device("cpu"),
                                 head=head)
    torch.testing.assert_close(v, v2)


def test_value_head_saves_and_resumes(tmp_path):
    from gigpo.train.trainer import Trainer

    cfg = load_config(None, ["algorithm=ppo+step", "train.iterations=1", *SMALL])
    tr = Trainer(cfg, tmp_path / "run")
    tr.train()
    ckpt = tmp_path / "run" / "checkpoints" / "iter_000001"
    assert (ckpt / VALUE_HEAD_FILE).exists()
    w = tr.value_head.linear.weight.detach().clone()
    assert w.abs().sum() > 0  # it trained away from its zero init
    again = Trainer.resume(tmp_path / "run", {"train.iterations": 2})
    assert torch.equal(again.value_head.linear.weight, w)
    assert again.start_iteration == 1
    state = again.optimizer.state_dict()
    assert len(state["param_groups"]) == 2 and state["state"]  # the head's Adam moments came back too
    again.train()
    assert (tmp_path / "run" / "checkpoints" / "iter_000002" / VALUE_HEAD_FILE).exists()


def test_resume_without_value_head_file_is_an_error(tmp_path):
    from gigpo.train.trainer import Trainer

    cfg = load_config(None, ["algorithm=ppo", "train.iterations=1", *SMALL])
    Trainer(cfg, tmp_path / "run").train()
    (tmp_path / "run" / "checkpoints" / "iter_000001" / VALUE_HEAD_FILE).unlink()
    with pytest.raises(FileNotFoundError, match="value_head"):
        Trainer.resume(tmp_path / "run")


def test_trainer_masks_env_tokens_in_concat_rows(tmp_path):
    from gigpo.train.collect.dynamic_sampling import collect_shards
    from gigpo.train.trainer import Trainer

    cfg = load_config(None, ["algorithm=grpo", "rollout.mode=concat", "train.iterations=1", *SMALL])
    tr = Trainer(cfg, tmp_path / "run")
    got = collect_shards(tr.collector, cfg, 1, [0], 1)
    batch, stats = got.batch, got.stats
    assert stats["concat_rows"] == len(batch) == 4
    rows = list(range(len(batch)))
    logp, mask, _, _ = tr.passes.logprobs(tr.model, rows, batch)
    for r in rows:
        lm = batch.loss_mask[r]
        assert mask[r, mask.shape[1] - len(lm):].tolist() == [float(m) for m in lm]
        assert mask[r, :mask.shape[1] - len(lm)].sum() == 0
        assert torch.all(logp[r][mask[r] == 0] == 0)
    tr.collector.close()
    tr.eval_collector.close()
