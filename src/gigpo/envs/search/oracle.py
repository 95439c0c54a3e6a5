"""Scripted policies for `SearchEnv`: a hop-following oracle and a retrieve-then-answer baseline."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Protocol

from gigpo.envs.base import Env
from gigpo.envs.search.corpus import RELATIONS, extract_attribute
from gigpo.envs.search.data import QARecord
from gigpo.envs.search.protocol import parse_information


class Policy(Protocol):
    def begin(self, record: QARecord) -> None: ...

    def act(self, observation: str) -> str: ...


class HopOracle:
    """Follows the question's hop plan (``metadata = {"subject", "relations"}``) by reading retrieved passages.

    For each hop: search ``"<entity> <relation keyword>"``, find a returned passage titled with the entity and
    read the attribute with the relation's sentence pattern; the value is the next hop's entity, the last value
    is the answer. If the passage is not among the hits, it retries once with the bare entity name, then gives
    up and answers ``"unknown"``. It never sees the gold answers: it proves the questions are answerable from
    the corpus through the env's own retrieval.
    """

    def begin(self, record: QARecord) -> None:
        if "relations" not in record.metadata:
            raise ValueError(f"question {record.id} has no hop plan (only the fictional data sets carry one)")
        self._entity = str(record.metadata["subject"])
        self._hops = list(record.metadata["relations"])
        self._retried = False
        self._pending = False

    def _search(self, bare: bool = False) -> str:
        self._pending = True
        query = self._entity if bare else f"{self._entity} {RELATIONS[self._hops[0]].keyword}"
        return f"<think>I need the {self._hops[0]} of {self._entity}.</think>\n<search> {query} </search>"

    def act(self, observation: str) -> str:
        if not self._pending:
            return self._search()
        value = None
        for title, text in parse_information(observation):
            if title == self._entity:
                value = extract_attribute(self._hops[0], text)
                if value is not None:
                    break
        if value is None:
            if self._retried:
                return "<answer> unknown </answer>"
            self._retried = True
            return self._search(bare=True)
        self._hops.pop(0)
        self._retried = False
        if not self._hops:
            return f"<think>Found it.</think>\n<answer> {value} </answer>"
        self._entity = value
        return self._search()


_YEAR = re.compile(r"\b\d{4}\b")
# Runs of capitalised words (a name, a place, an organisation); "the" inside is not allowed, so "the X Guild" -> "X Guild".
_CAPS = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)*")
_NOT_ANSWERS = {"The", "It", "Its", "She", "He", "As", "Visitors", "Doc", "Title", "In", "A", "An"}


class RetrieveThenAnswer:
    """Baseline: one search with the question text, then answer with a heuristic span of the retrieved text.

    Span rule: "what year" questions → the first 4-digit number in the passages; otherwise the first run of
    capitalised words that is neither a pronoun/article nor part of the question. It knows nothing about
    the corpus's sentence patterns, so it measures what single-shot retrieval plus shallow reading gets.
    """

    def begin(self, record: QARecord) -> None:
        self._question = record.question
        self._searched = False

    def act(self, observation: str) -> str:
        if not self._searched:
            self._searched = True
            return f"<search> {self._question} </search>"
        return f"<answer> {self.guess(self._question, observation)} </answer>"

    @staticmethod
    def guess(question: str, observation: str) -> str:
        """The heuristic span (``"unknown"`` when nothing qualifies)."""
        texts = [text for _, text in parse_information(observation)]
        if re.search(r"\bwhat year\b|\bwhen\b", question, re.IGNORECASE):
            for text in texts:
                for year in _YEAR.findall(text):
                    if year not in question:
                        return year
            return "unknown"
        for text in texts:
            for span in _CAPS.findall(text):
                if span not in _NOT_ANSWERS and span not in question:
                    return span
        return "unknown"


def run_episode(env: Env, policy: Policy, seed: int) -> dict[str, Any]:
    """Play one episode; returns the final ``info`` plus ``turns``, ``invalid`` (count) and ``observations``."""
    observation, info = env.reset(seed)
    record = getattr(env, "record", None)
    if record is None:
        raise TypeError("run_episode needs an env exposing the current QARecord as .record (SearchEnv)")
    policy.begin(record)
    observations, invalid, done, turns = [observation], 0, False, 0
    while not done:
        observation, _, done, info = env.step(policy.act(observation))
        observations.append(observation)
        invalid += not info["action_valid"]
        turns += 1
    return {**info, "turns": turns, "invalid": invalid, "observations": observations}


def evaluate(env: Env, policy: Policy, seeds: Iterable[int]) -> list[dict[str, Any]]:
    """Final infos of one episode per seed (feed them to ``metrics.summarize_by_source``)."""
    return [run_episode(env, policy, s) for s in seeds]
