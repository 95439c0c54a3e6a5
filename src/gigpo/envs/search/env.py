"""`SearchEnv`: Search-R1-style multi-turn QA — search a corpus with <search>, finish with <answer>, scored by EM."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gigpo.envs.base import Env
from gigpo.envs.search.corpus import DATA_SOURCES, SPLITS, build_fictional
from gigpo.envs.search.data import QARecord, load_questions
from gigpo.envs.search.metrics import exact_match, f1_score
from gigpo.envs.search.protocol import INSTRUCTIONS, INVALID_ACTION_MESSAGE, format_information, parse_action
from gigpo.envs.search.retrieval import BM25Retriever, HttpRetriever, RetrievalError, Retriever

log = logging.getLogger(__name__)

ANSWERED_OBSERVATION = "Your answer has been recorded."

_QUESTIONS: dict[tuple[Any, ...], list[QARecord]] = {}
_QUESTIONS_LOCK = threading.Lock()


def _cached_questions(path: Path, data_sources: Sequence[str] | None) -> list[QARecord]:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, None if data_sources is None else tuple(data_sources))
    with _QUESTIONS_LOCK:
        if key not in _QUESTIONS:
            _QUESTIONS[key] = load_questions(path, data_sources=data_sources)
        return _QUESTIONS[key]


class SearchEnv(Env):
    """Search-augmented QA in Search-R1's protocol (see docs/envs/search.md).

    * ``reset(seed)`` picks question ``order[seed mod n]`` (``order`` is a fixed permutation from ``order_seed``,
      so consecutive seeds cover every question once and equal seeds give the identical episode). The
      observation and ``info["task"]`` are the question.
    * ``step(response)`` takes the model's whole response (``raw_action = True``): exactly one
      ``<search>q</search>`` → observation ``<information>Doc 1(Title: …) …</information>`` with ``topk``
      passages; exactly one ``<answer>a</answer>`` → episode ends with reward EM(a, golds) ∈ {0, 1}; anything
      else → Search-R1's invalid-action message, ``action_valid=False``, reward 0, state unchanged. Every step
      (invalid ones too) uses one of ``max_turns`` turns; running out ends the episode with reward 0.
    * ``state_key`` is the observation text (the question, then the retrieved block); after an invalid step it
      stays the previous key. Retrieved text differs between trajectories, so exact keys rarely match: use
      similarity grouping for GiGPO's step groups (as the paper does for search).
    * ``info`` always has ``won`` (= em == 1), ``score`` (= em), ``em``, ``f1``, ``data_source``,
      ``question_id``, ``turn``; final steps add ``answer`` (None if the turn limit hit) and ``golden_answers``.
    * Retrieval that fails after the retriever's retries raises :class:`RetrievalError` (an ``EnvError``).

    Data: by default the generated fictional encyclopedia (``data_sources`` among ``fict-single``,
    ``fict-multihop``; ``split`` train/test). With ``data_file`` (Search-R1/FlashRAG parquet or JSONL) the file
    is the split and ``data_sources`` filters it; then ``corpus_file`` (BM25 in process) or ``retriever_url``
    (a Search-R1 retrieval server) is required, since the fictional corpus cannot answer your questions.
    """

    raw_action = True
    instructions = INSTRUCTIONS
    max_steps = 4

    def __init__(self, *, split: str = "train", data_sources: Sequence[str] | str | None = None,
                 data_file: str | os.PathLike | None = None, corpus_file: str | os.PathLike | None = None,
                 retriever_url: str | None = None, topk: int = 3, max_turns: int = 4,
                 cache_dir: str | os.PathLike | None = None, corpus_seed: int = 0, order_seed: int = 0,
                 retriever_timeout: float = 10.0, retriever_retries: int = 3, retriever_backoff: float = 0.5) -> None:
        if topk < 1 or max_turns < 1:
            raise ValueError("topk and max_turns must be >= 1")
        if corpus_file is not None and retriever_url is not None:
            raise ValueError("give corpus_file (in-process BM25) or retriever_url (HTTP server), not both")
        sources = [data_sources] if isinstance(data_sources, str) else data_sources
        self.topk, self.max_turns, self.max_steps = topk, max_turns, max_turns
        self.questions = self._load_questions(split, sources, data_file, corpus_file, retriever_url, cache_dir,
                                              corpus_seed)
        if retriever_url is not None:
            self.retriever: Retriever = HttpRetriever(retriever_url, retriever_timeout, retriever_retries,
                                                      retriever_backoff)
        else:
            corpus = corpus_file if corpus_file is not None else build_fictional(cache_dir, corpus_seed).corpus_file
            self.retriever = BM25Retriever.shared(corpus)
        self._order = np.random.default_rng(order_seed).permutation(len(self.questions))
        self.record: QARecord | None = None
        self._turn = 0
        self._done = True
        self._state_key = ""

    @staticmethod
    def _load_questions(split: str, sources: Sequence[str] | None, data_file: Any, corpus_file: Any,
                        retriever_url: Any, cache_dir: Any, corpus_seed: int) -> list[QARecord]:
        if data_file is not None:
            if corpus_file is None and retriever_url is None:
                raise ValueError("data_file needs corpus_file or retriever_url: the built-in fictional corpus "
                                 "cannot answer questions from another dataset")
            return _cached_questions(Path(data_file), sources)
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        sources = list(DATA_SOURCES) if sources is None else list(sources)
        unknown = sorted(set(sources) - set(DATA_SOURCES))
        if unknown or not sources:
            raise ValueError(f"unknown data source(s) {unknown}; built-in: {', '.join(DATA_SOURCES)}")
        ds = build_fictional(cache_dir, corpus_seed)
        return [q for s in sources for q in _cached_questions(ds.questions_file(s, split), None)]

    def _info(self, *, valid: bool, em: float = 0.0, f1: float = 0.0) -> dict[str, Any]:
        assert self.record is not None
        return {"won": em == 1.0, "score": em, "em": em, "f1": f1, "action_valid": valid,
                "state_key": self._state_key, "admissible_actions": None, "data_source": self.record.data_source,
                "question_id": self.record.id, "turn": self._turn}

    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        """Start the episode of question ``order[seed mod n]``; observation = question."""
        self.record = self.questions[int(self._order[int(seed) % len(self.questions)])]
        self._turn, self._done = 0, False
        self._state_key = self.record.question
        info = self._info(valid=True)
        info["task"] = self.record.question
        return self.record.question, info

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        """Apply one whole model response (see the class docstring for the rules)."""
        if self._done or self.record is None:
            raise RuntimeError("episode is over (or never started): call reset() first")
        self._turn += 1
        parsed = parse_action(action)
        out_of_turns = self._turn >= self.max_turns
        if parsed.kind == "answer":
            em, f1 = exact_match(parsed.content, self.record.golden_answers), f1_score(parsed.content, self.record.golden_answers)
            self._done = True
            self._state_key = ANSWERED_OBSERVATION
            info = self._info(valid=True, em=em, f1=f1)
            info.update(answer=parsed.content, golden_answers=list(self.record.golden_answers))
            return ANSWERED_OBSERVATION, em, True, info
        if parsed.kind == "search":
            try:
                hits = self.retriever.search([parsed.content], self.topk)[0]
            except RetrievalError as e:
                self._done = True
                log.error("question %s: retrieval failed: %s", self.record.id, e)
                raise
            observation = format_information(hits)
            self._state_key = observation
            info = self._info(valid=True)
        else:
            observation = INVALID_ACTION_MESSAGE
            info = self._info(valid=False)
            info["invalid_reason"] = parsed.error
        if out_of_turns:
            self._done = True
            info.update(answer=None, golden_answers=list(self.record.golden_answers))
        return observation, 0.0, self._done, info
