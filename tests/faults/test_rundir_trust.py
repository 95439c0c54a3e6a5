"""The run directory is the run's alone (issue 39): the lock and the files a run creates are never written
through a symlink, a directory holding the user's own config.yaml is refused, a run directory inside another
run's checkpoints is refused, and secrets are kept out of everything a run shares (trackers, --print-config,
messages) while its own config.yaml keeps them, readable by its owner only."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
import yaml
from small_run import SMALL

from gigpo.cli import main as cli_main
from gigpo.train.config import load_config
from gigpo.train.config.secrets import MASK, mask_config, secret_keys
from gigpo.train.rundir import CONFIG_MARKER
from gigpo.train.rundir.runlock import LOCK_FILE, RunDirLocked, lock_run_dir
from gigpo.train.trainer import Trainer

KEY = "sk-live-0123456789abcdef"
OPENAI = ["rollout.engine=openai", "rollout.openai.urls=http://127.0.0.1:9/v1"]


@pytest.fixture
def no_model_load(monkeypatch):
    def boom(*_a, **_k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("gigpo.models.load_model", boom)


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("trust") / "run"
    Trainer(load_config(None, SMALL + [f"train.run_dir={run}", "train.iterations=1"])).train()
    return run


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    return victim


# ----------------------------------------------------------------------------------------------- symlinks
def test_a_lock_file_symlink_is_refused_not_written_through(tmp_path, capsys, no_model_load):
    run = tmp_path / "run"
    run.mkdir()
    victim = _victim(tmp_path)
    (run / LOCK_FILE).symlink_to(victim)
    with pytest.raises(RunDirLocked, match="symlink"):
        lock_run_dir(run)
    assert cli_main(["train", *SMALL, "train.iterations=1", f"train.run_dir={run}"]) == 2
    assert "symlink" in capsys.readouterr().err
    assert victim.read_text() == "precious\n"


def test_a_lock_symlink_on_resume_is_refused(base_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(base_run, run)
    victim = _victim(tmp_path)
    (run / LOCK_FILE).unlink(missing_ok=True)  # copied while this process holds the base run's lock
    (run / LOCK_FILE).symlink_to(victim)
    assert cli_main(["train", "--resume", str(run), "train.iterations=2"]) == 2
    assert "symlink" in capsys.readouterr().err and victim.read_text() == "precious\n"


@pytest.mark.parametrize("name", ["metrics.jsonl", "config.yaml", "environment.json", "curves.png"])
def test_a_run_file_symlink_in_a_fresh_run_dir_is_refused(tmp_path, name, capsys, no_model_load):
    run = tmp_path / "run"
    run.mkdir()
    victim = _victim(tmp_path)
    (run / name).symlink_to(victim if name != "metrics.jsonl" else tmp_path / "not-yet")
    assert cli_main(["train", *SMALL, "train.iterations=1", f"train.run_dir={run}"]) == 2
    assert "is a symlink" in capsys.readouterr().err
    assert victim.read_text() == "precious\n" and not (tmp_path / "not-yet").exists()


def test_safefiles_never_write_through_a_link(tmp_path):
    from gigpo.safefiles import NotRegularFile, open_nofollow, replace_text, write_text_nofollow

    victim = _victim(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(victim)
    with pytest.raises(NotRegularFile):
        write_text_nofollow(link, "x")
    with pytest.raises(NotRegularFile):
        open_nofollow(link, "a")
    (tmp_path / "f.tmp").symlink_to(victim)  # a planted temporary name
    replace_text(tmp_path / "f", "new")
    assert (tmp_path / "f").read_text() == "new" and victim.read_text() == "precious\n"


# ------------------------------------------------------------------------------------- the user's config
def test_a_run_dir_holding_the_users_own_config_is_refused(tmp_path, capsys, no_model_load):
    d = tmp_path / "exp"
    d.mkdir()
    own = "# my experiment: commented\ntrain:\n  iterations: 1  # one\n"
    (d / "config.yaml").write_text(own)
    for extra in ([], ["train.overwrite=true"]):
        assert cli_main(["train", "--config", str(d / "config.yaml"), *SMALL, f"train.run_dir={d}", *extra]) == 2
        err = capsys.readouterr().err
        assert "gigpo did not write it; your own config file?" in err and err.count("\n") == 1
    assert (d / "config.yaml").read_text() == own and sorted(p.name for p in d.iterdir()) == ["config.yaml"]


def test_a_lone_config_yaml_gigpo_wrote_is_reused(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    (d / "config.yaml").write_text(CONFIG_MARKER + "\ntrain: {}\n")  # a run stopped before its first metrics
    Trainer(load_config(None, SMALL + [f"train.run_dir={d}", "train.iterations=1"])).train()
    assert (d / "config.yaml").read_text().splitlines()[0] == CONFIG_MARKER
    assert (d / "metrics.jsonl").is_file()


# ------------------------------------------------------------------------------------------ nested runs
@pytest.mark.parametrize("inside", ["checkpoints/mine", "checkpoints", "checkpoints/iter_000001/x", "samples/x"])
def test_a_run_dir_inside_another_runs_files_is_refused(base_run, tmp_path, inside, capsys, no_model_load):
    run = tmp_path / "run"
    shutil.copytree(base_run, run)
    target = run / inside
    assert cli_main(["train", *SMALL, "train.iterations=1", f"train.run_dir={target}"]) == 2
    err = capsys.readouterr().err
    assert f"of the run {run.resolve()}" in err and "choose a directory outside it" in err
    assert not (run / "checkpoints" / "mine").exists()


def test_a_link_into_another_runs_checkpoints_is_refused_too(base_run, tmp_path, capsys, no_model_load):
    run = tmp_path / "run"
    shutil.copytree(base_run, run)
    (tmp_path / "alias").symlink_to(run / "checkpoints")
    assert cli_main(["train", *SMALL, "train.iterations=1", f"train.run_dir={tmp_path / 'alias' / 'new'}"]) == 2
    assert "choose a directory outside it" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- secrets
def test_the_schema_marks_the_api_key_secret():
    assert "rollout.openai.api_key" in secret_keys()
    masked = mask_config({"rollout": {"openai": {"api_key": KEY}, "engine_api_key": KEY},
                          "env": {"options": {"token": KEY, "user_api_key_env": "MY_VAR"}}})
    assert KEY not in json.dumps(masked) and masked["env"]["options"]["user_api_key_env"] == "MY_VAR"
    assert mask_config({"rollout": {"openai": {"api_key": ""}}})["rollout"]["openai"]["api_key"] == ""
    from gigpo.train.config.secrets import mask_override

    assert mask_override(f"rollout.openai.api_key={KEY}") == f"rollout.openai.api_key={MASK}"
    assert mask_override("rollout.groups=8") == "rollout.groups=8" and mask_override("--api-key=x") == "--api-key=x"


def test_print_config_masks_and_a_masked_config_is_refused(tmp_path, capsys):
    assert cli_main(["train", *SMALL, *OPENAI, f"rollout.openai.api_key={KEY}", "--print-config"]) == 0
    out = capsys.readouterr().out
    assert KEY not in out and MASK in out
    printed = tmp_path / "printed.yaml"
    printed.write_text(out)
    assert cli_main(["train", "--config", str(printed), "--print-config"]) == 2
    err = capsys.readouterr().err
    assert "rollout.openai.api_key holds the mask" in err and err.count("\n") == 1


def test_trackers_get_a_masked_config(tmp_path, monkeypatch):
    import gigpo.train.reporting.trackers as trackers

    seen = {}

    class Spy:
        def __init__(self, run_dir, cfg_dict, ids):
            seen["cfg"] = cfg_dict

    cfg = load_config(None, [*SMALL, *OPENAI, f"rollout.openai.api_key={KEY}"])
    monkeypatch.setitem(trackers.TRACKERS, "tensorboard", trackers.TrackerEntry("tensorboard", Spy))
    monkeypatch.setattr(trackers, "logger_names", lambda cfg: ["tensorboard"])
    trackers.Trackers(cfg, tmp_path)
    assert seen["cfg"]["rollout"]["openai"]["api_key"] == MASK and KEY not in json.dumps(seen["cfg"])


def test_the_runs_config_yaml_keeps_the_key_owner_only(tmp_path):
    from gigpo.train.rundir import write_run_records

    cfg = load_config(None, [*SMALL, *OPENAI, f"rollout.openai.api_key={KEY}"])
    write_run_records(tmp_path, cfg, 0, "cpu")
    f = tmp_path / "config.yaml"
    assert yaml.safe_load(f.read_text())["rollout"]["openai"]["api_key"] == KEY  # a resume needs it
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    write_run_records(tmp_path, load_config(None, SMALL), 0, "cpu")
    assert stat.S_IMODE(f.stat().st_mode) == 0o644


def test_a_resume_message_never_shows_a_key():
    from gigpo.train.rundir import config_changes, safe_on_resume

    old = load_config(None, [*SMALL, *OPENAI, "rollout.openai.api_key=sk-old-key-000"])
    new = load_config(None, [*SMALL, *OPENAI, f"rollout.openai.api_key={KEY}", "env.size=4"])
    changes = config_changes(old, new)
    assert "sk-old-key-000" not in repr(changes) and KEY not in repr(changes) and "env.options.size" in changes
    assert safe_on_resume("rollout.openai.api_key")  # a rotated key changes who may call, not what is trained


@pytest.mark.parametrize("name,kind", [("metrics.jsonl", "fifo"), ("environment.json", "fifo"),
                                       ("metrics.jsonl", "link"), ("curves.png", "link")])
def test_a_resume_refuses_special_run_files(base_run, tmp_path, name, kind, capsys):
    run = tmp_path / "run"
    shutil.copytree(base_run, run)
    (run / LOCK_FILE).unlink(missing_ok=True)
    victim = _victim(tmp_path)
    (run / name).unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(run / name)
    else:
        (run / name).symlink_to(victim)
    assert cli_main(["train", "--resume", str(run), "train.iterations=2"]) == 2  # at once: a FIFO read would block
    err = capsys.readouterr().err
    assert ("is not a regular file" if kind == "fifo" else "is a symlink") in err and err.count("\n") == 1
    assert victim.read_text() == "precious\n"
