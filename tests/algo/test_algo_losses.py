"""Loss functions against hand-computed values: clip boundaries on both sides, masks, aggregation, KL, entropy."""

from __future__ import annotations

import math

import pytest
import torch

from gigpo.algo import aggregate, entropy_from_logits, kl_penalty, masked_mean, policy_loss

# Row 0 (A = +1): ratios 1.5 (clipped high at 1.28), 0.5 (A > 0: low side never clips), 1.1.
# Row 1 (A = -2): ratios 0.7 (clipped low at 0.8), 1.3 (A < 0: high side never clips), third token masked.
RATIOS = torch.tensor([[1.5, 0.5, 1.1], [0.7, 1.3, 1.0]], dtype=torch.float64)
MASK = torch.tensor([[1, 1, 1], [1, 1, 0]])
ADV = torch.tensor([1.0, -2.0], dtype=torch.float64)
PER_TOKEN = [[-1.28, -0.5, -1.1], [1.6, 2.6, 0.0]]  # −min(ρA, clip(ρ)A)


def setup_logp():
    old = torch.tensor([[-1.0, -2.0, -0.5], [-3.0, -0.2, -1.0]], dtype=torch.float64)
    logp = (old + RATIOS.log()).clone().requires_grad_(True)
    return logp, old


@pytest.mark.parametrize(
    ("agg", "constant", "expect"),
    [
        ("token-mean", None, (-1.28 - 0.5 - 1.1 + 1.6 + 2.6) / 5),
        ("seq-mean-token-mean", None, ((-1.28 - 0.5 - 1.1) / 3 + (1.6 + 2.6) / 2) / 2),
        ("seq-mean-token-sum", None, ((-1.28 - 0.5 - 1.1) + (1.6 + 2.6)) / 2),
        ("seq-sum-over-constant", 10.0, (-1.28 - 0.5 - 1.1 + 1.6 + 2.6) / 10),
        ("seq-sum-over-constant", None, (-1.28 - 0.5 - 1.1 + 1.6 + 2.6) / 6),  # default constant B·T
    ],
)
def test_policy_loss_values(agg: str, constant: float | None, expect: float) -> None:
    logp, old = setup_logp()
    loss, stats = policy_loss(
        logp, old, ADV, MASK, clip_low=0.2, clip_high=0.28, agg=agg, agg_constant=constant
    )
    assert loss.item() == pytest.approx(expect, abs=1e-12)
    assert stats["clip_frac_low"] == pytest.approx(1 / 5)
    assert stats["clip_frac_high"] == pytest.approx(1 / 5)
    assert stats["clip_frac"] == pytest.approx(2 / 5)
    assert stats["approx_kl"] == pytest.approx(-sum(math.log(r) for r in [1.5, 0.5, 1.1, 0.7, 1.3]) / 5)
    assert stats["ratio_mean"] == pytest.approx((1.5 + 0.5 + 1.1 + 0.7 + 1.3) / 5)
    assert stats["num_tokens"] == 5


def test_policy_loss_gradient_vanishes_exactly_on_clipped_tokens() -> None:
    logp, old = setup_logp()
    loss, _ = policy_loss(logp, old, ADV, MASK, clip_low=0.2, clip_high=0.28)
    loss.backward()
    # d(−ρA)/dlogp = −ρA on unclipped tokens, 0 on clipped and masked ones; token-mean divides by 5.
    expect = torch.tensor([[0.0, -0.5, -1.1], [0.0, 2.6, 0.0]], dtype=torch.float64) / 5
    torch.testing.assert_close(logp.grad, expect)


def test_token_advantages_and_boundaries() -> None:
    logp, old = setup_logp()
    adv_bt = ADV.unsqueeze(-1).expand(2, 3).clone()
    a, _ = policy_loss(logp, old, ADV, MASK)
    b, _ = policy_loss(logp, old, adv_bt, MASK)
    assert a.item() == pytest.approx(b.item())
    # Exactly on the boundary (ρ = 1 + clip_high) nothing is counted as clipped.
    at = torch.log(torch.tensor([[1.25]], dtype=torch.float64))
    _, stats = policy_loss(at, torch.zeros_like(at), torch.tensor([1.0]), torch.ones(1, 1), clip_high=0.25)
    assert stats["clip_frac"] == 0.0


def test_padding_garbage_and_empty_masks_never_give_nan() -> None:
    logp, old = setup_logp()
    with torch.no_grad():
        logp[1, 2] = float("nan")
        old[1, 2] = float("-inf")
    loss, stats = policy_loss(logp, old, ADV, MASK, clip_low=0.2, clip_high=0.28)
    loss.backward()
    assert loss.item() == pytest.approx((-1.28 - 0.5 - 1.1 + 1.6 + 2.6) / 5)
    assert torch.isfinite(logp.grad).all() and math.isfinite(stats["ratio_max"])
    for agg in ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-sum-over-constant"]:
        lp = torch.zeros(2, 3, requires_grad=True)
        empty_loss, empty_stats = policy_loss(
            lp, torch.zeros(2, 3), torch.ones(2), torch.zeros(2, 3), agg=agg
        )
        empty_loss.backward()
        assert empty_loss.item() == 0.0 and not lp.grad.any()
        assert all(math.isfinite(v) for v in empty_stats.values())


def test_policy_loss_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="advantages"):
        policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3), torch.ones(2, 3))
    with pytest.raises(ValueError, match="mask shape"):
        policy_loss(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(2), torch.ones(2, 2))
    with pytest.raises(ValueError, match="unknown aggregation"):
        aggregate(torch.zeros(2, 3), torch.ones(2, 3), "sum")


def test_aggregate_sequence_means_skip_empty_rows() -> None:
    v = torch.tensor([[1.0, 3.0], [5.0, 7.0], [9.0, 9.0]])
    m = torch.tensor([[1, 1], [1, 0], [0, 0]])
    assert aggregate(v, m, "token-mean").item() == pytest.approx(3.0)
    assert aggregate(v, m, "seq-mean-token-mean").item() == pytest.approx((2.0 + 5.0) / 2)
    assert aggregate(v, m, "seq-mean-token-sum").item() == pytest.approx((4.0 + 5.0) / 2)
    assert masked_mean(v, m).item() == pytest.approx(3.0)
    torch.testing.assert_close(masked_mean(v, m, dim=-1), torch.tensor([2.0, 5.0, 0.0]))


def test_kl_estimators() -> None:
    logp = torch.tensor([-1.0, 0.0, -50.0, -0.3])
    ref = torch.tensor([-2.0, -100.0, 0.0, -0.3])
    torch.testing.assert_close(kl_penalty(logp, ref, "k1"), logp - ref)
    torch.testing.assert_close(kl_penalty(logp, ref, "k2"), 0.5 * (logp - ref) ** 2)
    k3 = kl_penalty(logp, ref, "k3")
    assert k3[0].item() == pytest.approx(math.exp(-1.0) + 1.0 - 1.0)
    assert k3[1].item() == pytest.approx(10.0)  # x = −100 clamped to −20: e^−20 + 19 > 10 -> capped
    assert k3[2].item() == pytest.approx(10.0)  # x = +50 clamped to 20 -> capped
    assert k3[3].item() == 0.0
    assert (k3 >= 0).all()
    with pytest.raises(ValueError, match="unknown KL"):
        kl_penalty(logp, ref, "k4")


def test_entropy_from_logits() -> None:
    logits = torch.tensor(
        [[0.0, 0.0, 0.0, 0.0], [1000.0, 1000.0, -1000.0, -1000.0], [0.0, 0.0, -math.inf, -math.inf]],
        requires_grad=True,
    )
    h = entropy_from_logits(logits)
    torch.testing.assert_close(h, torch.tensor([math.log(4), math.log(2), math.log(2)]))
    h.sum().backward()
    assert torch.isfinite(logits.grad).all()
    p = torch.tensor([0.7, 0.2, 0.1])
    one = entropy_from_logits(p.log().to(torch.bfloat16))
    assert one.dtype == torch.float32
    assert one.item() == pytest.approx(-(p * p.log()).sum().item(), abs=1e-2)
