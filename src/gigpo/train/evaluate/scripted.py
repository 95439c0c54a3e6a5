"""Scripted agents: ``gigpo eval --agent oracle|random`` — held-out episodes with no model.

Protocol (see :class:`gigpo.envs.base.Env`): an env MAY define ``oracle_action(self) -> str``, the oracle's next
action for its current state. ``oracle`` plays it at every step; ``random`` picks uniformly among
``info["admissible_actions"]`` (or, for a free-text env, its ``info["random_actions"]`` candidates) with a generator seeded by (eval seed, episode seed), so reruns repeat.
The built-in webshop and search envs get their existing solvers through :func:`oracle_of` (webshop: the
goal-aware shopper of :mod:`gigpo.envs.webshop.policies`; search: the hop-plan reader of
:mod:`gigpo.envs.search.oracle`).

Episodes run through the env guard exactly as model evaluation does (``rollout.env_workers``,
``rollout.env_timeout_s``, the ``split="test"`` env, the held-out seeds of :func:`gigpo.train.compose.eval_seeds`,
the step cap ``min(env.max_steps, rollout.max_steps)``, ``rollout.invalid_penalty``); the oracle is asked where
the env lives (in its worker process), and its answer comes back in ``info["oracle_action"]``. The summary is
:func:`gigpo.train.evaluate.evaluation_summary`, so the table has the same rows, and the per-task-type columns
where the env reports ``data_source`` or ``task_type``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from gigpo.envs.base import Env, EnvError
from gigpo.rollout.batch import RolloutBatch, Trajectory

AGENTS = ("oracle", "random")
#: RNG stream tag of the random agent (apart from the trainer's streams).
RANDOM_AGENT_STREAM = 0x52_41_4E_44


def oracle_of(env: Env) -> Callable[[], str] | None:
    """The env's ``oracle_action``, or an adapter to the built-in webshop / search solvers; None if it has none."""
    if callable(getattr(env, "oracle_action", None)):
        return env.oracle_action
    from gigpo.envs.webshop.env import WebShopEnv

    if isinstance(env, WebShopEnv):
        from gigpo.envs.webshop.policies import oracle_action

        return lambda: oracle_action(env)
    from gigpo.envs.search.env import SearchEnv

    if isinstance(env, SearchEnv):
        return _SearchOracle(env)
    return None


class _SearchOracle:
    """The search env's hop oracle, begun on each new question and fed the last observation."""

    def __init__(self, env: Any):
        from gigpo.envs.search.oracle import HopOracle

        self.env, self.policy, self.record, self.observation = env, HopOracle(), None, ""

    def __call__(self) -> str:
        if self.record is not self.env.record:
            self.record = self.env.record
            self.policy.begin(self.record)
        return self.policy.act(self.observation)


class OracleEnv(Env):
    """Wraps an env so that every ``info`` carries ``oracle_action`` (computed where the env lives)."""

    def __init__(self, env: Env):
        self.env = env
        self.oracle = oracle_of(env)
        if self.oracle is None:
            raise EnvError(f"{type(env).__name__} has no oracle (define oracle_action(self) -> str on the env)")

    @property
    def instructions(self) -> str:  # type: ignore[override]
        return self.env.instructions

    @property
    def max_steps(self) -> int:  # type: ignore[override]
        return self.env.max_steps

    def _with_oracle(self, observation: str, info: dict) -> dict:
        if isinstance(self.oracle, _SearchOracle):
            self.oracle.observation = observation
        return {**info, "oracle_action": self.oracle()}

    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed)
        return obs, self._with_oracle(obs, info)

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        obs, reward, done, info = self.env.step(action)
        return obs, reward, done, ({**info, "oracle_action": None} if done else self._with_oracle(obs, info))

    def close(self) -> None:
        self.env.close()


@dataclass(frozen=True)
class OracleFactory:
    """Picklable: builds the inner env and wraps it (so ``rollout.env_workers=process`` works)."""

    factory: Any

    def __call__(self) -> Env:
        return OracleEnv(self.factory())


def run_scripted(cfg: Any, agent: str, episodes: int, seed: int) -> tuple[dict, RolloutBatch]:
    """``episodes`` held-out episodes of ``agent`` on ``cfg``'s env; ``(summary, batch)`` like model eval."""
    from gigpo.envs.guard import EnvFault, GuardedEnv
    from gigpo.train.compose import env_factory, eval_seeds
    from gigpo.train.evaluate import evaluation_summary

    if agent not in AGENTS:
        raise ValueError(f"--agent must be one of {', '.join(AGENTS)} (or openai:MODEL), got {agent!r}")
    factory = env_factory(cfg, "test")
    if agent == "oracle":  # no oracle at all is one error up front, not a failure per episode
        probe = factory()
        try:
            if oracle_of(probe) is None:
                raise EnvError(f"env {cfg.env.name!r} has no oracle (an env gives one by defining "
                               "oracle_action(self) -> str); --agent random needs only admissible actions")
        finally:
            probe.close()
    env = GuardedEnv(OracleFactory(factory) if agent == "oracle" else factory, workers=cfg.rollout.env_workers,
                     timeout_s=cfg.rollout.env_timeout_s, name=cfg.env.name)
    batch = RolloutBatch()
    try:
        for i, s in enumerate(eval_seeds(seed, episodes)):
            t = Trajectory(traj_id=i, group_id=i, seed=int(s))
            batch.trajectories.append(t)
            rng = np.random.default_rng([seed, int(s), RANDOM_AGENT_STREAM])
            try:
                _play(env, t, batch, agent, rng, cfg)
            except EnvFault as e:  # one broken episode is reported, as in model evaluation; the rest go on
                t.failed, t.error = True, f"step {t.length}: {e}"
    finally:
        env.close()
    return evaluation_summary(batch), batch


def _play(env: Any, t: Trajectory, batch: RolloutBatch, agent: str, rng: np.random.Generator, cfg: Any) -> None:
    obs, info = env.reset(t.seed)
    t.task = str(info.get("task", ""))
    cap = min([c for c in (env.max_steps, cfg.rollout.max_steps) if c] or [50])  # the collector's rule
    for step in range(cap):
        if agent == "oracle":
            action = info.get("oracle_action")
        else:
            # a free-text env may offer candidates for this baseline alone (reasoning-gym: other items' answers)
            adm = info.get("admissible_actions") or info.get("random_actions")
            if not adm:
                raise EnvError(f"--agent random needs info['admissible_actions'], which {cfg.env.name} does not give")
            action = adm[int(rng.integers(len(adm)))]
        new_obs, reward, done, new_info = env.step(str(action))
        valid = bool(new_info.get("action_valid", True))
        reward += 0.0 if valid else cfg.rollout.invalid_penalty
        t.length, t.episode_return, t.invalid_steps = step + 1, t.episode_return + reward, t.invalid_steps + (not valid)
        done = done or step + 1 >= cap
        batch.add_row(group_id=t.group_id, traj_id=t.traj_id, step=step, reward=reward, done=bool(done),
                      action_valid=valid, observation=obs, state_key=Env.state_key_of(info, obs), prompt_ids=[],
                      response_ids=[], sampling_logprobs=[])
        t.transcript.append((obs, str(action), str(action) if valid else f"{action} (invalid)", reward))
        obs, info = new_obs, new_info
        if done:
            break
    t.won = bool(info.get("won", False))
    t.score = float(info.get("score", float(t.won)))
    t.data_source = str(info.get("data_source") or info.get("task_type") or "")
    t.final_info = {k: v for k, v in info.items() if k not in ("admissible_actions", "oracle_action")}


def scripted_main(argv: list[str]) -> int:
    """``gigpo eval --agent oracle|random --env NAME [--episodes N] [--seed S] [--output F] [key=value ...]``."""
    from gigpo.envs.registry import EnvImportError, import_env_modules
    from gigpo.train.config import ConfigError, load_config
    from gigpo.train.evaluate import format_table

    p = argparse.ArgumentParser(prog="gigpo eval", description="Evaluate a scripted agent (no model) on "
                                "held-out episodes: the env's oracle, or uniform over admissible actions.")
    p.add_argument("--agent", required=True, choices=AGENTS)
    p.add_argument("--env", help="env name (default: the config's)")
    p.add_argument("--config", help="YAML file or preset (default: quickstart)")
    p.add_argument("--episodes", type=int, default=64)
    p.add_argument("--seed", type=int, default=None, help="seed of the held-out set (default: train.seed)")
    p.add_argument("--output", help="write the summary and per-episode results as JSON")
    p.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    args = p.parse_args(argv)
    # env.name first: a change of env drops the options of the old one, not the env.KEY=VALUE given here
    overrides = ([f"env.name={args.env}"] if args.env else []) + list(args.overrides)
    try:
        import_env_modules(args.imports)
        if args.episodes < 1:
            raise ConfigError(f"--episodes must be >= 1, got {args.episodes}")
        cfg = load_config(args.config, overrides)
        from gigpo.train.compose import probe_env

        probe_env(cfg)  # a bad env option or missing data: one line, as `gigpo eval` reports it
        summary, batch = run_scripted(cfg, args.agent, args.episodes, cfg.train.seed if args.seed is None else args.seed)
    except (ConfigError, FileNotFoundError, ValueError, EnvError, EnvImportError) as e:
        print(f"gigpo eval: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    print(format_table(summary, label=args.agent))
    if args.output:
        with open(args.output, "w") as f:
            json.dump({"agent": args.agent, "env": cfg.env.name, "summary": summary, "episodes": [
                {"seed": t.seed, "won": t.won, "score": t.score, "length": t.length, "failed": t.failed,
                 "error": t.error, "data_source": t.data_source} for t in batch.trajectories]}, f, indent=2)
    return 0
