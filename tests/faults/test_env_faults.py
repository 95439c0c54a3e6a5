"""Env faults never stop or hang a run: one misbehaving env per case, each failing only its own trajectories.

The envs are registered here (``gigpo.envs.registry.register``) and driven by a scripted engine (no model), so
each case costs milliseconds, or ~2 × ``env_timeout_s`` for the hangs. Heavy imports (torch, via the collector)
stay inside functions: the process-mode tests unpickle ``FaultyEnv`` in fresh worker processes, which import
this module.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass

import numpy as np
import pytest

from gigpo.envs import make, register
from gigpo.envs.base import Env

#: Set at teardown so the threads abandoned by the inline hang cases return and exit.
RELEASE = threading.Event()
BAD_SEED = 1


class FaultyEnv(Env):
    """Three-step episodes, reward 1 for action "a" and 0 otherwise — unless ``seed == bad_seed`` (every seed
    when ``bad_seed`` is None): then ``case`` goes wrong, in reset (``reset-*``) or at the ``at``-th step."""

    instructions = "say a"
    max_steps = 10
    built = 0  # instances ever constructed (in this process): proves that faulted instances are replaced

    def __init__(self, *, case: str = "none", at: int = 1, bad_seed: int = BAD_SEED):
        FaultyEnv.built += 1
        self.case, self.at, self.bad_seed = case, at, bad_seed

    def reset(self, seed):
        self.t, self.bad = 0, self.bad_seed is None or seed == self.bad_seed
        if self.bad and self.case == "reset-blocks":
            RELEASE.wait()
        if self.bad and self.case == "reset-raises":
            raise RuntimeError("reset exploded")
        return f"start {seed}", {"task": "t", "state_key": (seed, 0), "admissible_actions": None}

    def step(self, action):
        self.t += 1
        obs, reward, done = f"t={self.t}", float(action == "a"), self.t >= 3
        info = {"won": done, "action_valid": True, "state_key": self.t}
        if self.bad and self.t == self.at:
            c = self.case
            if c == "step-blocks":
                RELEASE.wait()
            elif c == "step-spins":  # never returns, and waits on nothing a test could release: only a kill ends it
                while True:
                    time.sleep(0.05)
            elif c == "step-raises":
                raise ValueError("step exploded")
            elif c == "step-exits":
                import os

                os._exit(3)
            elif c == "nan-reward":
                reward = float("nan")
            elif c == "inf-reward":
                reward = np.float32("inf")
            elif c == "str-reward":
                reward = "1.0"
            elif c == "info-none":
                info = None
            elif c == "info-list":
                info = [("won", True)]
            elif c == "obs-bytes":
                obs = b"t=1"
        return obs, reward, done, info


CASES = {  # case -> what the trajectory's error must say
    "step-blocks": "timeout: did not return within 0.5 s",
    "reset-blocks": "timeout: did not return within 0.5 s",
    "step-raises": "error: ValueError: step exploded",
    "reset-raises": "error: RuntimeError: reset exploded",
    "nan-reward": "invalid: reward is nan",
    "inf-reward": "invalid: reward is inf",
    "str-reward": "reward must be a real number, got str '1.0'",
    "info-none": "info must be a dict, got NoneType None",
    "info-list": "info must be a dict, got list",
    "obs-bytes": "observation must be a str, got bytes",
}
for _case in [*CASES, "step-spins", "step-exits", "none"]:
    register(f"fault-{_case}", FaultyEnv, "a misbehaving test env", case=_case)


@pytest.fixture(scope="module", autouse=True)
def _release_abandoned_threads():
    yield
    RELEASE.set()


@dataclass
class _Gen:
    token_ids: list
    logprobs: list
    text: str


class ScriptedEngine:
    """Alternates the responses "a" / "b" across the prompts of a turn (returns then differ within a group)."""

    def generate(self, prompts, *, max_new_tokens, temperature, top_p):
        return [_Gen([5], [-0.5], "ab"[i % 2]) for i in range(len(prompts))]


def _collector(env_name: str, **kw):
    from gigpo.agent.prompt import PromptBuilder
    from gigpo.models.tokenizer import tiny_tokenizer
    from gigpo.rollout import Collector

    pb = PromptBuilder(tiny_tokenizer(english=False), 256, include_instructions=False)
    factory = kw.pop("factory", None) or (lambda: make(env_name))
    return Collector(factory, ScriptedEngine(), pb, max_response_tokens=1, env_name=env_name,
                     env_timeout_s=kw.pop("env_timeout_s", 0.5), **kw)


@pytest.mark.parametrize("case", list(CASES))
def test_fault_fails_only_its_trajectories_and_is_replaced(case, caplog):
    col = _collector(f"fault-{case}")
    at = "reset" if case.startswith("reset") else "step 0"
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING):
        batch = col.collect([BAD_SEED, 7], group_size=2)  # group 0 misbehaves (both envs), group 1 is healthy
    assert time.monotonic() - t0 < 5.0  # two 0.5 s timeouts at most
    bad = [t for t in batch.trajectories if t.group_id == 0]
    good = [t for t in batch.trajectories if t.group_id == 1]
    assert all(t.failed and CASES[case] in t.error for t in bad), [t.error for t in bad]
    assert not any(t.failed for t in good) and all(t.won and t.length == 3 for t in good)
    assert set(batch.group_id) == {1} and len(batch) == 6  # failed rows never reach training
    assert all(math.isfinite(r) for r in batch.reward)
    s = batch.summary()
    assert s["failed_trajectories"] == 2 and s["success_rate"] == 1.0 and s["episode_length"] == 3.0
    # one warning per failure, naming env, step, seed and error
    lines = [r.getMessage() for r in caplog.records if "trajectory dropped" in r.getMessage()]
    assert len(lines) == 2
    assert all(f"env 'fault-{case}' failed at {at} (seed {BAD_SEED}," in ln and CASES[case] in ln for ln in lines)
    # the faulted instances were discarded: the next collection builds two fresh ones and runs normally
    built = FaultyEnv.built
    again = col.collect([7, 8], group_size=2)
    assert FaultyEnv.built == built + 2
    assert not any(t.failed for t in again.trajectories) and len(again) == 12
    col.close()


def test_healthy_envs_are_reused_not_rebuilt():
    col = _collector("fault-none")
    col.collect([3, 4], group_size=2)
    built = FaultyEnv.built
    batch = col.collect([5, 6], group_size=2)
    assert FaultyEnv.built == built and not any(t.failed for t in batch.trajectories)
    col.close()


def test_process_workers_kill_a_hung_env_and_survive_a_dead_one():
    """Process mode: a spinning step (which a thread could never stop) and a step that kills its own process."""
    from gigpo.envs.guard import registered_factory

    col = _collector("fault-step-spins", env_workers="process", env_timeout_s=1.0,
                     factory=registered_factory("fault-step-spins"))
    procs = lambda: [h._backend.process for h in col._pool if h is not None]  # noqa: E731
    col.collect([2, 3], group_size=2)  # starts the 4 workers (spawn + import) outside the timed part
    workers = procs()
    t0 = time.monotonic()
    batch = col.collect([BAD_SEED, 2], group_size=2)
    assert time.monotonic() - t0 < 6.0  # the two hung steps run concurrently: one timeout, not two
    assert [t.failed for t in batch.trajectories] == [True, True, False, False]
    assert "its worker process was killed" in batch.trajectories[0].error
    assert not workers[0].is_alive() and not workers[1].is_alive()  # killed, nothing left spinning
    assert workers[2].is_alive() and workers[3].is_alive() and procs() == workers[2:]  # healthy ones kept
    col.close()
    assert not any(p.is_alive() for p in workers)

    col = _collector("fault-step-exits", env_workers="process", factory=registered_factory("fault-step-exits"),
                     env_timeout_s=30.0)
    batch = col.collect([BAD_SEED, 2], group_size=1)
    assert batch.trajectories[0].failed and "worker process died (exit code 3)" in batch.trajectories[0].error
    assert not batch.trajectories[1].failed and batch.trajectories[1].won
    col.close()


def test_process_workers_need_a_picklable_factory():
    with pytest.raises(ValueError, match="picklable env factory"):
        _collector("fault-none", env_workers="process")  # a lambda


def test_contract_checks_accept_numpy_and_refuse_lookalikes():
    from gigpo.envs.guard import EnvFault, check_reset, check_step

    obs, r, done, info = check_step(("o", np.float32(0.5), np.bool_(True), {}))
    assert (r, done) == (0.5, True) and type(r) is float and type(done) is bool
    assert check_step(("o", 1, 0, {"score": np.float64(1.0)}))[1:3] == (1.0, False)
    for bad in [("o", 0.0, "False", {}), ("o", 0.0, 0.5, {}), ("o", 0.0, 2, {}), ("o", 0.0, False),
                ("o", 0.0, False, {"score": float("nan")}), ("o", 0.0, False, {"admissible_actions": "up"}),
                ("o", None, False, {})]:
        with pytest.raises(EnvFault):
            check_step(bad)
    for bad in ["o", ("o", None), (1, {}), ("o", {}, 1)]:
        with pytest.raises(EnvFault):
            check_reset(bad)


def test_dynamic_sampling_keeps_only_surviving_informative_groups():
    from gigpo.train.collect.dynamic_sampling import collect_shards, round_seeds
    from gigpo.train.config import Config

    cfg = Config()
    cfg.env.name = "fault-step-raises"
    cfg.rollout.groups, cfg.rollout.group_size, cfg.rollout.dapo.max_rounds = 3, 2, 2
    cfg.rollout.dapo.dynamic_sampling = True
    # the env fails on round 0's first task seed; "a"/"b" alternate, so the other groups are informative
    seeds0 = round_seeds(cfg.train.seed, 1, 0, 3)
    col = _collector("fault-step-raises", factory=lambda: FaultyEnv(case="step-raises", bad_seed=seeds0[0]))
    got = collect_shards(col, cfg, 1, [0], 1)
    batch, stats = got.batch, got.stats
    assert stats["failed_trajectories"] == 2.0 and stats["kept_groups"] == 3.0 and stats["rounds"] == 2.0
    assert len(set(batch.group_id)) == 3 and len(batch) == 3 * 2 * 3
    assert all(not t.failed for t in batch.trajectories if t.group_id in set(batch.group_id))
    col.close()


def test_all_failed_iterations_stop_the_trainer_and_the_cli_exits_1(tmp_path, capsys):
    from gigpo.cli import main as cli_main
    from gigpo.train.collect.dynamic_sampling import RunFailed
    from gigpo.train.config import load_config
    from gigpo.train.reporting.metrics import read_metrics
    from gigpo.train.trainer import Trainer

    small = ["model.tiny={english_words: false, hidden_size: 16, intermediate_size: 32}",
             "rollout.groups=2", "rollout.group_size=2", "train.eval_episodes=0", "train.progress=false",
             "train.iterations=5", "train.max_failed_iterations=2"]
    register("fault-always", FaultyEnv, "fails every reset", case="reset-raises", bad_seed=None)
    cfg = load_config(None, [*small, "env.name=fault-always", f"train.run_dir={tmp_path / 'lib'}"])
    with pytest.raises(RunFailed, match=r"every trajectory failed in 2 consecutive iteration\(s\) \(through "
                                        r"iteration 2.*reset exploded"):
        Trainer(cfg).train()
    rows = read_metrics(tmp_path / "lib" / "metrics.jsonl")  # iteration 1 failed entirely, yet ran and logged
    assert [r["iteration"] for r in rows] == [1] and rows[0]["rollout/failed_trajectories"] == 4.0
    cli = [a for a in small if not a.startswith("env.")] + ["env.name=fault-always", f"train.run_dir={tmp_path / 'cli'}"]
    assert cli_main(["train", *cli]) == 1
    assert "gigpo train: error: every trajectory failed in 2 consecutive" in capsys.readouterr().err


def test_a_short_run_that_never_trains_fails_too(tmp_path):
    from gigpo.train.collect.dynamic_sampling import RunFailed, collect_shards
    from gigpo.train.config import Config

    cfg = Config()
    cfg.rollout.groups, cfg.rollout.group_size = 1, 2
    cfg.train.iterations, cfg.train.max_failed_iterations = 2, 3
    col = _collector("fault-reset-raises", factory=lambda: FaultyEnv(case="reset-raises", bad_seed=None))
    collect_shards(col, cfg, 1, [0], 1)  # all failed, streak 1 of 3: the run goes on
    with pytest.raises(RunFailed, match="every trajectory failed in 2 consecutive"):
        collect_shards(col, cfg, 2, [0], 1)  # the last iteration, and none ever kept a trajectory
    col.close()


def test_guarded_env_raises_env_fault_and_restarts_on_reset():
    import functools

    from gigpo.envs.guard import EnvFault, GuardedEnv

    env = GuardedEnv(functools.partial(FaultyEnv, case="nan-reward"), timeout_s=5.0)
    assert env.reset(BAD_SEED)[0] == f"start {BAD_SEED}" and env.instructions == "say a" and env.max_steps == 10
    with pytest.raises(EnvFault, match="reward is nan") as e:
        env.step("a")
    assert (e.value.kind, e.value.method) == ("invalid", "step")
    with pytest.raises(EnvFault, match="already faulted"):
        env.step("a")  # a faulted instance is never called again
    built = FaultyEnv.built
    env.reset(3)  # a fresh instance
    assert FaultyEnv.built == built + 1 and env.step("a")[1:3] == (1.0, False)
    env.close()


def test_guard_checks_the_typed_info_and_truncation():
    from gigpo.envs.guard import EnvFault, check_step

    assert check_step(("o", 0.0, True, {"truncated": True, "won": False}))[2] is True
    assert check_step(("o", 0.0, False, {"won": np.bool_(False), "action_valid": 1}))[3]["action_valid"] == 1
    for info, fragment in [({"truncated": True}, "truncated'] is true but done is false"),
                           ({"won": "yes"}, "info\\['won'\\] must be a bool"),
                           ({"action_valid": 2}, "action_valid"), ({"task": 3}, "info\\['task'\\] must be a str")]:
        with pytest.raises(EnvFault, match=fragment):
            check_step(("o", 0.0, False, info))
