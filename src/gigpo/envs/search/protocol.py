"""Search-R1's text protocol: parsing a response into search/answer, the <information> block, the prompt text."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Shown verbatim after an invalid step. Reproduced from Search-R1 (search_r1/llm_agent/generation.py) because it is
#: part of the protocol: policies trained there have seen exactly this text. Surrounding newlines are dropped.
INVALID_ACTION_MESSAGE = (
    "My previous action is invalid. "
    "If I want to search, I should put the query between <search> and </search>. "
    "If I want to give the final answer, I should put the answer between <answer> and </answer>. "
    "Let me try again."
)

INSTRUCTIONS = (
    "Answer the question. Every time you receive new information, first reason about it inside "
    "<think> and </think>. If you are missing knowledge, query the search engine with "
    "<search> your query </search>; the best matching passages come back between <information> and "
    "</information>. You may search several times. Once you know the answer, write it inside "
    "<answer> and </answer> as a short phrase with no explanation, e.g. <answer> Velmora Quastin </answer>. "
    "Each response must contain exactly one <search> or one <answer>; anything else is an invalid step."
)

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_TAG = re.compile(r"<(/?)(search|answer)>")


@dataclass(frozen=True)
class ParsedAction:
    """One response, parsed. ``kind`` is ``"search"``, ``"answer"`` or ``None`` (invalid, ``error`` says why)."""

    kind: str | None
    content: str = ""
    error: str | None = None

    @property
    def valid(self) -> bool:
        return self.kind is not None


def parse_action(text: str) -> ParsedAction:
    """Parse a whole model response into exactly one ``<search>q</search>`` or ``<answer>a</answer>``.

    Stricter than Search-R1 (which takes the first matching pair, and whose decoding stops at the first closing
    tag): because gigpo may decode past ``</search>``, a response is valid only if, after removing closed
    ``<think>…</think>`` blocks, its search/answer tags are exactly one opening tag followed by its closing tag
    with non-blank content. Nested tags, unclosed or stray tags, two actions, or search *and* answer are invalid.
    Tags are case-sensitive, as in Search-R1.
    """
    body = _THINK.sub(" ", text)
    tags = [(m.group(1) == "/", m.group(2), m) for m in _TAG.finditer(body)]
    if not tags:
        return ParsedAction(None, error="no <search> or <answer> tag")
    kinds = {name for _, name, _ in tags}
    if kinds == {"search", "answer"}:
        return ParsedAction(None, error="both <search> and <answer> in one response")
    if len(tags) != 2:
        return ParsedAction(None, error=_describe_bad_sequence(tags))
    (close0, name, m0), (close1, _, m1) = tags
    if close0 or not close1:
        return ParsedAction(None, error=_describe_bad_sequence(tags))
    content = body[m0.end() : m1.start()].strip()
    if not content:
        return ParsedAction(None, error=f"empty <{name}>")
    return ParsedAction(name, content)


def _describe_bad_sequence(tags: Sequence[tuple[bool, str, Any]]) -> str:
    opens = sum(not closing for closing, _, _ in tags)
    closes = len(tags) - opens
    if opens != closes:
        return "unbalanced tags"
    depth = 0
    for closing, _, _ in tags:
        depth += -1 if closing else 1
        if depth > 1:
            return "nested tags"
        if depth < 0:
            return "closing tag before opening tag"
    return "more than one action in one response"


def split_contents(contents: str) -> tuple[str, str]:
    """Split a corpus ``contents`` field into (title line, text), Search-R1 style: the first line is the title."""
    title, _, text = contents.partition("\n")
    return title, text


def format_information(docs: Sequence[Mapping[str, Any]]) -> str:
    """Render retrieved passages the way Search-R1 shows them to the policy.

    ``<information>Doc 1(Title: T1) text1\\nDoc 2(Title: T2) text2</information>``, where T is the first line of
    ``contents`` (quotes kept, as in wiki-18) and the text is the rest. No passages gives an empty block.
    """
    lines = []
    for i, doc in enumerate(docs, start=1):
        title, text = split_contents(str(doc["contents"]))
        lines.append(f"Doc {i}(Title: {title}) {text}")
    return "<information>" + "\n".join(lines).strip() + "</information>"


_INFO_DOC = re.compile(r"Doc \d+\(Title: (.*?)\) (.*?)(?=\nDoc \d+\(Title: |</information>|\Z)", re.DOTALL)


def parse_information(observation: str) -> list[tuple[str, str]]:
    """Inverse of :func:`format_information` for readers of observations (oracle, baselines): [(title, text)].

    Titles are returned without surrounding double quotes.
    """
    return [(t.strip().strip('"'), x.strip()) for t, x in _INFO_DOC.findall(observation)]
