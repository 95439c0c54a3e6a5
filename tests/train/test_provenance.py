"""environment.json: one record per start of a run; a resume on other numerics is reported, never refused."""

import json
import logging

import torch

from gigpo.train.rundir import RUN_ENTRIES, provenance
from gigpo.train.rundir.provenance import (
    ENVIRONMENT_FILE,
    numeric_differences,
    read_environment,
    record_start,
)


def test_a_record_names_what_decides_the_numerics():
    rec = provenance.run_environment("cpu")
    assert rec["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert rec["torch"] == torch.__version__ and rec["device"] == "cpu" and rec["cuda_device"] is None
    assert set(provenance.NUMERIC_KEYS) <= set(rec)
    json.dumps(rec)  # plain JSON


def test_fresh_start_then_resumes_append(tmp_path, caplog):
    assert record_start(tmp_path, 0) == {}
    assert record_start(tmp_path, 3) == {}  # same process, same numerics: nothing to report
    assert [r["start_iteration"] for r in read_environment(tmp_path)] == [0, 3]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record_start(tmp_path, 0) == {}  # a fresh start (overwrite) begins a new history
    assert len(read_environment(tmp_path)) == 1


def test_resume_on_another_instruction_set_is_reported(tmp_path, caplog):
    record_start(tmp_path, 0)
    history = read_environment(tmp_path)
    history[-1]["cpu_capability"] = "SOMETHING_ELSE"
    (tmp_path / ENVIRONMENT_FILE).write_text(json.dumps(history))
    with caplog.at_level(logging.WARNING, logger="gigpo.train.rundir.provenance"):
        changed = record_start(tmp_path, 5)
    assert changed == {"cpu_capability": ("SOMETHING_ELSE", torch.backends.cpu.get_cpu_capability())}
    assert "cpu_capability 'SOMETHING_ELSE'" in caplog.text and "not bit-identical" in caplog.text
    assert [r["start_iteration"] for r in read_environment(tmp_path)] == [0, 5]


def test_a_damaged_or_missing_file_does_not_stop_a_resume(tmp_path):
    assert read_environment(tmp_path) == []
    (tmp_path / ENVIRONMENT_FILE).write_text("{not json")
    assert read_environment(tmp_path) == []
    assert record_start(tmp_path, 4) == {}
    assert [r["start_iteration"] for r in read_environment(tmp_path)] == [4]
    assert not list(tmp_path.glob("*.tmp"))


def test_numeric_differences_ignore_descriptive_keys():
    a = {"torch": "2.13.0", "cpu": "x", "python": "3.11"}
    assert numeric_differences(a, {**a, "cpu": "y", "python": "3.12"}) == {}
    assert numeric_differences(a, {**a, "torch": "2.14.0"}) == {"torch": ("2.13.0", "2.14.0")}


def test_overwrite_clears_the_file():
    assert ENVIRONMENT_FILE in RUN_ENTRIES
