"""The tiny model's offline WordPiece tokenizer (no downloads): env action words are single tokens."""

from __future__ import annotations

import functools
import string

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from gigpo.models.vocab import COMMON_WORDS, ENV_WORDS

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, BOS, EOS, UNK)
#: Whitespace characters are tokens of their own, so decode(encode(text)) == text for any ASCII text.
WHITESPACE: tuple[str, ...] = tuple(c for c in string.printable if c.isspace())
#: The 94 visible ASCII characters: each is a token; the 62 that can occur inside a word (letters, digits; every
#: ASCII punctuation char is split off by the pre-tokenizer) also get a "##" continuation piece.
VISIBLE_ASCII: tuple[str, ...] = tuple(c for c in string.printable if not c.isspace())
#: A few non-ASCII symbols that env texts use (sokoban's box-on-target "√") or that typographic text brings.
EXTRA_CHARS: tuple[str, ...] = tuple("√×°·•–—‘’“”…")


def _pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    # Each whitespace char and each ASCII punctuation char is its own pre-token, so grid symbols ("#", ".", "$")
    # and tag pieces ("<", "/", ">") are single tokens and "<action>up</action>" -> < action > up < / action >.
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\s"), behavior="isolated"),
            pre_tokenizers.Punctuation(behavior="isolated"),
        ]
    )


def _is_single_word(word: str) -> bool:
    pieces = _pre_tokenizer().pre_tokenize_str(word)
    return len(pieces) == 1 and pieces[0][0] == word


def _continuations(chars: tuple[str, ...]) -> tuple[str, ...]:
    # A "##c" piece is reachable only if c can follow another character inside one pre-token.
    return tuple("##" + c for c in chars if _is_single_word("a" + c))


def tiny_vocab(extra_words: tuple[str, ...] = (), english: bool = True) -> list[str]:
    """The ordered vocabulary: specials, whitespace, chars, reachable "##"-continuations, env words, English words.

    Duplicates are dropped (first occurrence wins). ``extra_words`` must each be a single pre-token (letters,
    digits, no whitespace or punctuation), otherwise they could never be emitted as one token.
    """
    bad = [w for w in extra_words if not _is_single_word(w)]
    if bad:
        raise ValueError(f"extra_words must be single words without whitespace/punctuation, got {bad!r}")
    words = ENV_WORDS + (COMMON_WORDS if english else ()) + tuple(extra_words)
    chars = VISIBLE_ASCII + EXTRA_CHARS
    ordered = SPECIAL_TOKENS + WHITESPACE + chars + _continuations(chars) + words
    return list(dict.fromkeys(ordered))


@functools.lru_cache(maxsize=8)
def tiny_tokenizer(extra_words: tuple[str, ...] = (), english: bool = True) -> PreTrainedTokenizerFast:
    """The tiny model's tokenizer (built offline, cached per process: treat the returned object as read-only).

    Vocabulary (default 632 tokens = 4 specials + 6 whitespace + 94 ASCII + 12 extra symbols + 65 reachable "##"
    continuations + 93 env words + 358 further English words; ``english=False``: 274 tokens, no English words).
    WordPiece runs over pre-tokens split at every whitespace and punctuation character. Consequences:

    * Any printable-ASCII text encodes without ``<unk>``: a word not in the vocabulary spells out as
      ``c ##c ##c ...``; ``decode(encode(text)) == text`` exactly (whitespace are tokens; the decoder strips
      "##" and concatenates). A word with other non-ASCII characters than :data:`EXTRA_CHARS` maps to ``<unk>``.
    * Every env action word ("up", "left", "search", "click", "buy", "answer", ...), every grid symbol and every
      format tag piece ("<", "think", "action", ">", "/") is ONE token.

    Why (exploration): a random-init model's next-token distribution is close to uniform over the V tokens,
    so a given action word has probability ~1/V per position and "one of the 4 moves" ~4/V. Measured on the
    default tiny model (5 seeds, a gridgoal prompt): P(first response token is a move) = 0.53-0.66 % (V=632)
    and 1.3-1.5 % (V=274); 8-token sampled responses contain a move word 0.4-7 % / 5-13 % of the time. A
    character-level vocabulary would need "left" spelled out (~(1/V)^4) and a 49k-token vocabulary dilutes
    each action ~75x more, so only a word-level action vocabulary lets random rollouts hit valid actions often
    enough for RL to reinforce them. ``english=False`` (``tiny={"english_words": False}``) starts fastest.

    Special tokens: pad ``<pad>``, bos ``<s>``, eos ``</s>``, unk ``<unk>``; ``padding_side="left"`` (generation);
    no chat template (the prompt builder falls back to plain text).
    """
    vocab = {tok: i for i, tok in enumerate(tiny_vocab(extra_words, english))}
    core = Tokenizer(models.WordPiece(vocab, unk_token=UNK, max_input_chars_per_word=10_000))
    core.pre_tokenizer = _pre_tokenizer()
    # Replace("##", "") turns a continuation "##x" into "x" (and "###" into "#"); Fuse joins without spaces.
    core.decoder = decoders.Sequence([decoders.Replace("##", ""), decoders.Fuse()])
    core.add_special_tokens(list(SPECIAL_TOKENS))
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        padding_side="left",
        clean_up_tokenization_spaces=False,
        model_max_length=1024,
    )
    return tok
