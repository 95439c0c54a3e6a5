"""Critic- and batch-based estimators on flat per-step rows: GAE, REINFORCE++ returns, PPO + GiGPO step term;
registered as estimators ``ppo`` (options: config ``algorithm.ppo``) and ``reinforce++`` (``algorithm.reinforce_pp``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from gigpo.algo.estimators.group import group_estimate
from gigpo.algo.ids import as_numpy, factorize_ids
from gigpo.algo.registry import Common, Estimate, StepBatch, apply_step_weight, option, register_estimator
from gigpo.algo.returns import as_rewards, as_steps, build_traj_index, check_gamma, segmented_discount


def _index(traj_ids: Any, steps: Any, n_expected: int | None = None):
    tcodes, n_traj = factorize_ids(traj_ids, "traj_ids")
    n = tcodes.size
    if n_expected is not None and n != n_expected:
        raise ValueError(f"length mismatch: traj_ids has {n} rows, expected {n_expected}")
    st = as_steps(steps, n)
    return build_traj_index(tcodes, n_traj, st, traj_ids), n


def _floats(x: Any, n: int, name: str) -> np.ndarray:
    a = as_numpy(x).astype(np.float64, copy=False).reshape(-1)
    if a.shape[0] != n:
        raise ValueError(f"length mismatch: {name} has {a.shape[0]} rows, expected {n}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contain NaN or inf")
    return a


def gae(
    traj_ids: Any, steps: Any, rewards: Any, values: Any, gamma: float, lam: float, truncated: Any = None,
    bootstrap_values: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalised advantage estimation over the steps (agent turns) of each trajectory, any row order.

    δ_t = r_t + γ V_{t+1} − V_t;  A_t = Σ_k (γλ)^k δ_{t+k};  target_t = A_t + V_t. After a trajectory's last
    step V = 0 when the episode ended (terminated), but a trajectory cut by a time/step limit (``truncated`` true
    on its last row) bootstraps: V after it is ``bootstrap_values`` of that row, or — when the state after the cut
    was never valued — the row's own V_t (the critic's estimate of the state the cut interrupted). Returns
    ``(advantages, value_targets)``, float64, in input row order. λ = 1 gives A_t = R_t − V_t (Monte-Carlo),
    λ = 0 the one-step TD error.
    """
    check_gamma(gamma)
    if not (0.0 <= float(lam) <= 1.0):
        raise ValueError(f"gae lambda must be in [0, 1], got {lam!r}")
    r = as_rewards(rewards)
    idx, n = _index(traj_ids, steps, r.shape[0])
    v = _floats(values, n, "values")
    adv = np.zeros(n)
    if n == 0:
        return adv, adv.copy()
    order, nxt = idx.order, idx.next_in_traj
    v_s = np.append(v[order], 0.0)  # sentinel n: the value after the last step
    delta = r[order] + gamma * v_s[nxt] - v_s[:n]
    if truncated is not None:  # a cut is not an end: bootstrap from the value after it
        cut = np.asarray(truncated, dtype=bool).reshape(-1)
        if cut.shape[0] != n:
            raise ValueError(f"length mismatch: truncated has {cut.shape[0]} rows, expected {n}")
        boot = v if bootstrap_values is None else _floats(bootstrap_values, n, "bootstrap_values")
        cut_s = cut[order] & (nxt == n)
        delta = delta + np.where(cut_s, gamma * boot[order], 0.0)
    adv[order] = segmented_discount(delta, nxt, float(gamma) * float(lam), int(idx.traj_len.max()))
    return adv, adv + v


def whiten(x: Any, eps: float = 1e-6) -> np.ndarray:
    """Batch normalisation (x − mean x) / (std x + eps) over all rows (population std); one row or ties → 0."""
    a = np.asarray(x, dtype=np.float64)
    if a.size == 0:
        return a.copy()
    d = a - a.mean()
    return d / (d.std() + eps)


def reinforce_pp(
    traj_ids: Any, steps: Any, rewards: Any, kl: Any, gamma: float, kl_coef: float, eps: float = 1e-6
) -> tuple[np.ndarray, np.ndarray]:
    """REINFORCE++ on agent steps: KL folded into the reward, discounted returns, batch normalisation.

    r'_t = r_t − β · KL_t with KL_t = Σ_{tokens of step t} (log π_old − log π_ref) (the k1 estimator summed over
    the step's response, i.e. step-level KL); G_t = r'_t + γ G_{t+1} per trajectory; A = (G − mean_batch G) /
    (std_batch G + eps) over every row of the batch (no per-group baseline: that is the point of REINFORCE++).
    Returns ``(advantages, returns G)``.
    """
    check_gamma(gamma)
    if not kl_coef >= 0:
        raise ValueError(f"kl_coef must be >= 0, got {kl_coef!r}")
    r = as_rewards(rewards)
    idx, n = _index(traj_ids, steps, r.shape[0])
    k = _floats(kl, n, "kl")
    shaped = r - float(kl_coef) * k
    g = np.zeros(n)
    if n:
        g[idx.order] = segmented_discount(shaped[idx.order], idx.next_in_traj, gamma, int(idx.traj_len.max()))
    return whiten(g, eps), g


def ppo_step_combine(gae_adv: Any, step_adv: Any, step_weight: float, eps: float = 1e-6) -> np.ndarray:
    """PPO with task grouping: A = whiten(A_GAE) + ω · A_S.

    A_S is GiGPO's step-level term (already normalised within each step group, so each group's values have unit
    RMS or are 0); whitening the GAE advantage over the batch first puts both terms on the same unit scale, so ω
    means what it means in GiGPO (A = A_E + ω A_S). The sum is not re-whitened: rows in singleton step groups keep
    a pure critic advantage, and re-scaling would let the share of singleton rows change ω's effective weight.
    """
    return apply_step_weight(whiten(gae_adv, eps), np.asarray(step_adv, dtype=np.float64), step_weight)


@dataclass
class PPOOptions:
    """PPO: GAE over agent turns with a value head (config ``algorithm.ppo``)."""

    critic: Literal["auto", "none", "value_head"] = option(
        "auto", '"auto"/"value_head": a linear head on the policy\'s last hidden state; "none" is an error for ppo')
    gae_lambda: float = option(0.95, "λ of GAE over agent turns (γ = algorithm.gamma), in [0, 1]")
    value_coef: float = option(0.5, "weight of the value loss (> 0)")
    value_clip: float = option(0.2, "ε of the clipped value loss (0 = unclipped, >= 0)")
    value_lr: float = option(0.0, "learning rate of the value head (0 = optim.lr, >= 0)")

    def check(self) -> None:
        if self.critic == "none":
            raise ValueError("ppo needs a critic: set critic=value_head (or auto)")
        if not 0 <= self.gae_lambda <= 1:
            raise ValueError("gae_lambda must be in [0, 1]")
        if not self.value_coef > 0:
            raise ValueError("value_coef must be > 0")
        if self.value_clip < 0 or self.value_lr < 0:
            raise ValueError("value_clip and value_lr must be >= 0")


@register_estimator("ppo", description="PPO: GAE over agent turns with a value head", options=PPOOptions,
                    step_term="optional", needs_values=True)
def ppo_estimator(batch: StepBatch, common: Common, options: PPOOptions) -> Estimate:
    """GAE(γ, λ) with the critic's values, whitened over the batch; with ``common.step``:
    :func:`ppo_step_combine` (whiten(A_GAE) + ω · A_S, A_S from GiGPO's step groups). Also the value targets."""
    if batch.values is None:
        raise ValueError("ppo needs the critic's values (StepBatch.values)")
    step = group_estimate(batch, common, common.episode, True) if common.step else None
    raw, targets = gae(batch.traj_id, batch.step, batch.reward, batch.values, common.gamma, options.gae_lambda,
                       batch.truncated, batch.bootstrap_values)
    adv = ppo_step_combine(raw, step.step_advantages, common.step_weight) if step is not None else whiten(raw)
    values = np.asarray(batch.values, dtype=np.float64)
    var = float(np.var(targets))
    stats = dict(step.stats) if step is not None else {}
    stats["value/explained_variance"] = 1.0 - float(np.var(targets - values)) / var if var > 0 else 0.0
    stats["value/target_mean"] = float(targets.mean())
    return Estimate(adv, targets, step.episode_advantages if step else None, step.step_advantages if step else None,
                    step.step_group_ids if step else None, stats)


@dataclass
class ReinforcePPOptions:
    """REINFORCE++ (config ``algorithm.reinforce_pp``)."""

    kl_reward_coef: float = option(0.0, "β of the KL folded into each step's reward (>= 0)")

    def check(self) -> None:
        if not self.kl_reward_coef >= 0:
            raise ValueError("kl_reward_coef must be >= 0")

    def reads_kl(self) -> bool:
        """β = 0 never reads the KL: the trainer then keeps no reference model for it."""
        return self.kl_reward_coef > 0


@register_estimator("reinforce++", description="REINFORCE++: KL-shaped discounted returns, batch-normalised",
                    options=ReinforcePPOptions, needs_kl=True, section="reinforce_pp")
def reinforce_pp_estimator(batch: StepBatch, common: Common, options: ReinforcePPOptions) -> Estimate:
    """:func:`reinforce_pp` with ``batch.kl`` (Σ log π_old − log π_ref per row; zeros when absent)."""
    kl = np.zeros(len(batch)) if batch.kl is None else batch.kl
    adv, _ = reinforce_pp(batch.traj_id, batch.step, batch.reward, kl, common.gamma, options.kl_reward_coef)
    return Estimate(adv, stats={"reinforce++/kl_mean": float(np.mean(kl))})
