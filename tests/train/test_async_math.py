"""rollout.async's pieces without a training run: the off-policy weight against a plain reference, the weighted
PPO loss, the version schedule, the checkpoint's batch file, and the config's bad inputs."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gigpo.algo.losses import gspo_loss, offpolicy_weight, policy_loss
from gigpo.rollout.batch import RolloutBatch, Trajectory
from gigpo.train.async_rollout import sampled_version
from gigpo.train.async_rollout.batches import _batch_from_json, _batch_to_json
from gigpo.train.config import load_config
from gigpo.train.config.error import ConfigError


def _reference_weight(learner, sampler, mask, kind, cap):
    """Token by token, in plain Python."""
    out = []
    for lr, sr, mr in zip(learner, sampler, mask):
        row = []
        for lp, sp, m in zip(lr, sr, mr):
            if not m:
                row.append(0.0)
                continue
            rho = math.exp(max(-20.0, min(20.0, lp - sp)))
            row.append({"tis": min(rho, cap), "mis": rho if rho <= cap else 0.0, "none": 1.0}[kind])
        out.append(row)
    return out


logps = st.floats(-8.0, 0.0, allow_nan=False, width=32)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), b=st.integers(1, 4), t=st.integers(1, 6), kind=st.sampled_from(["tis", "mis", "none"]),
       cap=st.floats(1.0, 5.0))
def test_offpolicy_weight_matches_a_plain_reference(data, b, t, kind, cap):
    learner = [[data.draw(logps) for _ in range(t)] for _ in range(b)]
    sampler = [[data.draw(logps) for _ in range(t)] for _ in range(b)]
    mask = [[data.draw(st.booleans()) for _ in range(t)] for _ in range(b)]
    w, stats = offpolicy_weight(torch.tensor(learner), torch.tensor(sampler), torch.tensor(mask), kind, cap)
    ref = np.asarray(_reference_weight(learner, sampler, mask, kind, cap))
    np.testing.assert_allclose(w.numpy(), ref, rtol=1e-5, atol=1e-6)
    on = np.asarray(mask, dtype=bool)
    if on.any():
        assert stats["is_weight_mean"] == pytest.approx(float(ref[on].mean()), rel=1e-5, abs=1e-6)
    assert not w.requires_grad


def test_offpolicy_weight_caps_and_masks():
    learner = torch.log(torch.tensor([[0.9, 0.5, 0.1]]))
    sampler = torch.log(torch.tensor([[0.3, 0.5, 0.2]]))  # ratios 3, 1, 0.5
    mask = torch.ones(1, 3)
    assert offpolicy_weight(learner, sampler, mask, "tis", 2.0)[0][0].tolist() == pytest.approx([2.0, 1.0, 0.5])
    w, stats = offpolicy_weight(learner, sampler, mask, "mis", 2.0)
    assert w[0].tolist() == pytest.approx([0.0, 1.0, 0.5])
    assert stats["is_capped_frac"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="cap"):
        offpolicy_weight(learner, sampler, mask, "tis", 0.5)
    with pytest.raises(ValueError, match="unknown off-policy"):
        offpolicy_weight(learner, sampler, mask, "bogus", 2.0)


@pytest.mark.parametrize("loss_fn", [policy_loss, gspo_loss])
def test_token_weight_scales_each_tokens_loss_and_gradient(loss_fn):
    torch.manual_seed(0)
    logp = (torch.randn(3, 4) - 2).requires_grad_(True)
    old = logp.detach() + 0.05 * torch.randn(3, 4)
    adv = torch.tensor([1.0, -0.5, 2.0])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.float32)
    w = torch.rand(3, 4) * 2
    loss_w, _ = loss_fn(logp, old, adv, mask, agg="token-mean", token_weight=w)
    # reference: the same per-token losses, summed with the weights by hand (token-mean: / number of tokens)
    per_token = []
    for i in range(3):
        for j in range(4):
            if not mask[i, j]:
                continue
            lp = logp[i:i + 1, j:j + 1] if loss_fn is policy_loss else None
            if loss_fn is policy_loss:
                one, _ = loss_fn(lp, old[i:i + 1, j:j + 1], adv[i:i + 1], torch.ones(1, 1))
            else:  # GSPO's ratio is per sequence: the row's own loss, the same at each of its tokens
                one, _ = loss_fn(logp[i:i + 1], old[i:i + 1], adv[i:i + 1], mask[i:i + 1])
            per_token.append(w[i, j] * one)
    ref = torch.stack(per_token).sum() / mask.sum()
    assert loss_w.item() == pytest.approx(ref.item(), rel=1e-5)
    g_w, = torch.autograd.grad(loss_w, logp)
    g_ref, = torch.autograd.grad(ref, logp)
    torch.testing.assert_close(g_w, g_ref, rtol=1e-4, atol=1e-6)
    with pytest.raises(ValueError, match="token_weight shape"):
        loss_fn(logp, old, adv, mask, token_weight=w[:, :2])


def test_schedule_is_a_fixed_lag():
    assert [sampled_version(k, 1) for k in range(1, 6)] == [0, 0, 1, 2, 3]
    assert [sampled_version(k, 2) for k in range(1, 6)] == [0, 0, 0, 1, 2]
    assert [sampled_version(k, 2, start_version=7) for k in range(8, 12)] == [7, 7, 7, 8]


def test_batch_file_round_trips_exactly():
    shared = list(range(50))  # a slot's allowed set, shared by reference across rows and tokens
    b = RolloutBatch()
    b.add_row(group_id=0, traj_id=1, step=0, reward=0.1, done=False, action_valid=True, observation="room 1",
              state_key=(1, ("a", 2)), prompt_ids=[1, 2], response_ids=[3, 4], sampling_logprobs=[-0.5, -1 / 3],
              allowed_tokens=[shared, None])
    b.add_row(group_id=0, traj_id=1, step=1, reward=-0.1, done=True, action_valid=False, observation="room 2",
              state_key="room 2", prompt_ids=[1], response_ids=[5], sampling_logprobs=[-2.25],
              allowed_tokens=[shared])
    b.trajectories = [Trajectory(traj_id=1, group_id=0, seed=12, won=True, final_info={"won": True},
                                 transcript=[("o", "t", "a", 0.5)])]
    b.policy_version = [3, 3]
    import json

    back = _batch_from_json(json.loads(json.dumps(_batch_to_json(b))))
    for name in ("group_id", "traj_id", "step", "reward", "done", "action_valid", "observation", "state_key",
                 "prompt_ids", "response_ids", "sampling_logprobs", "allowed_tokens"):
        assert getattr(back, name) == getattr(b, name), name
    assert back.state_key[0] == (1, ("a", 2)) and hash(back.state_key[0])  # tuples stay hashable tuples
    assert back.allowed_tokens[0][0] is back.allowed_tokens[1][0]  # stored once, shared again
    assert back.trajectories[0].transcript == [("o", "t", "a", 0.5)] and back.trajectories[0].won
    assert back.policy_version == [3, 3]


@pytest.mark.parametrize("overrides,message", [
    (["rollout.async=true", "rollout.max_staleness=0"], "rollout.max_staleness >= 1"),
    (["rollout.async=true", "rollout.max_staleness=1", "rollout.engine=vllm"],
     "rollout.engine=vllm is not supported"),
    (["optim.offpolicy_correction=tis", "optim.offpolicy_cap=0.5"], "optim.offpolicy_cap must be >= 1"),
    (["optim.offpolicy_correction=clip"], "offpolicy_correction"),
])
def test_bad_async_config_is_one_clear_error(overrides, message):
    with pytest.raises(ConfigError, match=message) as err:
        load_config(None, overrides)
    assert "\n" not in str(err.value)


def test_async_key_spellings_and_ppo_is_accepted():
    cfg = load_config(None, ["rollout.async=true", "rollout.max_staleness=2"])
    assert cfg.rollout.async_ is True and cfg.rollout.max_staleness == 2
    assert load_config(None, ["rollout.async_=true", "rollout.max_staleness=1"]).rollout.async_ is True
    assert load_config(None, []).rollout.async_ is False
    # PPO's critic is the learner's (values of the stale batch from the current head): supported, not refused
    assert load_config(None, ["algorithm=ppo", "rollout.async=true", "rollout.max_staleness=1"]).rollout.async_
