"""GSPO's sequence-level loss and the clipped value loss against straightforward per-row references."""

import math

import pytest
import torch

from gigpo.algo.losses import gspo_loss, policy_loss, value_loss


def _inputs(seed=0, B=4, T=6):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(B, T, generator=g) * 3
    old = logp + 0.3 * torch.randn(B, T, generator=g)
    mask = torch.ones(B, T)
    mask[0, :2] = 0
    mask[2, :5] = 0
    adv = torch.tensor([1.0, -1.0, 0.5, -2.0])
    return logp, old, adv, mask


def _ref_gspo(logp, old, adv, mask, lo, hi, length_weighted):
    losses, weights = [], []
    for b in range(logp.shape[0]):
        idx = [t for t in range(logp.shape[1]) if mask[b, t] > 0]
        s = math.exp(sum(float(logp[b, t] - old[b, t]) for t in idx) / len(idx))
        a = float(adv[b])
        losses.append(-min(s * a, min(max(s, 1 - lo), 1 + hi) * a))
        weights.append(len(idx) if length_weighted else 1)
    return sum(w * x for w, x in zip(weights, losses)) / sum(weights)


@pytest.mark.parametrize("agg,weighted", [("seq-mean-token-mean", False), ("token-mean", True)])
@pytest.mark.parametrize("lo,hi", [(0.0003, 0.0004), (0.2, 0.28), (0.9, 5.0)])
def test_gspo_matches_reference(agg, weighted, lo, hi):
    logp, old, adv, mask = _inputs()
    loss, st = gspo_loss(logp, old, adv, mask, lo, hi, agg)
    assert loss.item() == pytest.approx(_ref_gspo(logp, old, adv, mask, lo, hi, weighted), rel=1e-5)
    assert 0 <= st["clip_frac"] <= 1


def test_gspo_gradient_is_sequence_level():
    """At ratio 1 (on-policy) the GSPO gradient of a row is −A/|y| per token: the geometric mean weighs every
    token of a sequence equally, unlike the token-level loss whose per-token share depends on aggregation."""
    logp, _, adv, mask = _inputs()
    x = logp.clone().requires_grad_(True)
    loss, _ = gspo_loss(x, logp.detach(), adv, mask, 0.2, 0.2, "seq-mean-token-mean")
    loss.backward()
    n = mask.sum(-1)
    want = -(adv / n).unsqueeze(-1) * mask / mask.shape[0]
    torch.testing.assert_close(x.grad, want)
    # On-policy and with per-row aggregation it equals the token-level surrogate exactly.
    tok, _ = policy_loss(logp, logp, adv, mask, 0.2, 0.2, "seq-mean-token-mean")
    assert loss.item() == pytest.approx(tok.item(), abs=1e-6)


def test_gspo_clips_whole_sequences():
    logp = torch.zeros(2, 3)
    old = torch.full((2, 3), -0.5)  # every sequence ratio = e^0.5 ≈ 1.65
    adv = torch.tensor([1.0, -1.0])
    x = logp.clone().requires_grad_(True)
    loss, st = gspo_loss(x, old, adv, torch.ones(2, 3), 0.2, 0.2)
    loss.backward()
    assert st["clip_frac"] == pytest.approx(0.5)  # the positive-advantage row is clipped
    assert torch.all(x.grad[0] == 0) and torch.all(x.grad[1] != 0)


def test_gspo_bad_shapes():
    logp, old, adv, mask = _inputs()
    with pytest.raises(ValueError, match="one advantage per row"):
        gspo_loss(logp, old, adv.unsqueeze(-1).expand_as(logp), mask)


def test_value_loss_matches_reference():
    v = torch.tensor([0.0, 1.0, 2.0, -1.0])
    v_old = torch.tensor([0.5, 0.5, 0.5, 0.5])
    g = torch.tensor([1.0, 0.0, 3.0, -1.0])
    eps = 0.2
    want = 0.0
    for i in range(4):
        clipped = float(v_old[i]) + max(-eps, min(eps, float(v[i] - v_old[i])))
        want += max((float(v[i]) - float(g[i])) ** 2, (clipped - float(g[i])) ** 2)
    loss, st = value_loss(v, v_old, g, eps)
    assert loss.item() == pytest.approx(0.5 * want / 4)
    plain, _ = value_loss(v, v_old, g, 0.0)
    assert plain.item() == pytest.approx(0.5 * float(((v - g) ** 2).mean()))
    assert 0 < st["vf_clip_frac"] <= 1
