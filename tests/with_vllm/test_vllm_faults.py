"""Bad input against real vLLM servers: a server that cannot receive weights is one line and exit 2 before any
rollout (before any model loads, even), naming the flag to add; a server killed mid-run is retried, then the run
stops with one line naming the intact checkpoint."""

from __future__ import annotations

import pytest
from vllm_servers import SMALL, VLLMServer, save_tiny


def test_a_server_without_dev_mode_is_one_line_naming_the_flag_before_anything_runs(tmp_path, capsys):
    from gigpo.cli import main as cli_main

    srv = VLLMServer(save_tiny(tmp_path / "served", seed=1), tmp_path / "server.log", dev_mode=False).wait()
    try:
        run = tmp_path / "run"
        code = cli_main(["train", *SMALL, f"train.run_dir={run}", "rollout.engine=openai",
                         f"rollout.openai.urls={srv.url}", "rollout.openai.model=tiny"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1, err
        assert "VLLM_SERVER_DEV_MODE=1" in err[0] and srv.url in err[0] and "rollout.openai.urls" in err[0]
        assert not run.exists()  # refused before the run directory or the model
        # a LoRA learner asking for adapters from a server started without --enable-lora: the flags named
        code = cli_main(["train", *SMALL, f"train.run_dir={run}", "rollout.engine=openai",
                         f"rollout.openai.urls={srv.url}", "rollout.openai.model=tiny", "lora.enabled=true",
                         "rollout.openai.weight_sync=lora"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "--enable-lora --max-lora-rank" in err[0], err
    finally:
        srv.stop()


def test_a_server_killed_mid_run_is_retried_then_one_line_names_the_intact_checkpoint(tmp_path, capsys):
    from gigpo.cli import main as cli_main
    from gigpo.train import trainer as trainer_module
    from gigpo.train.rundir.checkpoint import list_checkpoints, verify_checkpoint

    srv = VLLMServer(save_tiny(tmp_path / "served", seed=1), tmp_path / "server.log").wait()
    save = trainer_module.Trainer.save

    def save_then_kill_the_server(self, it):
        path = save(self, it)
        srv.stop()  # after the first checkpoint: iteration 2's rollout finds nobody
        return path

    run = tmp_path / "run"
    mp = pytest.MonkeyPatch()
    mp.setattr(trainer_module.Trainer, "save", save_then_kill_the_server)
    try:
        code = cli_main(["train", *SMALL, f"train.run_dir={run}", "train.iterations=3", "train.checkpoint_every=1",
                         "rollout.engine=openai", f"rollout.openai.urls={srv.url}", "rollout.openai.model=tiny",
                         "rollout.openai.max_retries=2"])
    finally:
        mp.undo()
        srv.stop()
    err = [line for line in capsys.readouterr().err.strip().splitlines() if line.startswith("gigpo train:")]
    ckpts = list_checkpoints(run)
    assert code == 1 and len(err) == 1, err
    assert "gave up after 3 attempts" in err[0] and f"last checkpoint: {ckpts[-1]} (intact)" in err[0]
    assert [c.name for c in ckpts] == ["iter_000001"] and verify_checkpoint(ckpts[0]) is None
