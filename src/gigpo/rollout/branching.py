"""Branch rollouts: a group's trajectories grown as a tree from shared states (docs/design.md "Branch rollouts").

A branched group starts ``roots = ceil(N / M)`` trajectories from the task's seed (N = ``rollout.group_size``,
M = ``rollout.branching.siblings``). At a chosen step s of a live trajectory — after its action at s was sampled,
before the env applies it — M − 1 fresh envs are restored to its state before step s (by verified replay:
:mod:`gigpo.envs.restore`) and continue with their own samples: the state is then one anchor state with M
members, the parent's row at s and each sibling's first row, so every step-credit estimator groups them unchanged.

**Budget.** The group's, not the branch's: ``N × cap`` env steps (agent turns; cap = the episode step cap), the
most an unbranched group of N can spend. Every trajectory reserves the steps from where it starts to the cap (a
root ``cap``, a sibling branched at s ``cap − s``: the shared prefix is not spent again); a branch is made only
when its M − 1 siblings fit in what is left, and an episode that ends early forfeits the rest of its reservation,
as an unbranched one does. So when no episode ends early both spend ``N × cap`` less the plan's leftover
(:func:`plan`: what no further branch fits, less than one branch's cost), and otherwise at most that.

**Where.** ``every``: at steps K, 2K, ... (``rollout.branching.every``), every live trajectory, in order, while the
budget lasts. ``uncertain``: at each step, the one live trajectory of the group whose sampled action had the lowest
log-probability (the sum over its tokens, as the engine returns it: the engines give the sampled tokens'
log-probabilities, not the entropy of the distribution). A sibling is never branched again at its own first step
(that state already has its members).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gigpo.envs.faults import EnvFault, EnvHandle
from gigpo.envs.guard import EnvGuard
from gigpo.envs.restore import Visit, check_visit

BRANCH_RULES = ("every", "uncertain")
#: most members of one branch state (rollout.branching.siblings)
MAX_SIBLINGS = 64


@dataclass(frozen=True)
class BranchSpec:
    """``rule`` (``every`` | ``uncertain``), ``siblings`` M ≥ 2 (members of a branch state, the parent
    included), ``every`` K ≥ 1 (rule ``every``: branch at steps K, 2K, ...)."""

    rule: str
    siblings: int = 2
    every: int = 1

    def __post_init__(self) -> None:
        if self.rule not in BRANCH_RULES:
            raise ValueError(f"branch rule must be one of {BRANCH_RULES}, got {self.rule!r}")
        if not 2 <= self.siblings <= MAX_SIBLINGS:
            raise ValueError(f"branch siblings must be in [2, {MAX_SIBLINGS}], got {self.siblings}")
        if self.every < 1:
            raise ValueError(f"branch every must be >= 1, got {self.every}")

    def roots(self, group_size: int) -> int:
        """Trajectories a group starts from its seed."""
        return max(1, math.ceil(group_size / self.siblings))

    def first_step(self) -> int:
        return self.every if self.rule == "every" else 1

    def cost(self, step: int, cap: int) -> int:
        """Env steps one branch at ``step`` reserves: M − 1 siblings, each from ``step`` to the cap."""
        return (self.siblings - 1) * (cap - step)

    def branches_at(self, step: int, live: int) -> int:
        """How many of ``live`` trajectories at ``step`` the rule branches (budget permitting)."""
        if step < 1:
            return 0
        if self.rule == "every":
            return live if step % self.every == 0 else 0
        return min(1, live)


def budget_problem(spec: BranchSpec, group_size: int, cap: int) -> str | None:
    """None when one branch fits the group's budget, else the one line saying why not."""
    first = spec.first_step()
    if first >= cap:
        return (f"rollout.branching.every={spec.every}: no step before the episode cap ({cap}) to branch at; use "
                f"rollout.branching.every < {cap}")
    roots, budget = spec.roots(group_size), group_size * cap
    need = roots * cap + spec.cost(first, cap)
    if need > budget:
        return (f"rollout.branching: a group's budget is rollout.group_size x the episode cap = {group_size} x {cap} "
                f"= {budget} env steps, smaller than one branch: {roots} root(s) of {cap} steps plus "
                f"{spec.siblings - 1} sibling(s) from step {first} = {need}; raise rollout.group_size or lower "
                "rollout.branching.siblings")
    return None


def plan(spec: BranchSpec, group_size: int, cap: int) -> dict[str, int]:
    """The group's tree when no episode ends early: ``roots``, ``branches``, ``trajectories``, ``budget`` and
    ``leftover`` (env steps of the budget no branch fits). The collector follows the same rule turn by turn; with
    ``uncertain`` its siblings lag their parents by a turn, so it has more turns to branch at and may use some of
    the leftover (never more than the budget)."""
    roots, budget = spec.roots(group_size), group_size * cap
    reserved, live, branches = roots * cap, roots, 0
    for step in range(1, cap):
        cost = spec.cost(step, cap)
        for _ in range(spec.branches_at(step, live)):
            if reserved + cost > budget:
                break
            reserved += cost
            branches += 1
        live = roots + branches * (spec.siblings - 1)
    return {"roots": roots, "branches": branches, "trajectories": live, "budget": budget,
            "leftover": budget - reserved}


@dataclass
class GroupBudget:
    """One group's budget during a collection: ``reserved`` env steps of ``budget``."""

    budget: int
    reserved: int

    def take(self, cost: int) -> bool:
        if self.reserved + cost > self.budget:
            return False
        self.reserved += cost
        return True


def choose_parents(spec: BranchSpec, candidates: list[tuple[int, int, float]], cap: int,
                   budget: GroupBudget) -> list[int]:
    """Which of one group's ``candidates`` — ``(index, step, logprob)`` of its live trajectories this turn, each at
    a step it may branch at — branch now, reserving their cost from ``budget``; returns the chosen indices."""
    if spec.rule == "every":
        ordered = [c for c in candidates if spec.branches_at(c[1], 1)]
    else:
        ordered = sorted(candidates, key=lambda c: c[2])[:1]
    chosen = []
    for index, step, _ in ordered:
        if 1 <= step < cap and budget.take(spec.cost(step, cap)):
            chosen.append(index)
    return chosen


def restore_by_replay(guard: EnvGuard, jobs: list[tuple[EnvHandle, int, list[str], list[Visit]]],
                      name: str) -> list[tuple[str, dict] | EnvFault]:
    """Bring each job's env — ``(handle, seed, actions, visits)`` — to the state its recording ends at: reset with
    the seed, then the actions, all jobs' calls of one replay step in one guarded batch (concurrent with process
    or Ray workers). Returns per job the last ``(observation, info)`` or the :class:`EnvFault` that ended it;
    raises :class:`gigpo.envs.restore.ReplayDivergence` when a replayed visit differs from the recorded one."""
    out: list[tuple[str, dict] | EnvFault] = [("", {})] * len(jobs)
    live = list(range(len(jobs)))
    for t in range(max((len(j[2]) for j in jobs), default=0) + 1):
        calls = [(jobs[i][0], "reset", jobs[i][1]) if t == 0 else (jobs[i][0], "step", jobs[i][2][t - 1])
                 for i in live]
        for i, res in zip(live, guard.call_many(calls)):
            out[i] = res if isinstance(res, EnvFault) else ((res[0], res[1]) if t == 0 else (res[0], res[3]))
            if not isinstance(res, EnvFault):
                check_visit(name, jobs[i][1], t, jobs[i][3][t], Visit.of(*out[i]))
        live = [i for i in live if not isinstance(out[i], EnvFault) and len(jobs[i][2]) > t]
    return out
