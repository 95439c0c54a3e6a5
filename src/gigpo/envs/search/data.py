"""Question files in Search-R1 / FlashRAG layout (parquet, JSONL or JSON) -> validated ``QARecord`` lists."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REQUIRED_COLUMNS = ("question", "golden_answers", "data_source")


@dataclass(frozen=True)
class QARecord:
    """One question. ``metadata`` carries extras (the fictional sets store the oracle's hop plan there)."""

    id: str
    question: str
    golden_answers: tuple[str, ...]
    data_source: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


def read_rows(path: str | os.PathLike) -> list[dict[str, Any]]:
    """Rows of a ``.parquet`` (needs pyarrow), ``.jsonl`` or ``.json`` (a list of objects) file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as e:
            raise ImportError(f"reading {path} needs pyarrow: pip install pyarrow (or convert it to JSONL)") from e
        return pq.read_table(path).to_pylist()
    if suffix in (".jsonl", ".ndjson"):
        rows = []
        with path.open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        raise ValueError(f"{path}:{lineno}: not valid JSON ({e.msg})") from e
        return rows
    if suffix == ".json":
        rows = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(rows, list):
            raise ValueError(f"{path}: expected a JSON list of question objects")
        return rows
    raise ValueError(f"{path}: unsupported question file type {suffix!r} (use .parquet, .jsonl or .json)")


def _golden(row: Mapping[str, Any]) -> Any:
    # Search-R1's processed parquet also nests the answers under reward_model.ground_truth.target.
    if "golden_answers" in row:
        return row["golden_answers"]
    try:
        return row["reward_model"]["ground_truth"]["target"]
    except (KeyError, TypeError):
        return None


def records_from_rows(rows: Iterable[Mapping[str, Any]], *, origin: str = "<rows>",
                      default_source: str | None = None) -> list[QARecord]:
    """Validate rows and build records.

    Every row needs ``question``, ``golden_answers`` (a string or a list of strings; Search-R1's
    ``reward_model.ground_truth.target`` is accepted in its place) and ``data_source`` (unless ``default_source``
    is given, which fills rows lacking it). Missing columns raise ``ValueError`` naming them and the first row
    that lacks them. A row without ``id`` gets ``"<index>"``.
    """
    records = []
    for i, row in enumerate(rows):
        golden = _golden(row)
        source = row.get("data_source", default_source)
        missing = [c for c, v in zip(REQUIRED_COLUMNS, (row.get("question"), golden, source), strict=True) if v is None]
        if missing:
            raise ValueError(f"{origin}: row {i} is missing required column(s) {', '.join(missing)} "
                             f"(required: {', '.join(REQUIRED_COLUMNS)})")
        answers = [golden] if isinstance(golden, str) else [str(a) for a in golden]
        if not answers:
            raise ValueError(f"{origin}: row {i} has an empty golden_answers list")
        meta = row.get("metadata")
        records.append(QARecord(str(row.get("id", i)), str(row["question"]), tuple(answers), str(source),
                                dict(meta) if isinstance(meta, Mapping) else {}))
    return records


def load_questions(path: str | os.PathLike, *, data_sources: Sequence[str] | None = None,
                   default_source: str | None = None) -> list[QARecord]:
    """Load a question file and keep only ``data_sources`` (all when None); raise if nothing is left."""
    records = records_from_rows(read_rows(path), origin=str(path), default_source=default_source)
    if data_sources is not None:
        present = sorted({r.data_source for r in records})
        unknown = sorted(set(data_sources) - set(present))
        if unknown:
            raise ValueError(f"{path}: no questions from data source(s) {', '.join(unknown)}; present: {', '.join(present)}")
        records = [r for r in records if r.data_source in set(data_sources)]
    if not records:
        raise ValueError(f"{path}: no questions")
    return records
