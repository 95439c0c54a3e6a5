"""Env workers: inline, process and ray collect identical trajectories for the same seeds; a ray worker that
dies or hangs ends only its trajectories, and its env is rebuilt in a fresh actor."""

from __future__ import annotations

import os
import sys
import time
import zlib
from dataclasses import dataclass

import pytest

from gigpo.envs.base import Env
from gigpo.envs.gridgoal import GridGoalEnv
from gigpo.envs.guard import registered_factory

WORDS = ["up", "down", "left", "right", "jump"]  # "jump" is invalid: the invalid-action path is covered too


@dataclass
class _Gen:
    token_ids: list
    logprobs: list
    text: str


class PromptHashEngine:
    """A deterministic policy: the action is a hash of the prompt's token ids, so trajectories branch on every
    observation and two collections agree only if every env behaves identically."""

    eos_ids = [0]

    def generate(self, prompts, *, max_new_tokens, temperature, top_p, constraints=None):
        out = []
        for p in prompts:
            h = zlib.crc32(bytes(str(p), "ascii"))
            out.append(_Gen([5 + h % 7], [-0.1 * (h % 5)], WORDS[h % len(WORDS)]))
        return out


class CrashOrHang(Env):
    """GridGoal that, for seed 101, kills its own process at the first step, and for seed 102 never returns."""

    instructions, max_steps = "", 4

    def __init__(self):
        self.inner = GridGoalEnv(size=3, max_steps=4)

    def reset(self, seed):
        self.seed = seed
        return self.inner.reset(seed)

    def step(self, action):
        if self.seed == 101:
            os._exit(3)
        if self.seed == 102:
            while True:
                time.sleep(0.05)
        return self.inner.step(action)


def collector(factory, workers, **kw):
    from gigpo.agent.prompt import PromptBuilder
    from gigpo.models.tokenizer import tiny_tokenizer
    from gigpo.rollout import Collector

    pb = PromptBuilder(tiny_tokenizer(english=False), 256, include_instructions=False)
    return Collector(factory, PromptHashEngine(), pb, max_response_tokens=1, env_name="gridgoal", env_workers=workers,
                     env_timeout_s=kw.pop("env_timeout_s", 30.0), **kw)


def signature(batch) -> list:
    trajs = [(t.traj_id, t.seed, t.length, round(t.episode_return, 9), t.won, t.invalid_steps, t.failed,
              [(o, r) for o, _, _, r in t.transcript]) for t in batch.trajectories]
    rows = list(zip(batch.prompt_ids, batch.response_ids, batch.reward, batch.state_key, batch.done))
    return [trajs, rows]


def collect(workers, **kw):
    col = collector(registered_factory("gridgoal", size=4, max_steps=6), workers, **kw)
    try:
        return [signature(col.collect(seeds, group_size=2)) for seeds in ([3, 7], [11])]  # [11]: envs reused
    finally:
        col.close()


def test_inline_and_process_workers_collect_identical_trajectories():
    inline = collect("inline")
    assert inline == collect("process")
    assert any(t[2] > 1 for t in inline[0][0])  # multi-step episodes: the comparison covers whole trajectories


@pytest.mark.peers("ray")
def test_ray_workers_match_inline_and_survive_death_and_hangs():
    ray = pytest.importorskip("ray")
    # the test module is not importable in Ray's workers: ship its classes by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    assert collect("ray", env_worker_options={"num_workers": 2}) == collect("inline")  # 4 envs on 2 actors

    col = collector(CrashOrHang, "ray", env_timeout_s=2.0)
    try:
        t0 = time.monotonic()
        batch = col.collect([101, 102, 5], group_size=1)  # one actor per env (num_workers=0)
        took = time.monotonic() - t0
        died, hung, fine = batch.trajectories
        assert died.failed and "worker actor died" in died.error
        assert hung.failed and "timeout" in hung.error and "actor was killed" in hung.error
        assert not fine.failed and fine.length >= 1
        assert took < 2.0 + 15.0  # the hang costs one deadline, not more (slack: actor start-up on a busy CPU)
        again = col.collect([5, 6], group_size=1)  # the two lost envs were replaced by fresh actors
        assert not any(t.failed for t in again.trajectories)
    finally:
        col.close()
