"""gigpo audit's Monte-Carlo reference (issue 41 part 3): on a tabular lock, where Q and V of a fixed policy are
computed exactly by dynamic programming over (room, turns taken), the reference advantages A* = Q − V from K
continuations (restored by verified replay) agree with the exact ones within their standard errors."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from gigpo.agent.prompt import PromptBuilder
from gigpo.audit.reference import collect_recorded, reference_advantages
from gigpo.envs.guard import registered_factory
from gigpo.envs.lock import LockEnv
from gigpo.models import load_model
from gigpo.rollout import Collector
from gigpo.rollout.engines import Generation

LOCK = {"rooms": 3, "actions": 4, "traps": 1, "trap": "reset", "max_steps": 6, "lock_seed": 0}
GAMMA = 0.9


class TabularEngine:
    """A policy that is a table: per room, fixed probabilities over the lock's words (read from the prompt's
    "room R"); answers the word's text and its log-probability."""

    shares_learner_weights = True
    model = None

    def __init__(self, tokenizer, table: np.ndarray, words: tuple[str, ...], seed: int = 0):
        self.tokenizer, self.table, self.words = tokenizer, table, words
        self.eos_ids = [tokenizer.eos_token_id]
        self.rng = np.random.default_rng(seed)

    def generate(self, prompts, *, max_new_tokens, temperature=1.0, top_p=1.0, constraints=None):
        rooms = [int(re.findall(r"room (\d+)", self.tokenizer.decode(p))[-1]) for p in prompts]
        out = []
        for room in rooms:
            a = int(self.rng.choice(len(self.words), p=self.table[room]))
            ids = self.tokenizer.encode(self.words[a], add_special_tokens=False)
            out.append(Generation(ids, [math.log(self.table[room, a])] + [0.0] * (len(ids) - 1), self.words[a]))
        return out


def exact_q(env: LockEnv, table: np.ndarray, gamma: float) -> np.ndarray:
    """Q[k, room, a]: the expected discounted return of word a in ``room`` after k turns, then the policy, by
    backward induction from the step cap (no slip: the lock is deterministic)."""
    cap, rooms, n = env.max_steps, env.rooms, env.n_actions
    code, traps = env._fixed
    q = np.zeros((cap + 1, rooms, n))
    v = np.zeros((cap + 1, rooms + 1))
    for k in range(cap - 1, -1, -1):
        for r in range(rooms):
            for a in range(n):
                nxt = r + 1 if a == code[r] else (0 if a in traps[r] else r)
                won = nxt == rooms
                q[k, r, a] = 1.0 if won else gamma * v[k + 1, nxt]
            v[k, r] = table[r] @ q[k, r]
    return q


@pytest.fixture(scope="module")
def tokenizer():
    return load_model("tiny", tiny={"english_words": False}).tokenizer


def test_reference_advantages_agree_with_dynamic_programming_within_their_standard_errors(tokenizer):
    env = LockEnv(**LOCK)
    rng = np.random.default_rng(7)
    code = np.asarray(env._fixed[0])
    # half the mass on the room's right word, the rest spread at random: some episodes win, many do not
    table = 0.5 * np.eye(4)[code] + 0.5 * rng.dirichlet(np.full(4, 0.8), size=LOCK["rooms"])
    engine = TabularEngine(tokenizer, table, env.words, seed=1)
    builder = PromptBuilder(tokenizer, 256, include_instructions=False)
    col = Collector(registered_factory("lock", **LOCK), engine, builder, max_response_tokens=2, history_length=0,
                    env_name="lock")
    try:
        batch, states = collect_recorded(col, [11, 12, 13], group_size=4)
        rows = np.arange(len(batch))
        ref = reference_advantages(col, batch, states, rows, copies=64, gamma=GAMMA, chunk=32)
    finally:
        col.close()
    q = exact_q(env, table, GAMMA)
    obs_room = np.asarray([int(re.findall(r"room (\d+)", o)[-1]) for o in batch.observation])
    action = np.asarray([env.words.index(tokenizer.decode(r).strip()) for r in batch.response_ids])
    step = np.asarray(batch.step)
    exact_qa = q[step, obs_room, action]
    exact_v = (table[obs_room] * q[step, obs_room]).sum(axis=1)
    exact_adv = exact_qa - exact_v
    assert np.all(np.isfinite(ref.advantage)) and np.all(ref.se >= 0)
    assert (ref.se > 0).mean() > 0.5  # the policy is stochastic: most references are estimates, not exact
    z = (ref.advantage - exact_adv) / np.where(ref.se > 0, ref.se, np.inf)
    assert np.all(np.abs(z) < 4.5), (z, ref.advantage, exact_adv)
    assert np.mean(z**2) < 2.5  # standard errors of the right size: z is roughly standard normal
    # the reference knows good actions from bad ones: its ranks follow the exact advantages
    assert np.corrcoef(ref.advantage, exact_adv)[0, 1] > 0.8
