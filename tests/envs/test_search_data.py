"""The fictional encyclopedia (generation, splits, atomic cache) and Search-R1/FlashRAG question loading."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from gigpo.envs.search import corpus as corpus_mod
from gigpo.envs.search.corpus import (
    DATA_SOURCES,
    RELATIONS,
    build_fictional,
    extract_attribute,
    generate,
)
from gigpo.envs.search.data import load_questions, records_from_rows
from gigpo.envs.search.metrics import normalize_answer


@pytest.fixture(scope="module")
def generated() -> tuple[list[dict], dict]:
    return generate(0)


def test_corpus_size_format_and_determinism(generated: tuple[list[dict], dict]) -> None:
    passages, questions = generated
    assert len(passages) >= 2000
    assert len({p["id"] for p in passages}) == len(passages)
    for p in passages[:: 97]:
        title, text = p["contents"].split("\n", 1)
        assert title.startswith('"') and title.endswith('"') and len(title) > 2 and text
    again_p, again_q = generate(0)
    assert again_p == passages and again_q == questions
    other_p, _ = generate(1)
    assert other_p != passages
    # Persons have two passages; no other title repeats, so every name is unambiguous.
    counts = Counter(p["contents"].split("\n", 1)[0] for p in passages)
    assert set(counts.values()) == {1, 2}


def test_question_sets_splits_and_answers(generated: tuple[list[dict], dict]) -> None:
    passages, questions = generated
    assert set(questions) == {(s, sp) for s in DATA_SOURCES for sp in ("train", "test")}
    text_by_title: dict[str, list[str]] = {}
    for p in passages:
        title, text = p["contents"].split("\n", 1)
        text_by_title.setdefault(title.strip('"'), []).append(text)
    for source in DATA_SOURCES:
        train, test = questions[(source, "train")], questions[(source, "test")]
        assert len(train) >= 1000 and len(test) >= 300
        # Held-out subjects: no test question is about an entity a train question of this source is about.
        assert not {q["metadata"]["subject"] for q in train} & {q["metadata"]["subject"] for q in test}
        assert len({q["id"] for q in train + test}) == len(train) + len(test)
        hops = 1 if source == "fict-single" else 2
        assert all(len(q["metadata"]["relations"]) == hops and q["data_source"] == source for q in train + test)
        # The hop plan applied to the passages yields the gold answer (first 200 of each split).
        for q in train[:200] + test[:200]:
            entity = q["metadata"]["subject"]
            for rel in q["metadata"]["relations"]:
                values = {v for t in text_by_title[entity] if (v := extract_attribute(rel, t)) is not None}
                assert len(values) == 1, (q, rel, values)
                entity = values.pop()
            assert entity == q["golden_answers"][0]
            assert normalize_answer(entity) not in normalize_answer(q["question"])
    # Every relation is asked about.
    asked = {r for qs in questions.values() for q in qs for r in q["metadata"]["relations"]}
    assert asked == set(RELATIONS)


def test_cache_is_reused_verified_and_rebuilt_when_corrupt(tmp_path: Path) -> None:
    ds = build_fictional(tmp_path, seed=3)
    assert ds.root.parent == tmp_path.resolve() and ds.corpus_file.exists()
    manifest = json.loads((ds.root / "manifest.json").read_text())
    assert manifest["seed"] == 3 and len(manifest["files"]) == 1 + 2 * len(DATA_SOURCES)
    good = ds.questions_file("fict-multihop", "test").read_bytes()
    mtime = ds.corpus_file.stat().st_mtime_ns
    assert build_fictional(tmp_path, seed=3) == ds and ds.corpus_file.stat().st_mtime_ns == mtime  # reused
    # A truncated file (a crash mid-copy, a full disk) is detected by its hash and regenerated.
    ds.questions_file("fict-multihop", "test").write_bytes(good[: len(good) // 2])
    assert build_fictional(tmp_path, seed=3) == ds
    assert ds.questions_file("fict-multihop", "test").read_bytes() == good
    # So is a missing or garbled manifest.
    (ds.root / "manifest.json").write_text("{not json")
    build_fictional(tmp_path, seed=3)
    assert json.loads((ds.root / "manifest.json").read_text()) == manifest
    assert not list(ds.root.glob(".*.tmp"))  # no temp files left behind


def test_atomic_write_leaves_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "f.jsonl"
    target.write_text("old\n")

    def explode(f) -> None:
        f.write("partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        corpus_mod._atomic_write(target, explode)
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["f.jsonl"]


def _rows() -> list[dict]:
    return [
        {"id": "nq-1", "question": "who wrote x?", "golden_answers": ["Ann", "Ann B"], "data_source": "nq"},
        {"id": "hp-1", "question": "where is y?", "golden_answers": ["Lyr"], "data_source": "hotpotqa"},
        {"question": "single?", "golden_answers": "one", "data_source": "nq"},
    ]


def test_load_jsonl_and_filter_sources(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _rows()) + "\n\n")
    recs = load_questions(path)
    assert [r.id for r in recs] == ["nq-1", "hp-1", "2"]
    assert recs[0].golden_answers == ("Ann", "Ann B") and recs[2].golden_answers == ("one",)
    assert [r.id for r in load_questions(path, data_sources=["hotpotqa"])] == ["hp-1"]
    with pytest.raises(ValueError, match="data source.*popqa.*present: hotpotqa, nq"):
        load_questions(path, data_sources=["popqa"])
    path.write_text(json.dumps(_rows()[0]) + "\n{broken\n")
    with pytest.raises(ValueError, match=r"q.jsonl:2: not valid JSON"):
        load_questions(path)


@pytest.mark.peers("pyarrow")
def test_load_parquet_search_r1_layout(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = _rows()[:2]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "test.parquet")
    recs = load_questions(tmp_path / "test.parquet")
    assert [(r.id, r.question, r.golden_answers, r.data_source) for r in recs] == [
        ("nq-1", "who wrote x?", ("Ann", "Ann B"), "nq"), ("hp-1", "where is y?", ("Lyr",), "hotpotqa")]
    # Search-R1's processed files nest the answers in reward_model.ground_truth.target.
    nested = [{"question": "q?", "data_source": "nq", "reward_model": {"style": "rule", "ground_truth": {"target": ["a"]}}}]
    pq.write_table(pa.Table.from_pylist(nested), tmp_path / "nested.parquet")
    assert load_questions(tmp_path / "nested.parquet")[0].golden_answers == ("a",)


def test_missing_columns_are_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": 1, "question": "q?"}) + "\n")
    with pytest.raises(ValueError, match=r"row 0 is missing required column\(s\) golden_answers, data_source"):
        load_questions(path)
    # FlashRAG files have no data_source: a default fills it.
    assert records_from_rows([{"question": "q?", "golden_answers": ["a"]}], default_source="nq")[0].data_source == "nq"
    with pytest.raises(ValueError, match="missing required column.*question"):
        records_from_rows([{"golden_answers": ["a"], "data_source": "nq"}])
    with pytest.raises(ValueError, match="unsupported question file type '.csv'"):
        load_questions(tmp_path / "q.csv")
