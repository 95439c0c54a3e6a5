"""`gigpo view` on run directories a careless or hostile user made (issue 39): line breaks JSON does not escape,
special files where run files should be, a run without metrics, mistyped configs and samples, secrets in the
config, and --max-mb / --out values that used to raise a traceback or overwrite a run's own files."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

import pytest
import yaml
from small_run import SMALL

from gigpo.cli import main as cli_main
from gigpo.train.config import load_config
from gigpo.train.config.secrets import MASK
from gigpo.train.trainer import Trainer
from gigpo.view.load import load_run, read_jsonl

KEY = "sk-live-0123456789abcdef"


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("view") / "run"
    cfg = load_config(None, SMALL + [f"train.run_dir={run}", "train.iterations=2", "train.sample_groups=2"])
    Trainer(cfg).train()
    return run


def _data(html: Path) -> dict:
    return json.loads(re.search(r'type="application/json">(.*?)</script>', html.read_text(), re.S).group(1))


def _report(run: Path, tmp_path: Path, *extra: str) -> dict:
    out = tmp_path / "out.html"
    assert cli_main(["view", str(run), "--out", str(out), *extra]) == 0
    return _data(out)["runs"][0]


def _edit_samples(run: Path, it: int, fn) -> None:
    path = run / "samples" / f"iter_{it:06d}.jsonl"
    lines = [json.loads(ln) for ln in path.read_text(encoding="utf-8").split("\n") if ln]
    fn(lines)
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x85", "\x0b\x0c\x1c"])
def test_a_line_break_json_does_not_escape_keeps_every_trajectory(run, tmp_path, char):
    before = len(_report(run, tmp_path)["samples"]["2"]["trajectories"])

    def poison(lines):
        lines[1]["steps"][0]["obs"] = f"left{char}right"

    _edit_samples(run, 2, poison)
    trajs = _report(run, tmp_path)["samples"]["2"]["trajectories"]
    assert len(trajs) == before >= 2
    assert trajs[0]["steps"][0]["obs"] == f"left{char}right"


def test_samples_written_by_the_trainer_with_a_raw_u2028_read_back_whole(tmp_path):
    from gigpo.train.reporting.step_records import read_step_records

    path = tmp_path / "iter_000001.jsonl"
    recs = [{"kind": "header"}] + [{"kind": "trajectory", "traj": i, "steps": [{"obs": "a\u2028b"}]} for i in range(3)]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    assert "\u2028" in path.read_text(encoding="utf-8")  # written raw, as json.dumps(ensure_ascii=False) does
    assert [t["traj"] for t in read_step_records(path)[1]] == [0, 1, 2]


def test_a_samples_link_to_dev_zero_is_left_out_not_read(run, tmp_path):
    (run / "samples" / "iter_000009.jsonl").symlink_to("/dev/zero")
    t0 = time.perf_counter()
    data = _report(run, tmp_path)
    assert time.perf_counter() - t0 < 30
    assert 9 not in data["sample_iterations"] and "2" in data["samples"]


def test_a_fifo_metrics_file_is_a_note_not_a_hang(run, tmp_path):
    (run / "metrics.jsonl").unlink()
    os.mkfifo(run / "metrics.jsonl")
    result = {}
    th = threading.Thread(target=lambda: result.update(data=_report(run, tmp_path)), daemon=True)
    th.start()
    th.join(30)
    assert not th.is_alive(), "gigpo view blocked on a FIFO"
    assert any("metrics.jsonl was not read: not a regular file" in n for n in result["data"]["notes"])


def test_reads_are_capped_by_bytes_read_not_by_st_size(tmp_path):
    big = tmp_path / "metrics.jsonl"
    big.write_text("".join(json.dumps({"iteration": i, "x": 1.0}) + "\n" for i in range(1, 2001)))
    records, note = read_jsonl(big, max_bytes=10_000)
    assert 0 < len(records) < 2000 and all(r["iteration"] == i + 1 for i, r in enumerate(records))
    assert "only its first" in note


def test_a_run_without_metrics_says_so(run, tmp_path):
    (run / "metrics.jsonl").unlink()
    notes = _report(run, tmp_path)["notes"]
    assert any("no metrics.jsonl yet" in n for n in notes)
    assert not any("cut or malformed" in n for n in notes)


@pytest.mark.parametrize("edit", [
    lambda c: c.update(train=[1, 2, 3]),
    lambda c: c["train"].update(health_collapse_high="high"),
    lambda c: c["train"].update(health_collapse_window=None, iterations="many"),
    lambda c: c.update(rollout="fast"),
])
def test_a_mistyped_config_yaml_is_shown_not_a_traceback(run, tmp_path, edit, capsys):
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    edit(cfg)
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    data = _report(run, tmp_path)
    assert data["metrics"]["iteration"] == [1, 2]
    assert "Traceback" not in capsys.readouterr().err


def test_a_config_yaml_that_is_not_a_mapping_is_a_note(run, tmp_path):
    (run / "config.yaml").write_text("- just\n- a list\n")
    assert any("not a mapping" in n for n in _report(run, tmp_path)["notes"])


def test_null_and_mistyped_sample_fields_reach_the_page_as_text(run, tmp_path):
    def damage(lines):
        lines[0]["largest_groups"] = [{"sg": 1, "size": 2, "anchor": None}, "junk"]
        lines[1]["task"] = None
        lines[1]["steps"][0].update(obs=None, response=None, action=7, reward="x")
        lines[1]["steps"].append("not a step")

    _edit_samples(run, 2, damage)
    s = _report(run, tmp_path)["samples"]["2"]
    assert s["header"]["largest_groups"][0]["anchor"] == "" and len(s["header"]["largest_groups"]) == 1
    t = s["trajectories"][0]
    assert t["task"] == "" and t["steps"][0]["obs"] == "" and t["steps"][0]["action"] == "7"
    assert t["steps"][0]["reward"] is None and all(isinstance(x, dict) for x in t["steps"])
    js = (Path(__import__("gigpo.view", fromlist=["x"]).__file__).parent / "assets" / "view.js").read_text()
    assert "g.anchor.replace" not in js  # the page guards the anchor itself too


def test_the_api_key_never_reaches_the_report(run, tmp_path):
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg["rollout"]["openai"]["api_key"] = KEY
    cfg.setdefault("env", {}).setdefault("options", {})["password"] = "hunter2-pass"
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    out = tmp_path / "r.html"
    assert cli_main(["view", str(run), "--out", str(out)]) == 0
    html = out.read_text()
    assert KEY not in html and "hunter2-pass" not in html
    conf = _data(out)["runs"][0]["config"]
    assert conf["rollout.openai.api_key"] == MASK and conf["env.options.password"] == MASK


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0", "1e9"])
def test_max_mb_out_of_range_is_one_line(run, value, capsys):
    assert cli_main(["view", str(run), "--max-mb", value]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gigpo view: error: --max-mb must be > 0 and at most ") and err.count("\n") == 1


def test_out_a_directory_is_refused_without_a_stray_tmp(run, tmp_path, capsys):
    before = sorted(p.name for p in run.parent.iterdir())
    assert cli_main(["view", str(run), "--out", str(run)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert sorted(p.name for p in run.parent.iterdir()) == before and not any(run.glob("*.tmp"))


@pytest.mark.parametrize("name", ["metrics.jsonl", "config.yaml", "samples/iter_000001.jsonl"])
def test_out_never_overwrites_a_runs_own_file(run, name, capsys):
    before = (run / name).read_bytes()
    assert cli_main(["view", str(run), "--out", str(run / name)]) == 2
    assert "is not a gigpo report" in capsys.readouterr().err
    assert (run / name).read_bytes() == before


def test_out_replaces_an_earlier_report_and_not_through_a_link(run, tmp_path, capsys):
    out = run / "report.html"
    assert cli_main(["view", str(run)]) == 0 and out.is_file()
    assert cli_main(["view", str(run)]) == 0  # its own earlier report is replaced
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out.unlink()
    out.symlink_to(victim)
    assert cli_main(["view", str(run)]) == 2
    assert victim.read_text() == "keep me"


def test_load_run_on_a_directory_of_special_files_only(tmp_path):
    run = tmp_path / "odd"
    (run / "samples").mkdir(parents=True)
    os.mkfifo(run / "config.yaml")
    (run / "samples" / "iter_000001.jsonl").symlink_to("/dev/zero")
    data = load_run(run, 10_000_000)
    assert data["sample_iterations"] == [] and data["config"] == {}
    assert any("config.yaml was not read" in n for n in data["notes"])
