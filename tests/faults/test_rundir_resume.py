"""Run directories and resume: a used directory is refused (or cleared with train.overwrite), default names never
collide, a resume keeps its experiment unless told otherwise, and every dead end is one clear error."""

import json
import shutil
from pathlib import Path

import pytest
import yaml
from small_run import SMALL

from gigpo.cli import main as cli_main
from gigpo.train.config import ConfigError, load_config
from gigpo.train.rundir import NothingToDo, create_run_dir, plan_resume
from gigpo.train.rundir.checkpoint import list_checkpoints
from gigpo.train.trainer import Trainer


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("base") / "run"
    cfg = load_config(None, SMALL + [f"train.run_dir={run}", "train.iterations=2", "train.checkpoint_every=1"])
    Trainer(cfg).train()
    return run


@pytest.fixture
def no_model_load(monkeypatch):
    """Fail the test if anything loads a model (the refusals must come first)."""
    def boom(*_a, **_k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("gigpo.models.load_model", boom)
    monkeypatch.setattr("gigpo.models.resolve_model_source", boom)


def _snapshot(run: Path) -> dict[str, bytes]:
    return {p.relative_to(run).as_posix(): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def _iterations(run: Path) -> list[int]:
    return [json.loads(ln)["iteration"] for ln in (run / "metrics.jsonl").read_text().splitlines()]


def test_fresh_run_into_a_used_directory_is_refused(run, capsys, no_model_load):
    before = _snapshot(run)
    assert cli_main(["train", *SMALL, "train.iterations=1", f"train.run_dir={run}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gigpo train: error: {run} already holds a run (checkpoints/, metrics.jsonl)")
    assert f"gigpo train --resume {run}" in err and "train.overwrite=true" in err
    assert _snapshot(run) == before  # nothing written, config.yaml included


def test_overwrite_clears_the_old_run_first(run, capsys):
    (run / "notes.txt").write_text("mine")
    old_ids = {json.loads((c / "trainer_state.json").read_text())["run_id"] for c in list_checkpoints(run)}
    assert cli_main(["train", *SMALL, "train.iterations=1", f"train.run_dir={run}", "train.overwrite=true"]) == 0
    assert _iterations(run) == [1]  # no old rows appended to
    ckpts = list_checkpoints(run)
    assert [c.name for c in ckpts] == ["iter_000001"]
    assert json.loads((ckpts[0] / "trainer_state.json").read_text())["run_id"] not in old_ids
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["train"]["iterations"] == 1 and saved["train"]["overwrite"] is False
    assert (run / "notes.txt").read_text() == "mine"  # only the run's own files are deleted


def test_default_names_never_collide(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("gigpo.train.rundir.default_run_dir", lambda cfg: Path("runs") / "gridgoal-gigpo-same")
    cfg = load_config(None, SMALL)
    dirs = [create_run_dir(cfg) for _ in range(3)]
    assert [d.name for d in dirs] == ["gridgoal-gigpo-same", "gridgoal-gigpo-same-2", "gridgoal-gigpo-same-3"]
    assert all(d.is_dir() for d in dirs)


def test_config_errors_create_no_run_directory(tmp_path, capsys):
    target = tmp_path / "new"
    assert cli_main(["train", *SMALL, f"train.run_dir={target}", "rollout.groups=zero"]) == 2
    assert not target.exists()
    with pytest.raises((FileNotFoundError, ValueError), match="/nonexistent/model"):
        Trainer(load_config(None, SMALL + [f"train.run_dir={target}", "model=/nonexistent/model"]))
    assert not target.exists()


def test_resume_that_changes_the_experiment_lists_the_keys(run, capsys, no_model_load):
    before = _snapshot(run)
    assert cli_main(["train", "--resume", str(run), "env=sokoban", "train.iterations=3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gigpo train: error: --resume {run}: these overrides change what the run trains:")
    assert "env.name ('gridgoal' -> 'sokoban')" in err and "env.options.size (3 -> '<unset>')" in err
    assert "--allow-config-change" in err and "train.iterations" not in err.split("Allowed")[0]
    assert _snapshot(run) == before  # config.yaml not rewritten


def test_allow_config_change_continues_under_the_new_config(run, capsys):
    assert cli_main(["train", "--resume", str(run), "--allow-config-change", "env.size=4",
                     "train.iterations=3"]) == 0
    assert "resuming" in capsys.readouterr().out
    assert _iterations(run) == [1, 2, 3]
    assert yaml.safe_load((run / "config.yaml").read_text())["env"]["options"]["size"] == 4


def test_safe_keys_need_no_flag_and_forbidden_ones_are_refused(run):
    plan = plan_resume(run, {"train.iterations": 5, "train.eval_every": 1, "train.keep_checkpoints": 3,
                             "rollout.env_timeout_s": 5})
    assert plan.iteration == 2 and plan.cfg.train.iterations == 5 and plan.cfg.train.run_dir == str(run)
    for key in ("train.seed", "optim.lr", "algorithm.name"):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            plan_resume(run, {key: {"train.seed": 7, "optim.lr": 0.5, "algorithm.name": "grpo"}[key],
                              "train.iterations": 5})
    with pytest.raises(ConfigError, match="cannot be set with --resume"):
        plan_resume(run, {"train.overwrite": True, "train.iterations": 5})


def test_config_with_resume_is_an_error(run, capsys, no_model_load):
    assert cli_main(["train", "--resume", str(run), "--config", "sokoban", "train.iterations=3"]) == 2
    assert "--config cannot be combined with --resume" in capsys.readouterr().err


def test_resume_without_a_checkpoint_is_an_error_not_a_restart(run, capsys, no_model_load):
    shutil.rmtree(run / "checkpoints")
    assert cli_main(["train", "--resume", str(run), "train.iterations=3"]) == 2
    err = capsys.readouterr().err
    assert "has no checkpoint to resume from" in err and "train.overwrite=true" in err
    assert _iterations(run) == [1, 2]  # no duplicated rows


def test_resume_of_a_finished_run_says_so_without_loading_the_model(run, capsys, no_model_load):
    assert cli_main(["train", "--resume", str(run)]) == 0
    out = capsys.readouterr().out
    assert f"nothing to do: {run} already finished iteration 2 of 2; pass train.iterations=N (N > 2)" in out
    assert "done." not in out
    with pytest.raises(NothingToDo):
        Trainer.resume(run, {"train.iterations": 1})


def test_broken_config_yaml_is_one_clear_error(run, capsys, no_model_load):
    (run / "config.yaml").write_text("env:\n  name: [gridgoal\n")
    assert cli_main(["train", "--resume", str(run), "train.iterations=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gigpo train: error: {run / 'config.yaml'} is not valid YAML") and "\n" not in err
    assert cli_main(["train", "--resume", str(run.parent / "absent")]) == 2
    assert "no such run directory" in capsys.readouterr().err


def test_interrupted_and_resumed_cli_run_matches_an_uninterrupted_one(tmp_path):
    # constant: a decaying schedule depends on train.iterations, which the resume changes
    common = [*SMALL, "train.checkpoint_every=1", "optim.lr_schedule=constant"]
    assert cli_main(["train", *common, "train.iterations=3", f"train.run_dir={tmp_path / 'full'}"]) == 0
    assert cli_main(["train", *common, "train.iterations=2", f"train.run_dir={tmp_path / 'part'}"]) == 0
    assert cli_main(["train", "--resume", str(tmp_path / "part"), "train.iterations=3"]) == 0

    def learning(run):
        return [{k: v for k, v in json.loads(ln).items() if not k.startswith("time/")}
                for ln in (run / "metrics.jsonl").read_text().splitlines()]

    assert learning(tmp_path / "part") == learning(tmp_path / "full")
