"""The dialogue envs' intent grammar: agent free text -> one intent, plus reply cleaning and seeded wording.

Grammar (documented in docs/envs/dialogue.md). The reply is lower-cased and split into words ``[a-z0-9]+``;
then the FIRST rule that matches decides, so each agent turn has exactly one intent:

1. ``book``  — a booking word (``book``, ``reserve``, ``confirm``); the option named in the same reply, if any,
   else the last option offered (booking env only).
2. ``offer`` — the reply names an option of the current episode (a restaurant, or a candidate item for the
   guessing game, where an offer is a guess); the first one named wins.
3. ``ask``   — the reply contains a slot's keyword (``day``, ``when`` → day; ``people``, ``many`` → people; …); the
   slot whose keyword comes first wins (one question per turn).
4. ``other`` — anything else (greetings, chit-chat, gibberish): the user says it did not understand.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

#: Agent replies longer than this many characters are cut (then :data:`TRUNCATION_MARKER` is appended).
MAX_REPLY_CHARS = 400
TRUNCATION_MARKER = " [truncated]"
#: What an empty (or all-whitespace) agent reply becomes, so the transcript shows that nothing was said.
EMPTY_MARKER = "[empty reply]"
BOOK_WORDS = ("book", "reserve", "confirm")
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Intent:
    """One parsed agent turn: ``kind`` is ``book`` | ``offer`` | ``ask`` | ``other``; ``slot`` for ``ask``;
    ``name`` for ``offer`` (and for ``book`` when an option was named)."""

    kind: str
    slot: str | None = None
    name: str | None = None


def clean_reply(text: str, max_chars: int = MAX_REPLY_CHARS) -> tuple[str, bool]:
    """Whitespace collapsed; empty → :data:`EMPTY_MARKER`; over ``max_chars`` → cut there plus
    :data:`TRUNCATION_MARKER`. Returns ``(clean_text, truncated)``; never raises on any string."""
    flat = " ".join(str(text).split())
    if not flat:
        return EMPTY_MARKER, False
    if len(flat) > max_chars:
        return flat[:max_chars] + TRUNCATION_MARKER, True
    return flat, False


def parse_intent(text: str, slot_words: Mapping[str, Sequence[str]], names: Sequence[str],
                 booking: bool = False) -> Intent:
    """The intent of ``text`` under the grammar of the module docstring. ``slot_words``: slot -> keywords;
    ``names``: the options that can be offered (single lower-case words); ``booking``: rule 1 applies."""
    words = _WORD.findall(text.lower())
    known = set(names)
    named = next((w for w in words if w in known), None)
    if booking and any(w in BOOK_WORDS for w in words):
        return Intent("book", name=named)
    if named is not None:
        return Intent("offer", name=named)
    first: tuple[int, str] | None = None
    for slot, keys in slot_words.items():
        pos = next((i for i, w in enumerate(words) if w in keys), None)
        if pos is not None and (first is None or pos < first[0]):
            first = (pos, slot)
    if first is not None:
        return Intent("ask", slot=first[1])
    return Intent("other")


def wording_rng(seed: int, paraphrase_seed: int, agent_turns: Sequence[str]) -> np.random.Generator:
    """The RNG that picks the user's wording: a pure function of the episode seed, ``paraphrase_seed`` and every
    agent reply so far. Same conversation → same words (deterministic); the same dialogue *state* reached by
    differently worded agent replies → (usually) different words, which is what makes exact text anchors miss."""
    h = hashlib.blake2b(digest_size=8)
    h.update(f"{int(seed)}|{int(paraphrase_seed)}".encode())
    for t in agent_turns:
        h.update(b"\x1f" + t.encode("utf-8", "replace"))
    return np.random.default_rng(int.from_bytes(h.digest(), "little"))


def pick(rng: np.random.Generator, templates: Sequence[str], **fields: object) -> str:
    """One template of ``templates`` chosen by ``rng``, filled with ``fields``."""
    return templates[int(rng.integers(len(templates)))].format(**fields)
