"""The multi-turn collector: B groups × N envs, one batched generation per turn over the still-active envs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from gigpo.agent.constrained import ConstraintCache
from gigpo.agent.parse import ParsedAction, parse_response
from gigpo.agent.prompt import PromptBuilder
from gigpo.envs.base import Env
from gigpo.envs.guard import EnvFault, EnvGuard, EnvHandle
from gigpo.envs.multiseat import is_multiseat
from gigpo.envs.restore import Visit, check_visit
from gigpo.rollout.batch import RolloutBatch, Trajectory
from gigpo.rollout.branching import BranchSpec, GroupBudget, choose_parents, restore_by_replay
from gigpo.rollout.concat import CONTEXT_POLICIES, MODES, fit_context, turn_suffix_ids
from gigpo.rollout.registry import Engine
from gigpo.rollout.slot import Slot

log = logging.getLogger(__name__)




class Collector:
    """Runs groups of trajectories to completion.

    ``collect(seeds, group_size)`` resets ``group_size`` envs with each seed (a *group*: identical initial state),
    then loops turns: build the prompt of every active env, generate for all of them in one engine call, parse,
    step. An unparseable/inadmissible response costs ``invalid_penalty``, leaves the env untouched and is recorded
    with ``action_valid=False``. Env instances are created lazily and reused across calls.

    **Env faults never stop or hang a collection.** Every env call goes through a
    :class:`gigpo.envs.guard.EnvGuard`: each ``reset``/``step`` must return within ``env_timeout_s`` and honour
    the Env contract (str observation, finite real reward, bool ``done``, dict ``info``). An env that hangs,
    raises or returns garbage ends its trajectory as ``failed``: one warning names the env, seed, step and error;
    the trajectory's rows are dropped (never trained on, so a NaN reward cannot reach the advantages); it is
    excluded from every statistic of :meth:`RolloutBatch.summary` except ``failed_trajectories``; and that env
    instance is discarded — a fresh one from ``make_env`` takes its slot in the next collection.
    ``env_workers`` picks the isolation: ``"inline"`` (a runner thread, abandoned on a hang; cheap) or
    ``"process"`` (one killable worker process per env; needs a picklable ``make_env``) or ``"ray"`` (Ray actors;
    ``env_worker_options``: ``num_workers``, ``ray_address`` — see :mod:`gigpo.envs._ray_workers`).

    ``mode="concat"`` (see :mod:`gigpo.rollout.concat`): the prompt of turn t is the whole interaction so far as
    one token sequence; when the next prompt plus ``max_response_tokens`` would exceed ``max_context_tokens``,
    ``context_limit_policy`` ``"stop"`` ends the episode (``final_info["context_limit"] = True``) and
    ``"truncate"`` drops the oldest turns (the first prompt always stays).

    ``decoding="constrained"`` (see :mod:`gigpo.agent.constrained`): each step's ``info["admissible_actions"]``
    becomes a token trie handed to the engine, which only emits one of those actions; the chosen action is
    taken as is and the per-token allowed sets are stored in the batch for the learner.

    ``branch`` (a :class:`gigpo.rollout.branching.BranchSpec`; None = off): each group grows as a tree from
    ``branch.roots(group_size)`` trajectories, siblings restored at the chosen steps (by the env's ``snapshot()`` /
    ``restore()`` when it has them, else by verified replay), within the group's budget of ``group_size × cap``
    env steps (see :mod:`gigpo.rollout.branching`). A restored state that differs from the recorded one raises
    :class:`gigpo.envs.restore.ReplayDivergence`, which stops the collection.
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
        env_timeout_s: float = 60.0,
        env_workers: str = "inline",
        env_name: str | None = None,
        env_worker_options: dict | None = None,
        decoding: str = "free",
        branch: BranchSpec | None = None,
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
        self._guard = EnvGuard(make_env, workers=env_workers, timeout_s=env_timeout_s,
                               name=env_name or getattr(make_env, "name", None), **(env_worker_options or {}))
        self._pool: list[EnvHandle | None] = []
        if decoding not in ("free", "constrained"):
            raise ValueError(f"decoding must be 'free' or 'constrained', got {decoding!r}")
        self.decoding = decoding
        self.branch = branch
        #: record every slot's env actions and visits (what a replay of its state needs) even when not branching;
        #: ``on_step(slot, step)`` is called before each recorded step with the slot as it stood (gigpo.audit)
        self.record_paths = False
        self.on_step: Callable[[Slot, int], None] | None = None
        self._constraints = ConstraintCache(
            prompt_builder.tokenizer, list(getattr(engine, "eos_ids", None) or []), prompt_builder.fmt,
            env_name or getattr(make_env, "name", None) or "env", slots=True,
            budget=max_response_tokens) if decoding == "constrained" else None
        #: kept by gigpo.train.collect.dynamic_sampling.check_failed_iterations: the run's stop rule for all-failed iterations
        self.failed_streak = 0
        self.iterations_collected = 0
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

    def _envs(self, n: int) -> list[EnvHandle]:
        while len(self._pool) < n:
            self._pool.append(None)
        for i in range(n):
            if self._pool[i] is None:  # first use, or the instance there faulted and was discarded
                self._pool[i] = self._guard.new()
        return self._pool[:n]

    def close(self) -> None:
        self._guard.close()
        self._pool.clear()

    def collect(self, seeds: list[int], group_size: int, temperature: float | None = None) -> RolloutBatch:
        temperature = self.temperature if temperature is None else temperature
        per_group = self.branch.roots(group_size) if self.branch else group_size
        self._used = len(seeds) * per_group  #: pool handles this collection uses (branching adds more)
        envs = self._envs(self._used)
        self._logged = 0
        batch = RolloutBatch()
        slots = [Slot(envs[g * per_group + j], Trajectory(traj_id=g * per_group + j, group_id=g, seed=int(seed)),
                       history=[]) for g, seed in enumerate(seeds) for j in range(per_group)]
        batch.trajectories = [s.traj for s in slots]
        for s, res in zip(slots, self._guard.call_many([(s.env, "reset", s.traj.seed) for s in slots])):
            if isinstance(res, EnvFault):
                self._fail(s, "reset", res)
            else:
                s.observation, s.info = res
                s.traj.task = str(s.info.get("task", ""))
                if self.branch or self.record_paths:
                    s.actions, s.visits = [], [Visit.of(s.observation, s.info)]
        if any(is_multiseat(s.info) for s in slots):  # one game, several seats: self-play (rollout/multiseat.py)
            if self.branch:  # refused before training too (gigpo.train.compose.probe_env)
                raise ValueError("branch rollouts do not support multi-seat (self-play) games: rollout.branch=off")
            from gigpo.rollout.multiseat import collect_seats

            return collect_seats(self, slots, group_size, temperature)

        budgets = {}
        if self.branch:  # the group's budget: what an unbranched group of group_size can spend (rollout/branching.py)
            caps = {s.traj.group_id: self._cap(s.env) for s in slots}
            budgets = {g: GroupBudget(group_size * cap, per_group * cap) for g, cap in caps.items()}
        slots = self.run_turns(slots, batch, temperature, budgets)
        failed = {s.traj.traj_id for s in slots if s.traj.failed}
        if failed:
            more = f" ({self._logged - self.LOG_FAILURES} not logged above)" if self._logged > self.LOG_FAILURES else ""
            log.warning("%d of %d trajectories failed (env fault)%s; excluded from training and statistics",
                        len(failed), len(slots), more)
            batch = batch.drop_trajectories(failed)
        return batch

    def run_turns(self, slots: list[Slot], batch: RolloutBatch, temperature: float,
                  budgets: dict[int, GroupBudget] | None = None) -> list[Slot]:
        """Play ``slots`` to the end of their episodes, recording their steps in ``batch``: per turn one batched
        generation over the active slots, then their env steps in one guarded batch. Returns every slot played
        (with branching, the restored siblings too)."""
        while True:
            active = [s for s in slots if s.active]
            if not active:
                break
            prompts = [self._prompt(s) for s in active]
            extra = {}
            if self._constraints is not None:
                extra["constraints"] = [self._constraints.get((s.info or {}).get("admissible_actions"))
                                        for s in active]
            gens = self.engine.generate(
                prompts, max_new_tokens=self.max_response_tokens, temperature=temperature, top_p=self.top_p,
                **extra,
            )
            parsed = [self._parse(s, g) for s, g in zip(active, gens)]
            born = self._branch(active, gens, budgets) if self.branch and budgets else []
            # All of the turn's env steps in one guarded batch (concurrent in process mode).
            todo = [i for i, p in enumerate(parsed) if p.valid]
            outs: list[Any] = [None] * len(active)
            for i, res in zip(todo, self._guard.call_many([(active[i].env, "step", parsed[i].action) for i in todo])):
                outs[i] = res
            for s, prompt, gen, p, out in zip(active, prompts, gens, parsed, outs):
                if isinstance(out, EnvFault):
                    self._fail(s, f"step {s.traj.length}", out)
                else:
                    self._advance(batch, s, s.traj.length, prompt, gen, p, out)
            slots += born  # restored siblings take their first step next turn
            batch.trajectories += [s.traj for s in born]
        return slots

    def _branch(self, active: list[Slot], gens: list[Any], budgets: dict[int, GroupBudget]) -> list[Slot]:
        """This turn's branches: per group, the parents the rule chooses (their action at this step sampled, not
        yet applied) each get ``siblings - 1`` fresh envs restored to their state (by snapshot, else by verified
        replay). Returns the new slots (a sibling whose restore faulted is already failed: it has no rows)."""
        spec = self.branch
        by_group: dict[int, list[tuple[int, int, float]]] = {}
        for i, (s, g) in enumerate(zip(active, gens)):
            if s.traj.length > s.traj.branch_step:  # never again at a sibling's own first step
                by_group.setdefault(s.traj.group_id, []).append((i, s.traj.length, float(sum(g.logprobs))))
        parents = [active[i] for gid, cands in by_group.items()
                   for i in choose_parents(spec, cands, self._cap(active[cands[0][0]].env), budgets[gid])]
        if not parents:
            return []
        k = spec.siblings - 1
        n0, self._used = self._used, self._used + k * len(parents)
        handles = self._envs(self._used)[n0:]  # pool slot i hosts trajectory i
        born, parent_of = [], []
        for j, p in enumerate(parents):
            step = p.traj.length
            for c in range(k):
                idx = j * k + c
                t = Trajectory(traj_id=n0 + idx, group_id=p.traj.group_id, seed=p.traj.seed, task=p.traj.task,
                               parent=p.traj.traj_id, branch_step=step, length=step)
                born.append(Slot(handles[idx], t, observation=p.observation, info=p.info,
                                 history=list(p.history or []), first=p.first, chunks=list(p.chunks or []),
                                 context=p.context, actions=list(p.actions or []), visits=list(p.visits or [])))
                parent_of.append(p)
        name = self._guard.name or "env"
        by_replay = [b for b, p in zip(born, parent_of) if not p.env.can_snapshot]
        jobs = [(b.env, b.traj.seed, b.actions, b.visits) for b in by_replay]
        for b, res in zip(by_replay, restore_by_replay(self._guard, jobs, name)):
            if isinstance(res, EnvFault):
                self._fail(b, f"restoring step {b.traj.branch_step}", res)
        self._restore_snapshots([(p, b) for b, p in zip(born, parent_of) if p.env.can_snapshot], name)
        return born

    def _restore_snapshots(self, pairs: list[tuple[Slot, Slot]], name: str) -> None:
        """``(parent, sibling)`` pairs whose env has ``snapshot()`` / ``restore()``: one snapshot per parent, restored
        into each sibling's env, each checked against the parent's visit (a mismatch raises ReplayDivergence)."""
        parents = list({id(p): p for p, _ in pairs}.values())
        snaps = dict(zip(map(id, parents), self._guard.call_many([(p.env, "snapshot", None) for p in parents])))
        todo = []
        for p, b in pairs:
            if isinstance(snaps[id(p)], EnvFault):
                self._fail(b, f"snapshot at step {b.traj.branch_step}", snaps[id(p)])
            else:
                todo.append((p, b))
        for (p, b), res in zip(todo, self._guard.call_many([(b.env, "restore", snaps[id(p)]) for p, b in todo])):
            if isinstance(res, EnvFault):
                self._fail(b, f"restoring step {b.traj.branch_step}", res)
            else:
                check_visit(name, b.traj.seed, len(p.actions or []), p.visits[-1], Visit.of(*res), "snapshot")

    def _parse(self, s: Slot, gen: Any) -> ParsedAction:
        action = getattr(gen, "action", None)
        if action is not None and not self.require_think:  # constrained: the engine completed an admissible one
            return ParsedAction(action)
        parsed = parse_response(gen.text, self.prompts.fmt, (s.info or {}).get("admissible_actions"),
                                self.require_think, raw=s.env.raw_action)
        if action is not None and parsed.valid:
            return ParsedAction(action)
        return parsed

    def _cap(self, env: EnvHandle) -> int:
        cap = env.max_steps
        if self.max_steps:
            cap = min(cap, self.max_steps) if cap else self.max_steps
        return cap or 50

    def _prompt(self, s: Slot) -> list[int]:
        if self.mode == "concat":
            if s.context is None:
                s.first, s.chunks = self._step_prompt(s), []
                s.context = s.first
            return s.context
        return self._step_prompt(s)

    def _step_prompt(self, s: Slot) -> list[int]:
        info = s.info or {}
        hist = s.history[-self.history_length:] if self.history_length else []
        return self.prompts.build(
            s.env.instructions, s.traj.task, hist, s.observation, info.get("admissible_actions")
        )

    def _advance(self, batch: RolloutBatch, s: Slot, step: int, prompt: list[int], gen: Any, parsed: Any,
                 out: tuple[str, float, bool, dict] | None) -> None:
        """Record one step; ``out`` is the env's checked step output, or None when the action was invalid."""
        if self.on_step is not None:
            self.on_step(s, step)
        info = s.info or {}
        state_key = Env.state_key_of(info, s.observation)
        obs_before = s.observation
        if out is not None:
            obs, reward, done, new_info = out
            valid = bool(new_info.get("action_valid", True))
            reward = reward + (0.0 if valid else self.invalid_penalty)
            action_text = parsed.action if valid else f"{parsed.action} (invalid)"
        else:
            obs, reward, done, new_info = s.observation, self.invalid_penalty, False, dict(info)
            new_info["action_valid"] = False
            valid = False
            action_text = f"(invalid: {parsed.error})"
        if out is not None and s.actions is not None:  # branching: what a replay of this slot's state needs
            s.actions.append(parsed.action)
            s.visits.append(Visit.of(obs, new_info))
        t = s.traj
        t.length = step + 1
        t.episode_return += reward
        t.invalid_steps += int(not valid)
        truncated = bool(done and new_info.get("truncated", False))  # the env's own cut (Env contract)
        if step + 1 >= self._cap(s.env) and not done:
            done = truncated = True  # the rollout's step cap cuts the episode: truncated, not terminated
        if self.mode == "concat" and not done and not self._extend_context(s, gen.token_ids, obs, new_info):
            done = truncated = True
            new_info = {**new_info, "context_limit": True}
        batch.add_row(
            group_id=t.group_id, traj_id=t.traj_id, step=step, reward=reward, done=bool(done), action_valid=valid,
            observation=obs_before, state_key=state_key, prompt_ids=prompt, response_ids=list(gen.token_ids),
            sampling_logprobs=list(gen.logprobs), allowed_tokens=getattr(gen, "allowed", None),
        )
        t.transcript.append((obs_before, gen.text, action_text, reward))
        s.history.append((obs_before, parsed.action if parsed.valid else gen.text.strip()[:200]))
        s.observation, s.info = obs, new_info
        if done:
            s.active = False
            t.won = bool(new_info.get("won", False))
            t.truncated = truncated
            t.score = float(new_info.get("score", float(t.won)))
            t.data_source = str(new_info.get("data_source", ""))
            t.final_info = {k: v for k, v in new_info.items() if isinstance(v, (int, float, str, bool))}

    def _extend_context(self, s: Slot, response: list[int], obs: str, info: dict) -> bool:
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

    #: per collection, failures logged one by one; the rest are counted in the closing summary (bounded logs when
    #: every env of a large batch fails the same way)
    LOG_FAILURES = 10

    def _fail(self, s: Slot, where: str, e: EnvFault) -> None:
        """End ``s``'s trajectory as failed, say so (env, seed, step, error), and free its slot for a fresh env."""
        s.active = False
        s.traj.failed = True
        what = e.kind + (" building the env" if e.method == "make" else "")
        s.traj.error = f"{where}: {what}: {e.message}"
        self._logged += 1
        if self._logged <= self.LOG_FAILURES:
            log.warning("env %r failed at %s (seed %d, trajectory %d): %s: %s; trajectory dropped, env instance "
                        "replaced", s.env.name or "?", where, s.traj.seed, s.traj.traj_id, what, e.message)
        self._guard.discard(s.env)
        self._pool[self._pool.index(s.env)] = None
