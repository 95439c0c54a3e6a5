"""One-file plug-ins of every kind, each loaded with ``--import`` as a user would (issue 40): an engine
(tests/plugins/uniform_engine.py), a tracker (csv_tracker.py) and a policy loss (vanilla_pg_loss.py) train 2
iterations with no edit to gigpo; an engine's options are config keys like a built-in's."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
import yaml

import gigpo.train.config  # noqa: F401 - the built-ins registered before a test copies the registries
from gigpo.algo import loss_registry
from gigpo.rollout import registry as engine_registry
from gigpo.train.reporting import trackers

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"
#: a small quickstart: 2 iterations take seconds on a CPU
SMALL = ["train.iterations=2", "rollout.groups=2", "train.eval_episodes=0", "train.progress=false",
         "train.checkpoint_every=0"]


MODULES = ("uniform_engine", "csv_tracker", "vanilla_pg_loss")


@pytest.fixture
def plugins(monkeypatch):
    """tests/plugins importable; every registry restored (and the plug-in modules forgotten) after the test."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    saved = [(table, dict(table)) for table in (engine_registry.ENGINES, trackers.TRACKERS, loss_registry.LOSSES)]
    for name in MODULES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    yield
    for table, entries in saved:
        table.clear()
        table.update(entries)
    for name in MODULES:
        sys.modules.pop(name, None)


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_an_imported_engine_trains_and_its_options_are_config_keys(tmp_path, plugins, capsys):
    from gigpo.cli import main
    from gigpo.train.config.help import describe

    run = tmp_path / "run"
    assert main(["train", "rollout.engine=uniform", *SMALL]) == 2  # unknown without --import
    assert "rollout.engine: 'uniform' is not one of 'hf', 'openai', 'vllm'" in capsys.readouterr().err
    base = ["train", "--import", "uniform_engine", *SMALL]
    assert main([*base, "rollout.engine=uniform", "rollout.uniform.seed=-1"]) == 2  # its options' own check
    assert "rollout.uniform.seed must be >= 0, got -1" in capsys.readouterr().err
    assert main([*base, "rollout.uniform.seed=3"]) == 2  # its options while another engine is chosen
    assert "rollout.uniform.seed is set but rollout.engine='hf'" in capsys.readouterr().err
    assert main([*base, "rollout.engine=uniform", "rollout.async=true", "rollout.max_staleness=1"]) == 2
    assert "rollout.engine=uniform is not supported with it yet" in capsys.readouterr().err  # its capabilities

    assert main([*base, "rollout.engine=uniform", "rollout.uniform.seed=3", f"train.run_dir={run}"]) == 0
    rows = _rows(run)
    assert len(rows) == 2 and all(r["rollout/uniform_tokens"] > 0 for r in rows)
    assert rows[1]["rollout/uniform_tokens"] > rows[0]["rollout/uniform_tokens"]  # cumulative, one engine
    assert all("rollout/logprob_gap_mean" in r for r in rows)  # not the learner's weights: the gap is measured
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["rollout"]["engine"] == "uniform" and saved["rollout"]["uniform"] == {"seed": 3}
    assert main(["train", "--import", "uniform_engine", "--resume", str(run), "train.iterations=3"]) == 0
    assert len(_rows(run)) == 3
    text = describe()
    assert "  rollout.uniform.seed = 0  [int]" in text and "\n  uniform  every token uniform" in text


def test_an_imported_tracker_gets_every_metric(tmp_path, plugins, capsys):
    from gigpo.cli import main

    run = tmp_path / "run"
    assert main(["train", "train.loggers=[csv]", *SMALL]) == 2
    assert "train.loggers: 'csv' is not one of tensorboard, wandb, mlflow" in capsys.readouterr().err
    assert main(["train", "--import", "csv_tracker", "train.loggers=[csv]", *SMALL, f"train.run_dir={run}"]) == 0
    with (run / "metrics.csv").open() as f:
        logged = {(int(r["iteration"]), r["key"]): float(r["value"]) for r in csv.DictReader(f)}
    for rec in _rows(run):
        numbers = {k: v for k, v in rec.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
                   and k != "iteration"}
        assert numbers and all(logged[(rec["iteration"], k)] == pytest.approx(v) for k, v in numbers.items())


def test_an_imported_loss_is_the_one_trained_with(tmp_path, plugins, capsys):
    from gigpo.cli import main

    run = tmp_path / "run"
    assert main(["train", "algorithm.loss=vanilla-pg", *SMALL]) == 2
    assert "algorithm.loss: 'vanilla-pg' is not one of 'ppo-clip', 'gspo'" in capsys.readouterr().err
    assert main(["train", "--import", "vanilla_pg_loss", "algorithm.loss=vanilla-pg", *SMALL,
                 f"train.run_dir={run}"]) == 0
    calls = sys.modules["vanilla_pg_loss"].CALLS[0]
    rows = _rows(run)
    assert len(rows) == 2 and calls > 0
    assert all(r["loss/clip_frac"] == 0.0 for r in rows)  # this loss clips nothing
    assert yaml.safe_load((run / "config.yaml").read_text())["algorithm"]["loss"] == "vanilla-pg"
