"""Tests of the tiny WordPiece tokenizer: exact round trips, single-token actions, specials, padding side."""

from __future__ import annotations

import string

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gigpo.models import tiny_tokenizer
from gigpo.models.tokenizer import EXTRA_CHARS, tiny_vocab
from gigpo.models.vocab import ENV_WORDS

ACTIONS = [
    "up",
    "down",
    "left",
    "right",
    "search",
    "click",
    "answer",
    "think",
    "action",
    "buy",
    "now",
    "back",
    "next",
    "prev",
]
ENV_TEXTS = [
    "up",
    "<action>left</action>",
    "<think>the box is left of me</think><action>down</action>",
    "#######\n#  _  #\n# P$  #\n#   . #\n#######",
    "SFFF\nFHFH\nFFFH\nHFFG",
    "search[red cotton shirt under 30 dollars]",
    "click[< Prev]",
    "Question: who wrote Hamlet?\t Answer: <answer>William Shakespeare</answer>\r\n",
    "  double  spaces and ### hashes ## and x##y",
    "######\n#_√P_#\n#_XO_#\n######",
    "It’s 20°C — “fine”… 3×4 √2",
]


@pytest.mark.parametrize("text", ENV_TEXTS)
def test_round_trip_env_texts(text: str) -> None:
    tok = tiny_tokenizer()
    ids = tok(text)["input_ids"]
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == text


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=string.printable + "".join(EXTRA_CHARS), max_size=60))
def test_round_trip_any_printable_ascii(text: str) -> None:
    tok = tiny_tokenizer()
    # Like every HF tokenizer, literal special-token strings in text ("</s>") encode as the special tokens.
    assume(not any(s in text for s in tok.all_special_tokens))
    ids = tok(text)["input_ids"]
    assert tok.unk_token_id not in ids
    assert tok.decode(ids) == text


def test_every_env_word_is_one_token_and_decodes_plain() -> None:
    tok = tiny_tokenizer()
    for word in [*ACTIONS, *ENV_WORDS]:
        ids = tok(word)["input_ids"]
        assert len(ids) == 1, (word, tok.convert_ids_to_tokens(ids))
        assert tok.decode(ids) == word
    # in context too: after a tag and before a closing tag
    toks = tok.convert_ids_to_tokens(tok("<action>up</action>")["input_ids"])
    assert toks == ["<", "action", ">", "up", "<", "/", "action", ">"]


def test_grid_symbols_are_single_tokens() -> None:
    tok = tiny_tokenizer()
    toks = tok.convert_ids_to_tokens(tok("#P.$#")["input_ids"])
    assert toks == ["#", "P", ".", "$", "#"]


def test_unknown_words_spell_out() -> None:
    tok = tiny_tokenizer()
    assert tok.convert_ids_to_tokens(tok("zyx")["input_ids"]) == ["z", "##y", "##x"]


def test_specials_padding_and_no_chat_template() -> None:
    tok = tiny_tokenizer()
    assert (tok.pad_token, tok.bos_token, tok.eos_token, tok.unk_token) == ("<pad>", "<s>", "</s>", "<unk>")
    assert tok.padding_side == "left"
    assert not tok.chat_template
    batch = tok(["up", "go left now"], padding=True)
    assert batch["input_ids"][0][:4] == [tok.pad_token_id] * 4  # left padded
    assert batch["attention_mask"][0] == [0, 0, 0, 0, 1]
    assert tok.decode(batch["input_ids"][0], skip_special_tokens=True) == "up"
    assert tok("</s>")["input_ids"] == [tok.eos_token_id]


def test_vocab_size_and_cache() -> None:
    assert len(tiny_tokenizer()) == len(tiny_vocab()) == 632
    assert len(tiny_tokenizer(english=False)) == len(tiny_vocab(english=False)) == 274
    assert tiny_tokenizer() is tiny_tokenizer()


def test_extra_words() -> None:
    tok = tiny_tokenizer(("sokobanx",))
    assert len(tok("sokobanx")["input_ids"]) == 1
    with pytest.raises(ValueError, match="single words"):
        tiny_vocab(("two words",))
    with pytest.raises(ValueError, match="single words"):
        tiny_vocab(("a-b",))


@pytest.mark.parametrize("name", ["gridgoal", "sokoban", "frozenlake", "webshop", "search"])
def test_builtin_env_texts_encode_exactly(name: str) -> None:
    """The real built-in envs: instructions + first observation round trip; simple actions are one token each."""
    from gigpo.envs.registry import list_envs, make

    if name not in list_envs():
        pytest.skip(f"env {name!r} not registered")
    tok = tiny_tokenizer()
    env = make(name)
    try:
        obs, info = env.reset(0)
        text = f"{env.instructions}\n{info.get('task', '')}\n{obs}"
        ids = tok(text)["input_ids"]
        assert tok.unk_token_id not in ids
        assert tok.decode(ids) == text
        for action in info.get("admissible_actions") or []:
            if action.isalpha():
                assert len(tok(action)["input_ids"]) == 1, action
    finally:
        env.close()
