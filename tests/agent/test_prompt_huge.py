"""Huge observations (issue 29): a prompt builder never tokenizes an observation too long to fit whole, and the
prompt it builds is the one tokenizing everything would have built."""

from __future__ import annotations

import random

import pytest
from tokenizers_for_tests import byte_bpe, sentencepiece_bpe

from gigpo.agent.prompt import PromptBuilder
from gigpo.models import tiny_tokenizer

WORDS = ["shelf", "apple", "drawer", "the", "goal", "click[buy now]", "room", "door", "10", "\n", "é", "  "]
TOKENIZERS = {"wordpiece": tiny_tokenizer, "byte-bpe": byte_bpe, "sentencepiece": sentencepiece_bpe}


def _text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


class _Counting:
    """The tokenizer, recording the longest text it was asked to tokenize."""

    def __init__(self, tok):
        self.tok, self.longest = tok, 0

    def __call__(self, text, **kw):
        self.longest = max(self.longest, len(text))
        return self.tok(text, **kw)

    def __getattr__(self, name):
        return getattr(self.tok, name)


def _whole(pb: PromptBuilder, *args):
    """What the builder built before: every observation tokenized whole."""
    pb._tail_of = lambda text: None
    return pb.build(*args)


@pytest.mark.parametrize("family", sorted(TOKENIZERS))
@pytest.mark.parametrize("seed", range(4))
def test_huge_observations_give_the_prompt_of_whole_tokenizing(family, seed):
    rng = random.Random(seed)
    tok = TOKENIZERS[family]()
    budget = rng.choice([64, 200, 512])
    huge, small = _text(rng, rng.randint(3_000, 12_000)), _text(rng, rng.randint(1, 20))
    for hist, obs in [([], huge), ([(small, "up"), (huge, "down"), (small, "left")], small),
                      ([(huge, "up"), (small, "left")], huge), ([(small, "up")], small)]:
        args = ("rules", "task", hist, obs, ["up", "down"])
        assert PromptBuilder(tok, budget).build(*args) == _whole(PromptBuilder(tok, budget), *args)


def test_a_five_megabyte_observation_is_not_tokenized_whole():
    counting = _Counting(tiny_tokenizer())
    obs = _text(random.Random(0), 1_000_000)
    ids = PromptBuilder(counting, 2048).build("rules", "task", [(obs, "up")], obs, None)
    assert len(ids) <= 2048
    assert counting.longest < 100_000 < len(obs)  # one tail of 8 characters per budget token sufficed


def test_a_long_run_without_spaces_is_still_cut_right():
    # one WordPiece [UNK] can stand for a whole word: the tails grow until they hold enough tokens
    tok = tiny_tokenizer()
    obs = "x" * 300_000 + " " + _text(random.Random(1), 3_000)
    assert PromptBuilder(tok, 128).build("r", "t", [], obs, None) == _whole(PromptBuilder(tok, 128), "r", "t", [], obs, None)
