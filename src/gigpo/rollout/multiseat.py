"""Self-play collection for multi-seat envs (:mod:`gigpo.envs.multiseat`): one shared policy plays every seat.

:meth:`gigpo.rollout.Collector.collect` hands over here once the reset infos show a multi-seat env. Each game
(one env instance) yields one trajectory per seat: that seat's turns, with that seat's reward. A group of
``group_size`` games reset with one seed gives, per seat, a GiGPO group — group id ``g * seats + seat``,
trajectory id ``game * seats + seat`` — so a seat's trajectories are compared with the same seat's in games from
the same start (anchor states recur within a seat: the seat's own boards). Per turn, the seats to move of all
active games are generated for in one engine call, then stepped in one guarded batch, as in the single-seat loop.

Rewards: each row gets the acting seat's step reward (plus ``invalid_penalty`` for an invalid action, which
leaves the game unchanged: the same seat moves again); when the game ends, every seat's final reward
(``info["seat_rewards"]``) lands on that seat's last row, which is marked ``done``. A game cut by the step cap
(``min(env.max_steps, rollout.max_steps)``, counting all seats' moves) ends with no result (reward 0) and
``truncated``. A seat that never moved has no trajectory. An env fault fails every seat of that game.

With ``info["policy_seats"]`` (``env.opponent=openai:MODEL``) only those seats are the policy's: the others are
played by :class:`OpenAIOpponent` through ``env.opponent_base_url`` and have no trajectories.

``rollout.mode=concat`` is not supported with multi-seat envs (each seat's context would interleave another
seat's turns): the collector refuses it. Per-seat metrics (``seatK_win_rate``, ``_draw_rate``, ``_loss_rate``,
``_invalid_rate``) come with :meth:`SeatBatch.summary`; each seat's trajectories report ``data_source`` ``seatK``,
so evaluation tables break success and score down per seat.
"""

from __future__ import annotations

from typing import Any

from gigpo.envs.base import Env
from gigpo.envs.guard import EnvFault
from gigpo.envs.multiseat import is_multiseat, seat_outcome
from gigpo.rollout.batch import COLUMNS, RolloutBatch, Trajectory
from gigpo.rollout.slot import Slot


class SeatBatch(RolloutBatch):
    """A :class:`RolloutBatch` of self-play trajectories; ``summary`` adds per-seat rates."""

    def drop_trajectories(self, traj_ids: set[int]) -> SeatBatch:
        out = SeatBatch(trajectories=self.trajectories)
        keep = [i for i, t in enumerate(self.traj_id) if t not in traj_ids]
        for name in COLUMNS:
            col = getattr(self, name)
            setattr(out, name, [col[i] for i in keep])
        return out

    def summary(self) -> dict[str, float]:
        out = super().summary()
        ok = [t for t in self.trajectories if not t.failed]
        for seat in sorted({int(t.final_info.get("seat", 0)) for t in ok}):
            mine = [t for t in ok if int(t.final_info.get("seat", 0)) == seat]
            n = max(len(mine), 1)
            for outcome in ("win", "draw", "loss"):
                out[f"seat{seat}_{outcome}_rate"] = sum(t.final_info.get("outcome") == outcome for t in mine) / n
            out[f"seat{seat}_invalid_rate"] = sum(t.invalid_steps for t in mine) / max(sum(t.length for t in mine), 1)
        return out


class OpenAIOpponent:
    """The fixed opponent ``openai:MODEL`` at ``base_url``, for the seats outside ``info["policy_seats"]``: one chat
    request per move (the env's instructions, the seat's task and observation, its legal moves), all of a turn's
    requests at once. The move is the first line when it is legal, else the first legal move its text names,
    else the text itself (the game judges it: TextArena counts an illegal move against that seat). A failed
    request fails that game through the guard's fault path (one warning; its trajectories are dropped)."""

    def __init__(self, spec: str, base_url: str, max_tokens: int = 16):
        from gigpo.apiclient import ChatClient

        self.model, self.max_tokens = spec.removeprefix("openai:"), max_tokens
        if not base_url:
            raise ValueError(f"opponent {spec!r} needs env.opponent_base_url (e.g. http://127.0.0.1:8000/v1)")
        self.client = ChatClient(base_url, None, timeout=30.0, max_retries=2, concurrency=8)

    def moves(self, requests: list[tuple[str, str, str, list[str] | None]]) -> list[str | EnvFault]:
        return list(self.client.executor.map(lambda r: self._move(*r), requests))

    def _move(self, instructions: str, task: str, observation: str, legal: list[str] | None) -> str | EnvFault:
        from gigpo.agent.parse import parse_response
        from gigpo.apiclient import APIError

        user = f"{task}\n\n{observation}" + (f"\n\nLegal moves: {', '.join(legal)}" if legal else "")
        body = {"model": self.model, "max_tokens": self.max_tokens, "temperature": 0.0,
                "messages": [{"role": "system", "content": instructions or "Play the game."},
                             {"role": "user", "content": user + "\nAnswer with one move only."}]}
        try:
            text = str(self.client.chat(body).data["choices"][0]["message"]["content"] or "")
        except (APIError, KeyError, IndexError, TypeError) as err:
            return EnvFault("error", "step", f"opponent {self.model!r}: {' '.join(str(err).split())[:200]}")
        parsed = parse_response(text, "plain", legal)
        if parsed.valid:
            return parsed.action
        named = [a for a in legal or [] if a in text]
        return named[0] if named else text.strip()[:200]

    def close(self) -> None:
        self.client.close()


def collect_seats(col: Any, games: list[Any], group_size: int, temperature: float) -> SeatBatch:
    """Play ``games`` (the collector's reset slots, one per env instance) to the end; see the module docstring."""
    if col.mode == "concat":
        raise ValueError("rollout.mode=concat is not supported with a multi-seat (self-play) env; use mode=step")
    n_seats = max(int(g.info.get("seats", 2)) for g in games if is_multiseat(g.info))
    batch = SeatBatch()
    seats: list[list[Any]] = []
    for k, game in enumerate(games):
        g = k // group_size
        row = []
        for q in range(n_seats):
            t = Trajectory(traj_id=k * n_seats + q, group_id=g * n_seats + q, seed=game.traj.seed,
                           failed=game.traj.failed, error=game.traj.error)
            t.final_info, t.data_source = {"seat": q}, f"seat{q}"
            slot = Slot(game.env, t, history=[], seat=q)
            row.append(slot)
        seats.append(row)
    last_row: dict[int, int] = {}
    moves = [0] * len(games)
    # the policy's seats per game (env.opponent=openai:MODEL: the agent's seat alone, which may differ by seed)
    policy = [set((g.info or {}).get("policy_seats", range(n_seats))) for g in games]
    fixed = [g.info for g, p in zip(games, policy) if p != set(range(n_seats))]
    opponent = OpenAIOpponent(str(fixed[0].get("opponent", "")), str(fixed[0].get("opponent_base_url", ""))) \
        if fixed else None
    while True:
        movers = [(k, seats[k][int(g.info["seat"])]) for k, g in enumerate(games) if g.active]
        if not movers:
            break
        for k, s in movers:  # the mover sees the game's current observation
            s.observation, s.info = games[k].observation, games[k].info
            if not s.traj.task:
                s.traj.task = str(s.info.get("task", ""))
        if opponent is not None:
            _opponent_turns(col, opponent, games, seats, [(k, s) for k, s in movers if s.seat not in policy[k]],
                            moves, last_row, batch)
        turn = [(k, s) for k, s in movers if s.seat in policy[k]]
        if not turn:
            continue
        prompts = [col._step_prompt(s) for _, s in turn]
        extra = {}
        if col._constraints is not None:
            extra["constraints"] = [col._constraints.get(s.info.get("admissible_actions")) for _, s in turn]
        gens = col.engine.generate(prompts, max_new_tokens=col.max_response_tokens, temperature=temperature,
                                   top_p=col.top_p, **extra)
        parsed = [col._parse(s, gen) for (_, s), gen in zip(turn, gens)]
        todo = [i for i, p in enumerate(parsed) if p.valid]
        outs: list[Any] = [None] * len(turn)
        for i, res in zip(todo, col._guard.call_many([(turn[i][1].env, "step", parsed[i].action) for i in todo])):
            outs[i] = res
        for (k, s), prompt, gen, p, out in zip(turn, prompts, gens, parsed, outs):
            if isinstance(out, EnvFault):
                _fail_game(col, games[k], seats[k], f"move {moves[k]}", out)
                continue
            moves[k] += 1
            if _record(col, batch, games[k], s, prompt, gen, p, out, last_row):
                # the acting seat's final reward came with this step (its row has it); the others' go on theirs
                _finish(batch, games[k], seats[k], games[k].info, last_row, acting=s.traj.traj_id)
            elif moves[k] >= col._cap(games[k].env):
                _finish(batch, games[k], seats[k], {**games[k].info, "truncated": True}, last_row)
    if opponent is not None:
        opponent.close()
    ran = {tr for tr in batch.traj_id}
    batch.trajectories = [s.traj for k, row in enumerate(seats) for s in row
                          if s.seat in policy[k] and (s.traj.failed or s.traj.traj_id in ran)]
    failed = {t.traj_id for t in batch.trajectories if t.failed}
    return batch.drop_trajectories(failed) if failed else batch


def _opponent_turns(col: Any, opponent: OpenAIOpponent, games: list[Any], seats: list[list[Any]],
                    turn: list[tuple[int, Any]], moves: list[int], last_row: dict[int, int], batch: SeatBatch) -> None:
    """The fixed opponent's moves of this turn: stepped like the policy's, recorded in no row."""
    answers = opponent.moves([(s.env.instructions, str(s.info.get("task", "")), s.observation,
                               s.info.get("admissible_actions")) for _, s in turn])
    todo = [(i, a) for i, a in enumerate(answers) if not isinstance(a, EnvFault)]
    outs: list[Any] = list(answers)
    for (i, _), res in zip(todo, col._guard.call_many([(turn[i][1].env, "step", a) for i, a in todo])):
        outs[i] = res
    for (k, _), out in zip(turn, outs):
        if isinstance(out, EnvFault):
            _fail_game(col, games[k], seats[k], f"opponent move {moves[k]}", out)
            continue
        moves[k] += 1
        games[k].observation, games[k].info = out[0], out[3]
        if out[2]:
            _finish(batch, games[k], seats[k], out[3], last_row)
        elif moves[k] >= col._cap(games[k].env):
            _finish(batch, games[k], seats[k], {**out[3], "truncated": True}, last_row)


def _record(col: Any, batch: SeatBatch, game: Any, s: Any, prompt: list[int], gen: Any, parsed: Any,
            out: tuple | None, last_row: dict[int, int]) -> bool:
    """One move of seat ``s`` in ``game``: its row, its trajectory, the game's new state; whether it ended."""
    info = s.info or {}
    obs_before, state_key = s.observation, Env.state_key_of(info, s.observation)
    if out is not None:
        obs, reward, done, new_info = out
        valid = bool(new_info.get("action_valid", True))
        reward = reward + (0.0 if valid else col.invalid_penalty)
        action_text = parsed.action if valid else f"{parsed.action} (invalid)"
    else:  # unparseable or inadmissible: the game is untouched and the same seat moves again
        obs, reward, done, new_info = s.observation, col.invalid_penalty, False, dict(info)
        valid, action_text = False, f"(invalid: {parsed.error})"
    t = s.traj
    batch.add_row(group_id=t.group_id, traj_id=t.traj_id, step=t.length, reward=reward, done=False,
                  action_valid=valid, observation=obs_before, state_key=state_key, prompt_ids=prompt,
                  response_ids=list(gen.token_ids), sampling_logprobs=list(gen.logprobs),
                  allowed_tokens=getattr(gen, "allowed", None))
    last_row[t.traj_id] = len(batch) - 1
    t.length += 1
    t.episode_return += reward
    t.invalid_steps += int(not valid)
    t.transcript.append((obs_before, gen.text, action_text, reward))
    s.history.append((obs_before, parsed.action if parsed.valid else gen.text.strip()[:200]))
    game.observation, game.info = obs, new_info
    return bool(done)


def _finish(batch: SeatBatch, game: Any, seats: list[Any], info: dict, last_row: dict[int, int],
            acting: int | None = None) -> None:
    """End ``game``: each seat's final reward on its last row (``done``), its won / score / outcome."""
    game.active = False
    for q, s in enumerate(seats):
        t = s.traj
        reward, won, score, outcome = seat_outcome(info, q)
        if t.traj_id in last_row:
            i = last_row[t.traj_id]
            batch.done[i] = True
            if t.traj_id != acting:
                batch.reward[i] += reward
                t.episode_return += reward
                o, resp, act, r = t.transcript[-1]
                t.transcript[-1] = (o, resp, act, r + reward)
        t.won, t.score = won, score
        t.final_info = {**{k: v for k, v in info.items() if isinstance(v, (int, float, str, bool))},
                        "seat": q, "outcome": outcome}


def _fail_game(col: Any, game: Any, row: list[Any], where: str, e: EnvFault) -> None:
    """End every seat of ``game`` as failed (the collector's warning and env replacement, once)."""
    col._fail(game, where, e)
    for s in row:
        s.traj.failed, s.traj.error = True, game.traj.error
