"""train.loggers on the real packages, read back with their own clients: MLflow's tracking client over the local
file store, W&B's offline run file (its transaction log, parsed with wandb's own protobuf records), TensorBoard's
event reader. Each skips without its package, naming the extra."""

import importlib.util
import json
import struct
from pathlib import Path

import pytest

from gigpo.cli import main as cli_main
from gigpo.train.config import ConfigError, load_config
from gigpo.train.reporting.metrics import read_metrics
from gigpo.train.reporting.trackers import logger_names

INSTALLED = [n for n, mod in (("tensorboard", "tensorboard"), ("wandb", "wandb"), ("mlflow", "mlflow"))
             if importlib.util.find_spec(mod) is not None]


@pytest.fixture(scope="module")
def tracked_run(tmp_path_factory, ) -> Path:
    if not INSTALLED:
        pytest.skip("none of tensorboard, wandb ([wandb] extra), mlflow ([mlflow] extra) is installed")
    from tests.view.conftest import train_run

    mp = pytest.MonkeyPatch()
    for var in ("WANDB_API_KEY", "WANDB_MODE", "MLFLOW_TRACKING_URI"):  # the local stores, whatever the machine
        mp.delenv(var, raising=False)
    mp.setenv("NETRC", str(tmp_path_factory.mktemp("nonetrc") / "netrc"))  # no W&B login: offline
    run = tmp_path_factory.mktemp("tracked") / "run"
    try:
        train_run(run, f"train.loggers=[{','.join(INSTALLED)}]", "train.eval_episodes=2",
                  # every advantage 0 (nothing can be won): a no_signal alert at iteration 2 reaches the trackers
                  "env.max_steps=1", "env.shaping=0", "rollout.invalid_penalty=0", "train.health_no_signal_iterations=2")
    finally:
        mp.undo()
    return run


def success_by_iteration(run: Path) -> dict[int, float]:
    return {r["iteration"]: r["rollout/success_rate"] for r in read_metrics(run / "metrics.jsonl")
            if "rollout/success_rate" in r}


@pytest.mark.peers("mlflow")
def test_mlflow_client_reads_back_config_metrics_samples_alerts_and_curves(tracked_run):
    pytest.importorskip("mlflow", reason="needs the [mlflow] extra")
    import os

    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    ids = json.loads((tracked_run / "trackers.json").read_text())
    client = MlflowClient(tracking_uri=(tracked_run / "mlruns").resolve().as_uri())
    run = client.get_run(ids["mlflow"])
    assert run.info.status == "FINISHED"
    assert run.data.params["algorithm.name"] == "gigpo" and run.data.params["rollout.group_size"] == "4"
    hist = {m.step: m.value for m in client.get_metric_history(ids["mlflow"], "rollout/success_rate")}
    assert hist == success_by_iteration(tracked_run)
    assert [m.step for m in client.get_metric_history(ids["mlflow"], "health/alert_no_signal")] == [2]
    assert any(k.startswith("health.no_signal") for k in run.data.tags)
    arts = {a.path for a in client.list_artifacts(ids["mlflow"])}
    assert {"config.yaml", "curves.png", "samples"} <= arts
    assert {a.path for a in client.list_artifacts(ids["mlflow"], "samples")} == {
        "samples/iter_000001.jsonl", "samples/iter_000002.jsonl", "samples/iter_000003.jsonl"}


def wandb_records(path: Path):
    """The records of a W&B transaction log (.wandb): a 7-byte header (":W&B", magic, version), then LevelDB-log
    chunks (crc32c, length, type) in 32 KiB blocks, each record a serialised wandb_internal_pb2.Record."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, buf = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):  # FULL or LAST
            rec = pb.Record()
            rec.ParseFromString(buf)
            yield rec


@pytest.mark.peers("wandb")
def test_wandb_offline_run_file_holds_config_every_metric_tables_and_alerts(tracked_run):
    pytest.importorskip("wandb", reason="needs the [wandb] extra")
    ids = json.loads((tracked_run / "trackers.json").read_text())
    files = list((tracked_run / "wandb").glob(f"offline-run-*-{ids['wandb']}/run-{ids['wandb']}.wandb"))
    assert len(files) == 1
    config, history = {}, []
    for rec in wandb_records(files[0]):
        kind = rec.WhichOneof("record_type")
        if kind in ("run", "config"):  # the config arrives with the run record (and any later updates)
            cfg = rec.run.config if kind == "run" else rec.config
            config.update({u.key: json.loads(u.value_json) for u in cfg.update})
        elif kind == "history":
            history.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in rec.history.item})
    assert config["algorithm"]["name"] == "gigpo" and config["rollout"]["group_size"] == 4
    logged = {int(h["iteration"]): h["rollout/success_rate"] for h in history if "rollout/success_rate" in h}
    assert logged == success_by_iteration(tracked_run)
    assert [int(h["iteration"]) for h in history if "health/alert_no_signal" in h] == [2]
    # media are flattened into the record ("samples/_type", ...) and written beside it under files/media
    tables = [h for h in history if "samples/_type" in h]
    assert [int(h["iteration"]) for h in tables] == [1, 2, 3] and tables[0]["samples/_type"] == "table-file"
    assert any(h.get("curves/_type") == "image-file" for h in history)
    media = list(files[0].parent.glob("files/media/table/samples_*.table.json"))
    table = json.loads(media[0].read_text())
    assert table["columns"][:4] == ["iteration", "group", "traj", "t"] and table["data"]


@pytest.mark.peers("tensorboard")
def test_tensorboard_events_hold_every_metric(tracked_run):
    pytest.importorskip("tensorboard", reason="needs tensorboard (pip install tensorboard)")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tracked_run / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    got = {e.step: e.value for e in acc.Scalars("rollout/success_rate")}
    assert got == pytest.approx(success_by_iteration(tracked_run))
    assert [e.step for e in acc.Scalars("health/alert_no_signal")] == [2]


def test_logger_names_and_the_tensorboard_alias():
    cfg = load_config(None, ["train.loggers=wandb, mlflow", "train.tensorboard=true"]) if set(INSTALLED) >= {
        "wandb", "mlflow", "tensorboard"} else None
    if cfg is not None:
        assert logger_names(cfg) == ["wandb", "mlflow", "tensorboard"]
    with pytest.raises(ConfigError, match="'comet' is not one of tensorboard, wandb, mlflow"):
        load_config(None, ["train.loggers=[comet]"])


def test_a_tracker_that_is_not_installed_is_one_line_naming_the_extra(monkeypatch, capsys, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    assert cli_main(["train", "train.loggers=[wandb]", f"train.run_dir={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "gigpo train: error: train.loggers: wandb is not installed (pip install 'gigpo[wandb]')"
    assert not (tmp_path / "r").exists()  # refused before the run directory or the model


@pytest.mark.peers("mlflow")
def test_a_resume_continues_the_same_mlflow_run(tmp_path, monkeypatch):
    pytest.importorskip("mlflow", reason="needs the [mlflow] extra")
    from mlflow.tracking import MlflowClient
    from tests.view.conftest import train_run

    from gigpo.train.trainer import Trainer

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run = train_run(tmp_path / "run", "train.loggers=[mlflow]", "train.iterations=2", "train.eval_episodes=0")
    first = json.loads((run / "trackers.json").read_text())["mlflow"]
    Trainer.resume(run, {"train.iterations": 3}).train()
    assert json.loads((run / "trackers.json").read_text())["mlflow"] == first
    client = MlflowClient(tracking_uri=(run / "mlruns").resolve().as_uri())
    assert [m.step for m in client.get_metric_history(first, "rollout/success_rate")] == [1, 2, 3]
    assert client.get_run(first).info.status == "FINISHED"
    assert len(client.search_runs([client.get_run(first).info.experiment_id])) == 1
