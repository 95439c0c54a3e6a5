"""The multi-turn collector: B groups × N envs, one batched generation per turn over the still-active envs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gigpo.agent.parse import parse_response
from gigpo.agent.prompt import PromptBuilder
from gigpo.envs.base import Env
from gigpo.rollout.batch import RolloutBatch, Trajectory
from gigpo.rollout.concat import CONTEXT_POLICIES, MODES, fit_context, turn_suffix_ids
from gigpo.rollout.engine import Engine

log = logging.getLogger(__name__)


@dataclass
class _Slot:
    env: Env
    traj: Trajectory
    observation: str = ""
    info: dict | None = None
    history: list[tuple[str, str]] | None = None
    active: bool = True
    # concat mode: the first prompt, the token chunks after it (response + env tokens per turn), the live context
    first: list[int] | None = None
    chunks: list[list[int]] | None = None
    context: list[int] | None = None


class Collector:
    """Runs groups of trajectories to completion.

    ``collect(seeds, group_size)`` resets ``group_size`` envs with each seed (a *group*: identical initial state),
    then loops turns: build the prompt of every active env, generate for all of them in one engine call, parse,
    step. An unparseable/inadmissible response costs ``invalid_penalty``, leaves the env untouched and is recorded
    with ``action_valid=False``. An env that raises ends its trajectory as ``failed`` (rows dropped from training,
    excluded from statistics, a warning logged). Env instances are created lazily and reused across calls.

    ``mode="concat"`` (see :mod:`gigpo.rollout.concat`): the prompt of turn t is the whole interaction so far as
    one token sequence; when the next prompt plus ``max_response_tokens`` would exceed ``max_context_tokens``,
    ``context_limit_policy`` ``"stop"`` ends the episode (``final_info["context_limit"] = True``) and
    ``"truncate"`` drops the oldest turns (the first prompt always stays).
    """

    def __init__(
        self,
        make_env: Callable[[], Env],
        engine: Engine,
        prompt_builder: PromptBuilder,
        *,
        max_steps: int = 0,
        max_response_tokens: int = 64,
        temperature: float = 1.0,
        top_p: float = 1.0,
        invalid_penalty: float = -0.1,
        history_length: int = 2,
        require_think: bool = False,
        mode: str = "step",
        max_context_tokens: int = 0,
        context_limit_policy: str = "stop",
    ):
        self.make_env = make_env
        self.engine = engine
        self.prompts = prompt_builder
        self.max_steps = max_steps
        self.max_response_tokens = max_response_tokens
        self.temperature = temperature
        self.top_p = top_p
        self.invalid_penalty = invalid_penalty
        self.history_length = history_length
        self.require_think = require_think
        self._pool: list[Env] = []
        self.set_mode(mode, max_context_tokens, context_limit_policy)

    def set_mode(self, mode: str, max_context_tokens: int = 0, context_limit_policy: str = "stop") -> None:
        """Switch between per-step prompts (``"step"``) and one concatenated sequence (``"concat"``)."""
        if mode not in MODES or context_limit_policy not in CONTEXT_POLICIES:
            raise ValueError(f"mode must be one of {MODES} and context_limit_policy one of {CONTEXT_POLICIES}")
        if mode == "concat" and max_context_tokens <= self.max_response_tokens:
            raise ValueError("max_context_tokens must exceed max_response_tokens in concat mode")
        self.mode, self.max_context_tokens, self.context_limit_policy = mode, max_context_tokens, context_limit_policy
        if mode == "concat":  # the first prompt must leave room for one response
            self.prompts.max_tokens = min(self.prompts.max_tokens, max_context_tokens - self.max_response_tokens)

    def _envs(self, n: int) -> list[Env]:
        while len(self._pool) < n:
            self._pool.append(self.make_env())
        return self._pool[:n]

    def close(self) -> None:
        for env in self._pool:
            env.close()
        self._pool.clear()

    def collect(self, seeds: list[int], group_size: int, temperature: float | None = None) -> RolloutBatch:
        temperature = self.temperature if temperature is None else temperature
        envs = self._envs(len(seeds) * group_size)
        batch = RolloutBatch()
        slots: list[_Slot] = []
        for g, seed in enumerate(seeds):
            for j in range(group_size):
                tid = g * group_size + j
                slot = _Slot(envs[tid], Trajectory(traj_id=tid, group_id=g, seed=int(seed)), history=[])
                try:
                    slot.observation, slot.info = slot.env.reset(int(seed))
                    slot.traj.task = str(slot.info.get("task", ""))
                except Exception as e:  # noqa: BLE001 - any env failure ends the trajectory, not the run
                    self._fail(slot, "reset", e)
                slots.append(slot)
        batch.trajectories = [s.traj for s in slots]

        step = 0
        while True:
            active = [s for s in slots if s.active]
            if not active:
                break
            prompts = [self._prompt(s) for s in active]
            gens = self.engine.generate(
                prompts, max_new_tokens=self.max_response_tokens, temperature=temperature, top_p=self.top_p
            )
            for s, prompt, gen in zip(active, prompts, gens):
                self._advance(batch, s, step, prompt, gen)
            step += 1

        failed = {s.traj.traj_id for s in slots if s.traj.failed}
        if failed:
            log.warning("%d trajectories failed (env error); excluded from training and statistics", len(failed))
            batch = batch.drop_trajectories(failed)
        return batch

    def _cap(self, env: Env) -> int:
        cap = int(getattr(env, "max_steps", 0) or 0)
        if self.max_steps:
            cap = min(cap, self.max_steps) if cap else self.max_steps
        return cap or 50

    def _prompt(self, s: _Slot) -> list[int]:
        if self.mode == "concat":
            if s.context is None:
                s.first, s.chunks = self._step_prompt(s), []
                s.context = s.first
            return s.context
        return self._step_prompt(s)

    def _step_prompt(self, s: _Slot) -> list[int]:
        info = s.info or {}
        hist = s.history[-self.history_length:] if self.history_length else []
        return self.prompts.build(
            s.env.instructions, s.traj.task, hist, s.observation, info.get("admissible_actions")
        )

    def _advance(self, batch: RolloutBatch, s: _Slot, step: int, prompt: list[int], gen: Any) -> None:
        info = s.info or {}
        raw = bool(getattr(s.env, "raw_action", False))
        parsed = parse_response(
            gen.text, self.prompts.fmt, info.get("admissible_actions"), self.require_think, raw=raw
        )
        state_key = Env.state_key_of(info, s.observation)
        obs_before = s.observation
        if parsed.valid:
            try:
                obs, reward, done, new_info = s.env.step(parsed.action)
            except Exception as e:  # noqa: BLE001
                self._fail(s, f"step {step}", e)
                return
            valid = bool(new_info.get("action_valid", True))
            reward = float(reward) + (0.0 if valid else self.invalid_penalty)
            action_text = parsed.action if valid else f"{parsed.action} (invalid)"
        else:
            obs, reward, done, new_info = s.observation, self.invalid_penalty, False, dict(info)
            new_info["action_valid"] = False
            valid = False
            action_text = f"(invalid: {parsed.error})"
        t = s.traj
        t.length = step + 1
        t.episode_return += reward
        t.invalid_steps += int(not valid)
        if step + 1 >= self._cap(s.env):
            done = True
        if self.mode == "concat" and not done and not self._extend_context(s, gen.token_ids, obs, new_info):
            done = True
            new_info = {**new_info, "context_limit": True}
        batch.add_row(
            group_id=t.group_id, traj_id=t.traj_id, step=step, reward=reward, done=bool(done), action_valid=valid,
            observation=obs_before, state_key=state_key, prompt_ids=prompt, response_ids=list(gen.token_ids),
            sampling_logprobs=list(gen.logprobs),
        )
        t.transcript.append((obs_before, gen.text, action_text, reward))
        s.history.append((obs_before, parsed.action if parsed.valid else gen.text.strip()[:200]))
        s.observation, s.info = obs, new_info
        if done:
            s.active = False
            t.won = bool(new_info.get("won", False))
            t.score = float(new_info.get("score", float(t.won)))
            t.data_source = str(new_info.get("data_source", ""))
            t.final_info = {k: v for k, v in new_info.items() if isinstance(v, (int, float, str, bool))}

    def _extend_context(self, s: _Slot, response: list[int], obs: str, info: dict) -> bool:
        """Next concat context = context + response (+ end-of-turn) + env tokens; False when it cannot fit."""
        resp = list(response)
        eos = list(getattr(self.engine, "eos_ids", []) or [])
        if self.prompts.has_chat_template and eos and (not resp or resp[-1] not in eos):
            resp.append(eos[0])  # a cut-off response still closes its assistant turn (an env token, masked)
        tail = turn_suffix_ids(self.prompts, obs, info.get("admissible_actions"))
        budget = self.max_context_tokens - self.max_response_tokens
        if len(s.context) + len(resp) + len(tail) <= budget:
            s.chunks.append(resp + tail)
            s.context = s.context + resp + tail
            return True
        if self.context_limit_policy == "stop":
            return False
        # Units [resp_0 + env_1, ..., resp_{t-1} + env_t] then the newest response; the new env tokens always stay.
        fit = fit_context(s.first, [*s.chunks, resp], tail, budget)
        if fit is None:
            return False
        s.context, k = fit
        s.chunks = [*s.chunks[k:], resp + tail] if k <= len(s.chunks) else [list(tail)]
        return True

    def _fail(self, s: _Slot, where: str, e: Exception) -> None:
        s.active = False
        s.traj.failed = True
        s.traj.error = f"{where}: {type(e).__name__}: {e}"
        log.warning("env failed at %s (trajectory %d): %s", where, s.traj.traj_id, s.traj.error)
