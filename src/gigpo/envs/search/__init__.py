"""Search-augmented QA (Search-R1 protocol): env, fictional corpus, question loading, retrievers, scoring."""

from gigpo.envs.search.corpus import DATA_SOURCES, build_fictional
from gigpo.envs.search.data import QARecord, load_questions
from gigpo.envs.search.env import SearchEnv
from gigpo.envs.search.metrics import (
    exact_match,
    f1_score,
    format_source_table,
    normalize_answer,
    summarize_by_source,
)
from gigpo.envs.search.protocol import INVALID_ACTION_MESSAGE, format_information, parse_action
from gigpo.envs.search.retrieval import BM25Retriever, HttpRetriever, RetrievalError, Retriever

__all__ = [
    "DATA_SOURCES", "BM25Retriever", "HttpRetriever", "INVALID_ACTION_MESSAGE", "QARecord", "RetrievalError",
    "Retriever", "SearchEnv", "build_fictional", "exact_match", "f1_score", "format_information",
    "format_source_table", "load_questions", "normalize_answer", "parse_action", "summarize_by_source",
]  # fmt: skip
