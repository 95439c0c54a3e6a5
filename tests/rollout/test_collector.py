"""The collector: groups, active-env-only generation, invalid actions, env crashes, step records."""

import pytest
import torch

from gigpo.agent.prompt import PromptBuilder
from gigpo.envs import make, register
from gigpo.envs.base import Env
from gigpo.models import load_model
from gigpo.rollout import Collector, HFEngine


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", tiny={"english_words": False})


class ScriptedLengthEnv(Env):
    """Episode i of a group lasts a fixed number of steps given by the seed; every action is valid."""

    instructions = "say anything"
    max_steps = 50

    def __init__(self, *, crash_at: int = -1):
        self.crash_at = crash_at

    def reset(self, seed):
        self.len, self.t = seed, 0
        return f"t=0 of {seed}", {"task": "", "state_key": (seed, 0), "admissible_actions": None}

    def step(self, action):
        self.t += 1
        if self.t == self.crash_at:
            raise RuntimeError("boom")
        done = self.t >= self.len
        return f"t={self.t}", float(done), done, {"won": done, "action_valid": True, "state_key": (self.len, self.t)}


register("test-scripted-length", ScriptedLengthEnv, "test env")


def _collector(tiny, env_name="test-scripted-length", **env_kwargs):
    # sampling draws from torch's global RNG: seeded, so a random-init model's response (which can be empty, an
    # invalid action that does not step the env) is the same on every run, not a 1-in-10 flake
    torch.manual_seed(0)
    engine = HFEngine(tiny.model, tiny.tokenizer, tiny.device)
    pb = PromptBuilder(tiny.tokenizer, 256, include_instructions=False)
    return Collector(lambda: make(env_name, **env_kwargs), engine, pb, max_response_tokens=2), engine


def test_only_active_envs_generate(tiny):
    col, engine = _collector(tiny)
    batch = col.collect([1, 3, 5], group_size=2)  # groups end after 1, 3 and 5 steps
    assert engine.calls == 5  # one batched call per turn
    assert engine.prompts_generated == 2 * (1 + 3 + 5)  # only still-active envs are prompted
    assert len(batch) == 2 * (1 + 3 + 5)
    assert sorted(set(batch.group_id)) == [0, 1, 2]
    assert all(t.won for t in batch.trajectories)


def test_step_records_are_complete(tiny):
    col, _ = _collector(tiny)
    batch = col.collect([2], group_size=3)
    assert len(batch) == 6
    for i in range(len(batch)):
        assert len(batch.response_ids[i]) == len(batch.sampling_logprobs[i]) >= 1
        assert all(lp <= 0 for lp in batch.sampling_logprobs[i])
        assert batch.prompt_ids[i]
    assert [batch.step[i] for i in range(len(batch)) if batch.traj_id[i] == 0] == [0, 1]
    assert [batch.done[i] for i in range(len(batch)) if batch.traj_id[i] == 0] == [False, True]


def test_env_crash_fails_only_that_trajectory(tiny, caplog):
    col, _ = _collector(tiny, crash_at=2)
    batch = col.collect([1, 4], group_size=2)
    failed = [t for t in batch.trajectories if t.failed]
    assert len(failed) == 2 and all("boom" in t.error for t in failed)  # group with 4 steps crashes at step 2
    assert set(batch.group_id) == {0}  # rows of failed trajectories are dropped
    assert batch.summary()["failed_trajectories"] == 2
    assert batch.summary()["success_rate"] == 1.0  # statistics exclude failed trajectories
    assert "failed" in caplog.text


def test_invalid_action_penalised_and_state_unchanged(tiny):
    engine = HFEngine(tiny.model, tiny.tokenizer, tiny.device)
    pb = PromptBuilder(tiny.tokenizer, 256, include_instructions=False)
    col = Collector(lambda: make("gridgoal", size=4, max_steps=3), engine, pb, max_response_tokens=3,
                    invalid_penalty=-0.5)
    batch = col.collect([7], group_size=4)
    for i in range(len(batch)):
        if not batch.action_valid[i]:
            assert batch.reward[i] == -0.5
    # an invalid step leaves the state key unchanged for the next step of that trajectory
    by_traj = {}
    for i in range(len(batch)):
        by_traj.setdefault(batch.traj_id[i], []).append(i)
    for rows in by_traj.values():
        for a, b in zip(rows, rows[1:]):
            if not batch.action_valid[a]:
                assert batch.state_key[a] == batch.state_key[b]


def test_group_starts_identical(tiny):
    col, _ = _collector(tiny, env_name="gridgoal")
    batch = col.collect([11, 12], group_size=3)
    first = {}
    for i in range(len(batch)):
        if batch.step[i] == 0:
            first.setdefault(batch.group_id[i], set()).add(batch.observation[i])
    assert all(len(v) == 1 for v in first.values())
    assert first[0] != first[1]


def test_step_cap_and_env_cut_are_truncated_an_old_style_end_is_not(tiny):
    """Env contract: the rollout's step cap marks the cut as truncated; an env's own cut says so in
    info["truncated"]; an old-style env that just returns done=True is read as terminated."""
    engine = HFEngine(tiny.model, tiny.tokenizer, tiny.device)
    pb = PromptBuilder(tiny.tokenizer, 256, include_instructions=False)
    capped = Collector(lambda: make("test-scripted-length"), engine, pb, max_response_tokens=2, max_steps=2)
    batch = capped.collect([1, 5], group_size=2)  # group 0 ends by itself after 1 step, group 1 is cut at 2
    by_group = {g: {t.truncated for t in batch.trajectories if t.group_id == g} for g in (0, 1)}
    assert by_group == {0: {False}, 1: {True}}
    own = Collector(lambda: make("gridgoal", size=4, max_steps=2), engine, pb, max_response_tokens=2)
    for t in own.collect([3], group_size=4).trajectories:  # gridgoal's own cap: info["truncated"] unless won
        assert t.truncated == (not t.won)
