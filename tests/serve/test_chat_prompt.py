"""ChatPromptBuilder: the API path sends exactly the prompt training builds, and respects its character budget."""

from __future__ import annotations

import warnings

import pytest

from gigpo.agent.prompt import PromptBuilder, build_messages
from gigpo.envs import make
from gigpo.models import tiny_tokenizer
from gigpo.serve import ChatPromptBuilder


@pytest.mark.parametrize("fmt, show_admissible, instructions", [("plain", True, True), ("think-action", False, False)])
def test_rendered_messages_equal_training_prompt_ids(fmt, show_admissible, instructions):
    """Server-side rendering (PromptBuilder.render) of the API messages == the token ids training feeds the model,
    at every step of an episode with a growing history window."""
    tok = tiny_tokenizer()
    train = PromptBuilder(tok, 4096, fmt, show_admissible, include_instructions=instructions)
    api = ChatPromptBuilder.like(train, 10**6)
    assert (api.fmt, api.show_admissible, api.include_instructions) == (fmt, show_admissible, instructions)
    env = make("frozenlake")
    obs, info = env.reset(7)
    history: list[tuple[str, str]] = []
    for action in ["left", "down", "right", "down", "up"]:
        args = (env.instructions, info.get("task", ""), history[-2:], obs, info.get("admissible_actions"))
        assert train.render(api.build(*args)) == train.build(*args)
        history.append((obs, action))
        obs, _, done, info = env.step(action)
        if done:
            break
    assert len(history) >= 2


def test_character_budget_drops_history_then_keeps_observation_tail():
    hist = [("old observation " * 5, "up"), ("newer observation " * 5, "down")]
    full = build_messages("rules", "task", hist, "X" * 50 + "END", None)
    size = sum(len(m["content"]) for m in full)
    one = build_messages("rules", "task", hist[1:], "X" * 50 + "END", None)
    b = ChatPromptBuilder(sum(len(m["content"]) for m in one), "plain", True)
    assert b.build("rules", "task", hist, "X" * 50 + "END", None) == one  # oldest entry dropped first
    assert ChatPromptBuilder(size).build("rules", "task", hist, "X" * 50 + "END", None) == full
    bare = build_messages("rules", "task", [], "X" * 50 + "END", None)
    limit = sum(len(m["content"]) for m in bare) - 20
    tight = ChatPromptBuilder(limit)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        msgs = tight.build("rules", "task", hist, "X" * 50 + "END", None)
        tight.build("rules", "task", hist, "X" * 50 + "END", None)
    assert sum(len(m["content"]) for m in msgs) == limit
    assert "…" + "X" * 29 + "END" in msgs[1]["content"]
    assert len(w) == 1  # warned once per builder


def test_every_training_prompt_option_has_an_api_counterpart():
    """A new PromptBuilder option must be mirrored here, or ``like`` refuses (the paths must not drift)."""
    import dataclasses

    from gigpo.serve.chat_prompt import TOKEN_ONLY_FIELDS

    theirs = {f.name for f in dataclasses.fields(PromptBuilder)} - TOKEN_ONLY_FIELDS
    assert theirs <= {f.name for f in dataclasses.fields(ChatPromptBuilder)}

    @dataclasses.dataclass
    class Extended(PromptBuilder):
        new_option: bool = False

    with pytest.raises(TypeError, match="new_option"):
        ChatPromptBuilder.like(Extended(None), 100)
