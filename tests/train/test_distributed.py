"""Data-parallel training under torchrun (2 gloo ranks, tiny model): exact parity with one process for DDP and
FSDP2, resume of a 2-rank run, 1-process eval of its checkpoint, a failing rank, and the sharding rules."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from gigpo.cli import main as cli_main
from gigpo.train.config import load_config
from gigpo.train.parallel import distributed
from gigpo.train.trainer import Trainer

safetensors = pytest.importorskip("safetensors.torch")

SMALL = [
    "model.tiny={english_words: false, hidden_size: 32, intermediate_size: 64}",
    "optim.lr_schedule=constant", "optim.lr=0.01",
    "env.size=3", "env.max_steps=4",
    "rollout.groups=4", "rollout.group_size=3",
    # several ranks forward every row whole (optim.shared_prefix is off under DDP/FSDP): so does the reference,
    # whose shared passes would differ from the ranks' by float rounding (~1e-5 after two AdamW steps at lr 0.01)
    "optim.shared_prefix=off",
    # up to 16 tokens: an EOS now and then makes response lengths differ, so token-mean ≠ seq-mean-token-mean
    "rollout.max_response_tokens=16",
    # two mini-batches of two epochs, micro-batches smaller than a rank's part: the accumulation is exercised
    "optim.micro_batch_size=4", "optim.mini_batches=2", "optim.ppo_epochs=2",
    "train.eval_episodes=0", "train.progress=false", "train.threads=1", "train.checkpoint_every=1",
    "train.keep_checkpoints=3",
    "train.dist_timeout_s=60",
]
AGGS = ("token-mean", "seq-mean-token-mean")
ENGINES = ("ddp", "fsdp")
WORKER = Path(__file__).with_name("distributed_worker.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(args: list[str], timeout: float = 240, env: dict | None = None) -> subprocess.CompletedProcess:
    """``torchrun --nproc_per_node 2`` on 127.0.0.1 with a free port; ``args`` follow torchrun's own."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
           "--master_port", str(_free_port()), *args]
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env)


def _weights(run: Path, it: int) -> dict[str, torch.Tensor]:
    return safetensors.load_file(str(run / "checkpoints" / f"iter_{it:06d}" / "model" / "model.safetensors"))


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def _one_process(run: Path, *extra: str) -> None:
    """The reference: one process collecting the same 2 rollout shards the 2 ranks collect."""
    cfg = load_config(None, [*SMALL, "train.rollout_shards=2", f"train.run_dir={run}", *extra])
    distributed.init(cfg)
    try:
        Trainer(cfg).train()
    finally:
        distributed.shutdown()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every (engine, loss_agg) pair trained 2 iterations by 2 ranks in one torchrun job, plus the references."""
    root = tmp_path_factory.mktemp("ddp")
    args = [str(WORKER)]
    for engine in ENGINES:
        for agg in AGGS:
            args += ["+run", *SMALL, "train.iterations=2", f"train.parallel={engine}", f"optim.loss_agg={agg}",
                     f"train.run_dir={root / f'{engine}-{agg}'}"]
    proc = _torchrun(args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    # token-mean: 3 iterations, the third the reference of the resume tests, with a final greedy evaluation
    # (evaluation reseeds nothing the iterations draw: iterations 1 and 2 are those of a run without it)
    _one_process(root / "ref-token-mean", "train.iterations=3", "train.eval_episodes=5")
    _one_process(root / "ref-seq-mean-token-mean", "train.iterations=2", "optim.loss_agg=seq-mean-token-mean")
    return root


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("agg", AGGS)
def test_two_ranks_equal_one_process(runs, engine, agg):
    for it in (1, 2):
        ref, par = _weights(runs / f"ref-{agg}", it), _weights(runs / f"{engine}-{agg}", it)
        diff = _max_diff(ref, par)
        print(f"{engine} {agg} iteration {it}: max |θ_2ranks − θ_1process| = {diff:.3g}")
        assert diff <= 1e-5
    # the comparison means something: each iteration moved the weights far more than the tolerance
    moved = _max_diff(_weights(runs / f"ref-{agg}", 1), _weights(runs / f"ref-{agg}", 2))
    assert moved > 1e-3, moved


@pytest.mark.slow
def test_the_two_aggregations_train_differently(runs):
    """Otherwise the seq-mean-token-mean parity would only repeat the token-mean one."""
    diff = _max_diff(_weights(runs / "ref-token-mean", 2), _weights(runs / "ref-seq-mean-token-mean", 2))
    assert diff > 1e-4, diff


@pytest.fixture(scope="module")
def resumed(runs):
    """The 2-iteration DDP and FSDP token-mean runs resumed by 2 ranks to iteration 3, in one job; the final
    evaluation (greedy, 5 episodes) runs split 3 + 2 over the ranks and is gathered."""
    args = [str(WORKER)]
    for engine in ENGINES:
        args += ["+resume", str(runs / f"{engine}-token-mean"), "train.iterations=3", "train.eval_episodes=5"]
    proc = _torchrun(args)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_resumed_two_rank_run_continues_like_one_process_and_evaluates_in_one(resumed, engine, capsys):
    run, ref3 = resumed / f"{engine}-token-mean", resumed / "ref-token-mean"
    diff = _max_diff(_weights(ref3, 3), _weights(run, 3))
    with capsys.disabled():
        print(f"{engine} resumed by 2 ranks vs 1 process, iteration 3: max abs diff {diff:.3g}")
    assert diff <= 1e-5
    rows = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines() if ln.strip()]
    assert [r["iteration"] for r in rows] == [1, 2, 3]  # rank 0 alone wrote the metrics, once per iteration
    ref = json.loads((ref3 / "metrics.jsonl").read_text().splitlines()[-1])
    for key in ("eval/success_rate", "eval/episode_return", "eval/valid_action_rate"):  # gathered over ranks
        assert rows[-1][key] == pytest.approx(ref[key], abs=1e-9), key
    # the checkpoint of a 2-rank run (FSDP: gathered on save) is a plain one: `gigpo eval` in one process
    assert cli_main(["eval", "--checkpoint", str(run), "--episodes", "2"]) == 0
    assert "success_rate" in capsys.readouterr().out


FAULTY_ENV = """
import os, time
from gigpo.envs import register
from gigpo.envs.gridgoal import GridGoalEnv

class RankOneFails(GridGoalEnv):
    def reset(self, seed):
        if os.environ.get("RANK") == "1":
            with open(os.environ["FAIL_STAMP"], "a") as f:  # when the failure happened
                f.write(f"{time.time()}\\n")
            raise RuntimeError("rank 1's env is broken")
        return super().reset(seed)

register("rank-one-fails", RankOneFails, "gridgoal whose resets fail on rank 1")
"""


@pytest.mark.slow
def test_a_failing_rank_ends_the_job_quickly(tmp_path):
    (tmp_path / "rank_one_fails.py").write_text(textwrap.dedent(FAULTY_ENV))
    stamp = tmp_path / "failed_at"
    proc = _torchrun(["-m", "gigpo", "train", "--import", "rank_one_fails", *SMALL, "env.name=rank-one-fails",
                      "train.iterations=3", "train.max_failed_iterations=1", f"train.run_dir={tmp_path / 'run'}"],
                     timeout=120, env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                                       "FAIL_STAMP": str(stamp)})
    took = time.time() - float(stamp.read_text().split()[0])
    out = proc.stdout + proc.stderr
    print(f"job with a failing rank exited {proc.returncode}, {took:.1f} s after rank 1's first failure")
    assert proc.returncode != 0
    assert out.count("every trajectory failed") == 1, out[-4000:]  # rank 1's error, once
    # rank 0 sees the dead peer in its next collective (or torchrun's SIGTERM first): one line, no traceback
    assert ("rank 0: stopped, another rank failed" in out or "interrupted at iteration" in out), out[-4000:]
    assert "[rank0]:" not in out and "[rank1]:" not in out, out[-4000:]  # no worker traceback (torchrun's own ok)
    assert took < 30


LEAVER = """
import sys, time
from gigpo.train.config import load_config
from gigpo.train.parallel import distributed

ctx = distributed.init(load_config(None, ["train.dist_timeout_s=60"]))
if ctx.rank == 1:  # this rank's run failed: it leaves at once, without the final barrier
    distributed.shutdown(synchronize=False)
    sys.exit(0)
time.sleep(1)  # rank 0 ended well, its last files written after the peer has gone
t = time.time()
distributed.shutdown(synchronize=True)
print(f"rank 0 left after {time.time() - t:.1f} s")
"""


def test_the_final_barrier_does_not_wait_for_a_peer_that_left(tmp_path):
    """shutdown(synchronize=True) waits for the peers at a barrier; one that already left ends the wait at once
    (gloo sees the closed connection), with a warning instead of an error or the dist_timeout_s wait."""
    script = tmp_path / "leaver.py"
    script.write_text(textwrap.dedent(LEAVER))
    proc = _torchrun([str(script)], timeout=90)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "leaving the process group without the final barrier" in out, out[-4000:]
    left_after = float(out.split("rank 0 left after ")[1].split(" s")[0])
    assert left_after < 30, out[-4000:]


def test_more_ranks_than_groups_is_a_config_error(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "0")
    assert cli_main(["train", *SMALL, "rollout.groups=2", f"train.run_dir={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err
    assert "4 ranks (WORLD_SIZE) but rollout.groups=2" in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()  # refused before any model load or run directory
    monkeypatch.setenv("RANK", "3")  # every rank meets the error; only rank 0 prints it
    assert cli_main(["train", *SMALL, "rollout.groups=2"]) == 2
    assert capsys.readouterr().err == ""


def test_shards_and_ranks():
    assert distributed.world_from_env({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"}) == (1, 2, 1)
    assert distributed.world_from_env({}) == (0, 1, 0)
    with pytest.raises(ValueError, match="RANK"):
        distributed.world_from_env({"RANK": "2", "WORLD_SIZE": "2"})
    assert distributed.resolve_parallel("auto", 2) == "ddp" and distributed.resolve_parallel("fsdp", 1) == "none"
    assert [(s.start, s.stop) for s in distributed.shard_slices(5, 2)] == [(0, 3), (3, 5)]
    assert distributed.shards_of_rank(4, 2, 1) == [2, 3]


def test_minibatch_partition_union_is_the_one_process_partition():
    """Ranks holding shards {0} and {1} hold complementary halves of the same global mini-batches."""
    row_shard = np.array([0] * 7 + [1] * 5)
    rows = list(range(12))
    whole = distributed.minibatch_partition(row_shard, rows, 2, 3, 4, epochs=2, mini_batches=3)
    # rank 1's local batch: its rows renumbered from 0
    r0 = distributed.minibatch_partition(row_shard[:7], rows[:7], 2, 3, 4, epochs=2, mini_batches=3)
    r1 = distributed.minibatch_partition(np.ones(5, dtype=np.int64), list(range(5)), 2, 3, 4, epochs=2,
                                         mini_batches=3)
    for e in range(2):
        for j in range(3):
            assert sorted(whole[e][j]) == sorted(r0[e][j] + [7 + r for r in r1[e][j]])
        assert sorted(sum(whole[e], [])) == rows
    assert whole[0] != whole[1]  # a fresh order per epoch
    # one shard: the single-process order of earlier versions (one permutation of all rows per epoch)
    gen = np.random.default_rng([3, 4, 4])
    perm = np.asarray(rows)[gen.permutation(12)]
    assert distributed.minibatch_partition(np.zeros(12, dtype=np.int64), rows, 1, 3, 4, 1, 3)[0] == [
        p.tolist() for p in np.array_split(perm, 3)]
