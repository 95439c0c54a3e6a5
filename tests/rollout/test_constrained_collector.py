"""Constrained decoding through the collector: every action admissible, lists that change between steps, concat
mode, evaluation settings, the learner's masks, and the bad-input errors (env without admissible actions, an
action the tokenizer cannot encode)."""

import pytest
import torch

from gigpo.agent.constrained import ActionEncodingError
from gigpo.agent.prompt import PromptBuilder
from gigpo.envs import make, register
from gigpo.envs.base import Env
from gigpo.models import load_model
from gigpo.rollout import Collector, HFEngine
from gigpo.rollout.concat import to_concat_batch
from gigpo.train.compose import preflight
from gigpo.train.config import ConfigError, load_config
from gigpo.train.update.logprobs import policy_forward


@pytest.fixture(autouse=True)
def _restore_torch_rng():
    """These tests seed and sample; later tests that rely on the global RNG's state must not see it moved."""
    with torch.random.fork_rng(devices=[]):
        yield


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny", tiny={"english_words": False}, seed=0)


class RotatingMenuEnv(Env):
    """The admissible list changes every step (a window over a menu); multi-word actions, one a prefix of
    another. Ends after ``length`` steps; the env itself rejects anything not on the current list."""

    instructions = "choose an item"
    MENU = ["go to shelf 1", "go to shelf 10", "take apple", "open drawer", "look", "look around"]

    def __init__(self, length: int = 4, unencodable: bool = False):
        self.length, self.unencodable = length, unencodable

    def _menu(self):
        k = self.t % 3
        items = self.MENU[k:k + 3] + (["買う"] if self.unencodable else [])
        return items

    def reset(self, seed):
        self.t = 0
        return "t=0", {"task": "", "state_key": 0, "admissible_actions": self._menu()}

    def step(self, action):
        ok = action in self._menu()
        self.t += int(ok)
        done = self.t >= self.length
        return (f"t={self.t}", 0.0, done, {"won": done, "action_valid": ok, "state_key": self.t,
                                            "admissible_actions": self._menu()})


register("test-rotating-menu", RotatingMenuEnv, "test env")


def _collector(tiny, *, mode="step", fmt="plain", **env_kwargs):
    engine = HFEngine(tiny.model, tiny.tokenizer, tiny.device)
    pb = PromptBuilder(tiny.tokenizer, 200, fmt, include_instructions=False)
    col = Collector(lambda: make("test-rotating-menu", **env_kwargs), engine, pb, max_response_tokens=16,
                    decoding="constrained", env_name="test-rotating-menu")
    if mode == "concat":
        col.set_mode("concat", 400)
    return col


def _recomputed_gap(tiny, batch):
    lp, *_ = policy_forward(tiny.model, batch.prompt_ids, batch.response_ids, pad_id=tiny.tokenizer.pad_token_id,
                            device=torch.device("cpu"), allowed=batch.allowed_tokens)
    gap = 0.0
    for j, r in enumerate(batch.response_ids):
        got = lp[j, lp.shape[1] - len(r):]
        gap = max(gap, float((got.detach() - torch.tensor(batch.sampling_logprobs[j])).abs().max()))
    return gap


def test_every_action_is_admissible_as_the_list_changes(tiny):
    col = _collector(tiny)
    torch.manual_seed(0)
    batch = col.collect([0, 1], group_size=3)
    assert batch.summary()["valid_action_rate"] == 1.0
    assert all(t.won and t.length == 4 for t in batch.trajectories)
    for t in batch.trajectories:
        for step, (_obs, _text, action, _r) in enumerate(t.transcript):
            k = step % 3
            assert action in RotatingMenuEnv.MENU[k:k + 3]
    assert all(a is not None for a in batch.allowed_tokens)
    assert _recomputed_gap(tiny, batch) < 1e-5
    greedy = col.collect([0], group_size=1, temperature=0.0)  # evaluation settings: greedy
    assert greedy.summary()["valid_action_rate"] == 1.0


def test_a_one_token_budget_still_gives_only_valid_actions(tiny):
    """The tiny vocabulary spells " up" as [" ", "up"]: with max_response_tokens=1 the decoder must not start that
    spelling (it was cut into an empty, invalid response: valid rate 0.90 on lock before the budget check)."""
    engine = HFEngine(tiny.model, tiny.tokenizer, tiny.device)
    pb = PromptBuilder(tiny.tokenizer, 200, "plain", include_instructions=False)
    col = Collector(lambda: make("lock", rooms=3, max_steps=10, lock_seed=0), engine, pb, max_response_tokens=1,
                    decoding="constrained", env_name="lock")
    torch.manual_seed(0)
    batch = col.collect([0, 1], group_size=8)
    assert sum(t.length for t in batch.trajectories) >= 40  # enough steps for a cut spelling to have shown up
    assert batch.summary()["valid_action_rate"] == 1.0
    assert all(len(r) == 1 for r in batch.response_ids)
    assert _recomputed_gap(tiny, batch) < 1e-5


def test_concat_mode_keeps_masks_aligned_with_responses(tiny):
    col = _collector(tiny, mode="concat")
    torch.manual_seed(1)
    batch = to_concat_batch(col.collect([0], group_size=2))
    assert batch.summary()["valid_action_rate"] == 1.0
    for resp, allowed, lmask in zip(batch.response_ids, batch.allowed_tokens, batch.loss_mask):
        assert len(allowed) == len(resp) == len(lmask)
        assert all((a is not None) == bool(m) for a, m in zip(allowed, lmask))  # env tokens are free & masked
    lp, mask, *_ = policy_forward(tiny.model, batch.prompt_ids, batch.response_ids,
                                  pad_id=tiny.tokenizer.pad_token_id, device=torch.device("cpu"),
                                  allowed=batch.allowed_tokens)
    for j, (r, lm) in enumerate(zip(batch.response_ids, batch.loss_mask)):
        got = lp[j, lp.shape[1] - len(r):] * torch.tensor(lm, dtype=torch.float32)
        assert torch.allclose(got, torch.tensor(batch.sampling_logprobs[j]), atol=1e-5)


def test_unencodable_action_is_a_clear_error(tiny):
    col = _collector(tiny, unencodable=True)
    with pytest.raises(ActionEncodingError, match=r"env 'test-rotating-menu'.*'買う'"):
        col.collect([0], group_size=1)


def test_constrained_with_an_env_without_admissible_actions_is_a_config_error():
    cfg = load_config(None, ["env.name=search", "rollout.decoding=constrained"])
    with pytest.raises(ConfigError, match=r"env 'search' lists no admissible actions"):
        preflight(cfg)
    preflight(load_config(None, ["env.name=gridgoal", "rollout.decoding=constrained"]))  # this one lists them


def test_webshop_search_box_is_a_written_query_not_the_hint(tiny):
    """WebShop's admissible list offers ``search[<your query>]``; constrained decoding writes the query (a free-text
    slot) instead of copying the hint, the env accepts it, and the learner's masks reproduce the sampler's."""
    engine = HFEngine(tiny.model, tiny.tokenizer, tiny.device)
    pb = PromptBuilder(tiny.tokenizer, 600, "plain", include_instructions=False)
    col = Collector(lambda: make("webshop", max_steps=4), engine, pb, max_response_tokens=12,
                    decoding="constrained", env_name="webshop")
    torch.manual_seed(0)
    batch = col.collect([0, 1], group_size=2)
    first = [t.transcript[0][2] for t in batch.trajectories]  # the first page is the search box
    assert all(a.startswith("search[") and a.endswith("]") and a != "search[<your query>]" for a in first), first
    assert all(a[len("search["):-1].strip() for a in first)
    assert batch.summary()["valid_action_rate"] == 1.0
    assert _recomputed_gap(tiny, batch) < 1e-5
