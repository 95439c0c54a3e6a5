"""Checkpoints under attack and failure: crafted pickles, truncated files, bad manifests, a full disk, stale tmp
folders, keep-last-k. One tiny 2-iteration run is trained once per module; each test works on a copy."""

import errno
import json
import logging
import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from small_run import SMALL

from gigpo.cli import main as cli_main
from gigpo.train.config import load_config
from gigpo.train.rundir import plan_resume
from gigpo.train.rundir.checkpoint import (
    STATE_FILE,
    CheckpointError,
    NoCheckpointError,
    checkpoint_dir,
    list_checkpoints,
    load_rng_state,
    prune_checkpoints,
    restore_rng,
    rng_state,
    verify_checkpoint,
    write_manifest,
)
from gigpo.train.trainer import Trainer


@pytest.fixture(scope="module")
def base_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("base") / "run"
    cfg = load_config(None, SMALL + [f"train.run_dir={run}", "train.iterations=2", "train.checkpoint_every=1",
                                     "train.keep_checkpoints=2"])
    Trainer(cfg).train()
    assert [c.name for c in list_checkpoints(run)] == ["iter_000001", "iter_000002"]
    return run


class _RunsCode:
    """Unpickling this runs ``touch MARKER``: what a hostile run directory would ship."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_crafted_optimizer_pickle_is_refused_and_never_runs(run, tmp_path, capsys):
    ckpt = checkpoint_dir(run, 2)
    marker = tmp_path / "pwned"
    torch.save({"state": _RunsCode(marker), "param_groups": []}, ckpt / "optimizer.pt")
    write_manifest(ckpt)  # an attacker rewrites the manifest too: the format itself must refuse
    assert verify_checkpoint(ckpt) is None
    assert cli_main(["train", "--resume", str(run), "train.iterations=3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gigpo train: error: refusing to load") and "optimizer.pt" in err
    assert "could run code" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(CheckpointError, match="refusing to load"):
        Trainer.resume(run, {"train.iterations": 3})
    assert not marker.exists()
    # the file really is hostile: the old loader (weights_only=False) would have run it
    proof = tmp_path / "proof"
    torch.save(_RunsCode(proof), tmp_path / "proof.pt")
    torch.load(tmp_path / "proof.pt", weights_only=False)
    assert proof.exists()


def test_old_format_checkpoint_with_pickled_rng_is_skipped_not_loaded(run, tmp_path):
    marker = tmp_path / "pwned"
    for it in (1, 2):  # what the previous gigpo wrote: rng.pt (a pickle), no manifest
        ckpt = checkpoint_dir(run, it)
        (ckpt / "manifest.json").unlink()
        (ckpt / "rng.json").unlink()
        torch.save({"torch": _RunsCode(marker)}, ckpt / "rng.pt")
    with pytest.raises(NoCheckpointError, match="older gigpo .checkpoint format 1.") as e:
        plan_resume(run, {"train.iterations": 3})
    assert "iter_000002" in str(e.value) and "iter_000001" in str(e.value)
    assert not marker.exists()


def test_truncated_newest_checkpoint_falls_back_to_the_previous(run, caplog):
    weights = checkpoint_dir(run, 2) / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with caplog.at_level(logging.WARNING, logger="gigpo.train.rundir"):
        trainer = Trainer.resume(run, {"train.iterations": 3})
    assert trainer.start_iteration == 1 and trainer.resumed_from == checkpoint_dir(run, 1)
    assert "skipping checkpoint" in caplog.text and "iter_000002" in caplog.text
    assert "model/model.safetensors is truncated" in caplog.text
    # the broken one is kept for inspection but no longer shadows the good ones (eval, keep-last-k)
    assert (run / "checkpoints" / "skipped-iter_000002").is_dir()
    assert [c.name for c in list_checkpoints(run)] == ["iter_000001"]
    trainer.train()
    rows = [json.loads(ln)["iteration"] for ln in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows == [1, 2, 3]  # iteration 2 recomputed once, not duplicated
    assert [c.name for c in list_checkpoints(run)] == ["iter_000002", "iter_000003"]


@pytest.mark.parametrize("damage", ["missing", "not json", "wrong sha"])
def test_bad_manifest_is_skipped_with_the_reason(run, damage, caplog):
    ckpt = checkpoint_dir(run, 2)
    manifest = ckpt / "manifest.json"
    if damage == "missing":
        manifest.unlink()
    elif damage == "not json":
        manifest.write_text('{"format": 2, "files": {')
    else:
        data = json.loads(manifest.read_text())
        data["files"]["rng.json"]["sha256"] = "0" * 64
        manifest.write_text(json.dumps(data))
    want = {"missing": "no manifest.json", "not json": "manifest.json is unreadable",
            "wrong sha": "rng.json is corrupt"}[damage]
    assert want in verify_checkpoint(ckpt)
    with caplog.at_level(logging.WARNING, logger="gigpo.train.rundir"):
        plan = plan_resume(run, {"train.iterations": 3})
    assert plan.checkpoint == checkpoint_dir(run, 1) and plan.iteration == 1
    assert want in caplog.text


def test_unlisted_or_pickle_files_fail_verification(run):
    ckpt = checkpoint_dir(run, 2)
    (ckpt / "model" / "pytorch_model.bin").write_bytes(b"x")
    assert "pytorch_model.bin is not in the manifest" in verify_checkpoint(ckpt)
    write_manifest(ckpt)  # even when listed: transformers would unpickle it
    assert "pickle-format file" in verify_checkpoint(ckpt)


@pytest.mark.parametrize("where", ["model", "optimizer.pt"])
def test_full_disk_during_save_is_a_clear_error_and_keeps_the_previous(run, where, monkeypatch, capsys):
    import gigpo.train.rundir.checkpoint as ck

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    if where == "model":
        monkeypatch.setattr("gigpo.models.save_pretrained", full)
    else:
        real = ck._write_bytes
        monkeypatch.setattr(ck, "_write_bytes", lambda p, d: full() if p.name == where else real(p, d))
    assert cli_main(["train", "--resume", str(run), "train.iterations=3"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("gigpo train: error: cannot save checkpoint") and str(checkpoint_dir(run, 3)) in err
    assert "no space left on device" in err and " free on " in err and "iter_000002 is intact" in err
    assert not list((run / "checkpoints").glob(".tmp-*"))
    assert [c.name for c in list_checkpoints(run)] == ["iter_000001", "iter_000002"]
    assert verify_checkpoint(checkpoint_dir(run, 2)) is None
    monkeypatch.undo()  # space freed: the resume works from the intact checkpoint
    assert plan_resume(run, {"train.iterations": 3}).iteration == 2


def test_stale_tmp_folders_are_removed_at_resume_and_at_save(run):
    stale = run / "checkpoints" / ".tmp-iter_000003-99999"
    (stale / "model").mkdir(parents=True)
    (stale / "model" / "model.safetensors").write_bytes(b"half")
    trainer = Trainer.resume(run, {"train.iterations": 3})
    assert not stale.exists()
    (stale / "model").mkdir(parents=True)
    trainer.save(2)
    assert not stale.exists() and verify_checkpoint(checkpoint_dir(run, 2)) is None
    trainer.collector.close()
    trainer.eval_collector.close()


def _fake_ckpt(run: Path, it: int, run_id: str) -> Path:
    p = checkpoint_dir(run, it)
    p.mkdir(parents=True)
    (p / STATE_FILE).write_text(json.dumps({"iteration": it, "run_id": run_id}))
    return p


def test_keep_last_k_deletes_only_this_runs_older_checkpoints(tmp_path):
    foreign = _fake_ckpt(tmp_path, 1, "other-run")
    old = [_fake_ckpt(tmp_path, it, "me") for it in (2, 3)]
    newest = _fake_ckpt(tmp_path, 4, "me")
    later = _fake_ckpt(tmp_path, 9, "me")  # left from before a fallback resume: overwritten when reached
    assert prune_checkpoints(tmp_path, 1, "me", newest) == old
    assert [c.name for c in list_checkpoints(tmp_path)] == [foreign.name, newest.name, later.name]
    assert prune_checkpoints(tmp_path, 1, None, newest) == []  # unknown run: delete nothing


def test_rng_state_round_trips_through_json(tmp_path):
    state = json.loads(json.dumps(rng_state()))
    want = (torch.rand(3), np.random.rand(3), random.random())
    for _ in range(5):
        torch.rand(1), np.random.rand(), random.random()
    restore_rng(state)
    got = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(want[0], got[0]) and np.array_equal(want[1], got[1]) and want[2] == got[2]
    (tmp_path / "rng.json").write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="not an RNG state"):
        load_rng_state(tmp_path)


def test_eval_and_serve_load_only_a_verified_checkpoint(run):
    """`gigpo eval --checkpoint RUN` / `gigpo serve RUN` locate the model the way resume does: a truncated newest
    checkpoint is skipped with a warning, and a damaged checkpoint named directly is an error, never loaded."""
    from gigpo.train.evaluate import locate_checkpoint

    weights = checkpoint_dir(run, 2) / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.warns(UserWarning, match="iter_000002.*truncated"):
        model_dir, cfg = locate_checkpoint(run)
    assert model_dir == checkpoint_dir(run, 1) / "model" and cfg is not None
    with pytest.raises(FileNotFoundError, match="damaged.*truncated"):
        locate_checkpoint(checkpoint_dir(run, 2))
    assert locate_checkpoint(checkpoint_dir(run, 1))[0] == checkpoint_dir(run, 1) / "model"
