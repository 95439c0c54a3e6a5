"""``env=textarena:GAME_ID``: a TextArena game (``textarena`` 0.7.4) as a gigpo env.

* **Game**: TextArena's own env class for ``GAME_ID`` with the registry's keyword arguments, without its LLM
  wrappers (they re-send the whole history every turn; gigpo's prompt keeps its own). ``env.task_lines=K``
  keeps the player prompt's last K lines as the task (TicTacToe's last line says which mark you are), for
  models with short contexts; ``env.observation=board`` shows only the newest board message (and what follows
  it) instead of every message since the player's last turn. Players: the smallest count
  the game's state accepts (1 for single-player games, 2 for TicTacToe), or ``env.num_players``.
* **Observation**: the messages the player received since its last turn (``[GAME] ...``, ``[Player 1] [4]``),
  TextArena's per-player stream; the game's player prompt (rules, which mark you are) is the ``task``.
* **Actions**: the legal moves where the adapter can list them (computed from the game state for TicTacToe,
  ConnectFour, Nim, TowerOfHanoi, GuessTheNumber; else read from the board message's "Available moves:" list),
  so ``rollout.decoding=constrained`` works; other games take free text (``admissible_actions=None``). A move the
  game rejects is an invalid action (``action_valid=False``, state unchanged, TextArena's own error allowance
  applies: a second one in a row loses), never a crash.
* **Rewards**: TextArena's final per-player reward (two players: win 1, draw 0, loss -1; single-player games: their
  own, e.g. GuessTheNumber's closeness), at the step that ends the game; 0 before. ``won``: reward > 0 in an
  N-player game, reward >= 1 in a single-player one; ``score``: win 1, draw 0.5, loss 0 (single-player: the
  reward clipped to [0, 1]). ``info["outcome"]``: win / draw / loss.
* **Opponents** (N-player games), ``env.opponent``:
  ``random`` (default) — the other seats play uniformly random legal moves, from a generator seeded by the reset
  seed (so a group's envs face the same opponent given the same moves); the agent's seat is ``env.seat``
  (``auto``: ``seed % num_players``, so both seats are trained across tasks while a group shares one).
  ``self`` — the multi-seat contract of :mod:`gigpo.envs.multiseat`: the env reports the seat to move and each
  seat's final reward; the rollout (:mod:`gigpo.rollout.multiseat`) lets one shared policy play every seat.
  ``openai:MODEL`` — multi-seat as well; the seats other than the agent's are played by that model, called from
  the rollout side (this env knows nothing of models).
* **state_key**: TextArena's ``game_state`` (the board; canonical JSON) plus the seat to move.
* **Groups**: TextArena seeds Python's global ``random`` at reset and games draw from it later; this adapter
  keeps one ``random`` state per env instance and swaps it in around every call, so envs interleaved in one
  process stay independent and a group's envs identical (tested).
* **Downloads**: games that load NLTK corpora (Wordle, Hangman, WordLadder, SpellingBee, ...) would download them
  at run time; they are refused unless the corpora are already installed (``python -m nltk.downloader words``).
"""

from __future__ import annotations

import importlib
import importlib.util
import random
import re
from typing import Any

from gigpo.envs.adapters._common import check_state_key, hashable_state, unknown_id
from gigpo.envs.base import ActionSpec, Env, EnvError

OPPONENTS = ("random", "self")
_LISTED = re.compile(r"(?:available|valid|legal)\s+(?:moves|actions)(?:\s+are)?\s*:\s*(.*)", re.IGNORECASE)
_BRACKETED = re.compile(r"\[[^\[\]\n]{1,40}\]")
#: a line of a game's prompt that shows the move format ("For example: '[col 4]'", "(e.g., '[A C]')")
_FORMAT_LINE = re.compile(r"example|e\.g\.|format|type the|enter", re.IGNORECASE)


def _registry() -> dict[str, Any]:
    from textarena.envs.registration import ENV_REGISTRY

    return ENV_REGISTRY


def resolve(ident: str) -> tuple[str, dict[str, Any]]:
    if ident not in _registry():
        raise unknown_id("TextArena game", ident, _registry(), "textarena")
    return "gigpo.envs.adapters.textarena:TextArenaEnv", {"game": ident}


def _needs_nltk_data(module_name: str) -> str | None:
    """The NLTK resource a game's module would download, when it is not installed; None if it needs none."""
    spec = importlib.util.find_spec(module_name)
    source = open(spec.origin).read() if spec and spec.origin else ""
    if "nltk" not in source and "word_lists" not in source:
        return None
    import nltk

    for resource in ("corpora/words",):
        try:
            nltk.data.find(resource)
        except LookupError:
            return resource
    return None


# ---------------------------------------------------------------------------------------- legal moves per game
def _tictactoe(env: Any) -> list[str]:
    b = env.state.game_state["board"]
    return [f"[{r * 3 + c}]" for r in range(3) for c in range(3) if b[r][c] == ""]


def _connectfour(env: Any) -> list[str]:
    b = env.state.game_state["board"]
    return [f"[col {c}]" for c in range(env.num_cols) if b[0][c] == "."]


def _nim(env: Any) -> list[str]:
    return [f"[{i} {q}]" for i, n in enumerate(env.state.game_state["piles"]) for q in range(1, n + 1)]


def _hanoi(env: Any) -> list[str]:
    t = env.state.game_state["towers"]
    return [f"[{a} {b}]" for a in "ABC" for b in "ABC"
            if a != b and t[a] and (not t[b] or t[b][-1] > t[a][-1])]


def _guess(env: Any) -> list[str]:
    tried = {int(g[0]) for g in env.state.game_state.get("guess_history", [])}  # a repeated guess is refused
    return [f"[{n}]" for n in range(env.min_number, env.max_number + 1) if n not in tried]


def format_examples(prompt: str) -> list[str]:
    """The bracketed moves a game's own prompt gives as its format (ConnectFour: ``['[col 4]', '[col 1]']``;
    TowerOfHanoi: ``['[A C]']``), from its lines that say "example", "e.g.", "format", ...; [] when none."""
    found: list[str] = []
    for line in prompt.splitlines():
        if _FORMAT_LINE.search(line):
            found += [m for m in _BRACKETED.findall(line) if m not in found]
    return found


LEGAL_MOVES = {"TicTacToeEnv": _tictactoe, "ConnectFourEnv": _connectfour, "NimEnv": _nim,
               "TowerOfHanoiEnv": _hanoi, "GuessTheNumberEnv": _guess}


def listed_moves(text: str) -> list[str] | None:
    """Moves of a board message's "Available moves: '[0]', '[1]'" line (bracketed items), or None."""
    for line in reversed(text.splitlines()):
        m = _LISTED.search(line)
        if m:
            moves = list(dict.fromkeys(_BRACKETED.findall(m.group(1))))
            return moves or None
    return None


class TextArenaEnv(Env):
    """A TextArena game behind the Env contract (module docstring). Multi-seat when ``opponent`` is ``self`` or
    ``openai:MODEL``: ``seats`` > 1 and every info carries ``seat`` (see :mod:`gigpo.envs.multiseat`)."""

    def __init__(self, game: str, *, opponent: str = "random", seat: str = "auto", num_players: int = 0,
                 state_key: str = "auto", max_steps: int = 0, task_lines: int = 0, observation: str = "messages",
                 opponent_base_url: str = ""):
        if game not in _registry():
            raise unknown_id("TextArena game", game, _registry(), "textarena")
        if opponent not in OPPONENTS and not (opponent.startswith("openai:") and len(opponent) > 7):
            raise ValueError(f"opponent must be random, self or openai:MODEL, got {opponent!r}")
        if opponent.startswith("openai:") and not opponent_base_url:
            raise ValueError(f"opponent={opponent} needs opponent_base_url (an OpenAI-compatible server, e.g. "
                             "http://127.0.0.1:8000/v1)")
        self.opponent_base_url = opponent_base_url
        if seat != "auto" and not seat.isdigit():
            raise ValueError(f"seat must be auto or a seat number, got {seat!r}")
        self.state_key_mode = check_state_key(state_key)
        if task_lines < 0:
            raise ValueError(f"task_lines must be >= 0 (0 = the whole player prompt), got {task_lines}")
        self.task_lines = task_lines
        if observation not in ("messages", "board"):
            raise ValueError(f"observation must be messages or board, got {observation!r}")
        self.observation_mode = observation
        spec = _registry()[game]
        if isinstance(spec.entry_point, str):
            module_name, _, cls = spec.entry_point.partition(":")
            missing = _needs_nltk_data(module_name)
            if missing:
                raise ValueError(f"textarena:{game} loads NLTK's {missing!r}, which gigpo never downloads at run "
                                 f"time; install it first (python -m nltk.downloader {missing.split('/')[-1]}) or "
                                 "pick a game without word lists")
            factory = getattr(importlib.import_module(module_name), cls)
        else:
            factory = spec.entry_point
        self.game, self.opponent, self.seat_option = game, opponent, seat
        self._ta = factory(**spec.kwargs)
        self._legal = LEGAL_MOVES.get(type(self._ta).__name__)
        self._examples: list[str] = []
        self.num_players = self._players() if not num_players else (self._players() and num_players)
        if seat != "auto" and int(seat) >= self.num_players:
            raise ValueError(f"seat {seat} does not exist: textarena:{game} has {self.num_players} player(s)")
        self.multiseat = self.num_players > 1 and opponent != "random"
        self.seats = self.num_players if self.multiseat else 1
        # the step cap counts this env's step() calls: the agent's turns, or every seat's in multi-seat mode
        turns = int(getattr(self._ta, "max_turns", 0) or 0) or (9 if type(self._ta).__name__ == "TicTacToeEnv" else 100)
        self.max_steps = int(max_steps or turns * (self.num_players if self.multiseat else 1))
        #: the move format in the game's own words (its player prompt), shown in the instructions (system message)
        self.format_hint = " or ".join(self._examples[:2])
        self.instructions = (f"TextArena {game}. Answer with one move in the game's format"
                             + (f", e.g. {self.format_hint}" if self.format_hint else " (see the rules)")
                             + ". An illegal move is refused (the game may count it against you).")
        self._rng_state: Any = None
        self._last_text = ""
        self._opp_rng = random.Random(0)
        self._agent_seat = 0
        self._done = True
        self._tasks: dict[int, str] = {}
        self._steps = 0

    def _players(self) -> int:
        """The smallest player count the game accepts; its player prompt's format examples are kept too."""
        import textarena as ta

        for n in range(1, 16):
            saved = random.getstate()
            try:
                self._ta.reset(num_players=n, seed=0)
                prompts = [str(m) for _, m, kind in self._ta.get_observation()[1] if kind == ta.ObservationType.PROMPT]
                self._examples = format_examples("\n".join(prompts))
                return n
            except (AssertionError, ValueError, KeyError, IndexError):
                continue
            finally:
                random.setstate(saved)
        raise ValueError(f"textarena:{self.game}: no player count from 1 to 15 is accepted by its reset()")

    # ------------------------------------------------------------------------------------------ isolation
    def _call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn`` with this env's own global-``random`` state swapped in (module docstring, Groups)."""
        saved = random.getstate()
        if self._rng_state is not None:
            random.setstate(self._rng_state)
        try:
            return fn(*args)
        finally:
            self._rng_state = random.getstate()
            random.setstate(saved)

    def _watch_invalid(self) -> None:
        """Note every call of the game state's ``set_invalid_move`` (TextArena clears its own flag in ``step``)."""
        state = self._ta.state
        original = state.set_invalid_move

        def noted(*args: Any, **kwargs: Any) -> Any:
            self._invalid = True
            return original(*args, **kwargs)

        state.set_invalid_move = noted
        self._invalid = False

    # ---------------------------------------------------------------------------------------------- views
    def _moves(self, text: str) -> list[str] | None:
        if self._legal is not None:
            try:
                return self._legal(self._ta) or None
            except (KeyError, AttributeError, TypeError, IndexError):
                return None
        return listed_moves(text)

    def action_spec(self) -> ActionSpec:
        """Constrained decoding where this adapter lists the legal moves (now, after a reset); else free text
        with the game's own format examples (module docstring, Actions)."""
        legal = self._moves(self._last_text) if not self._done else None
        # computed from the game state at every step (LEGAL_MOVES): constrained decoding never meets a step
        # without a list; a board's "Available moves:" line may be missing on some turns, so those stay free text
        return ActionSpec(legal_actions=bool(legal) and self._legal is not None,
                          examples=tuple(legal or self._examples),
                          format_hint=self.format_hint)

    def _observe(self) -> tuple[int, str]:
        import textarena as ta

        pid, messages = self._ta.get_observation()
        parts = []
        for sender, message, kind in messages:
            if kind == ta.ObservationType.PROMPT:
                lines = [ln for ln in str(message).strip().splitlines() if ln.strip()]
                self._tasks[pid] = "\n".join(lines[-self.task_lines:] if self.task_lines else lines)
                continue
            who = "GAME" if sender == ta.GAME_ID else f"Player {sender}"
            if self.observation_mode == "board" and kind == ta.ObservationType.GAME_BOARD:
                parts = []  # the newest board is the state: the messages before it are dropped
            parts.append(f"[{who}] {str(message).strip()}")
        return pid, "\n".join(parts)

    def _info(self, pid: int, text: str) -> dict[str, Any]:
        key = None
        if self.state_key_mode == "auto":
            key = (pid, hashable_state(self._ta.state.game_state))
        info = {"task": self._tasks.get(pid, ""), "state_key": key if key is not None else text,
                "admissible_actions": self._moves(text)}
        if self.multiseat:
            info["seat"], info["seats"] = pid, self.num_players
        elif self.num_players > 1:  # evaluation tables break success down per seat
            info["data_source"] = f"seat{self._agent_seat}"
        return info

    # ------------------------------------------------------------------------------------------- contract
    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        self._rng_state = None
        self._tasks = {}
        self._call(self._ta.reset, self.num_players, int(seed))
        self._watch_invalid()
        self._opp_rng = random.Random(int(seed) * 7919 + 17)
        self._agent_seat = int(seed) % self.num_players if self.seat_option == "auto" else int(self.seat_option)
        self._done, self._steps = False, 0
        pid, text = self._call(self._observe)
        if not self.multiseat and self.num_players > 1:
            pid, text, _ = self._opponents_move(pid, text)
        self._last_text = text
        info = self._info(pid, text)
        if self.multiseat and self.opponent != "self":
            info.update(opponent=self.opponent, opponent_base_url=self.opponent_base_url,
                        policy_seats=[self._agent_seat])
        return text, info

    def _opponents_move(self, pid: int, text: str) -> tuple[int, str, bool]:
        """Random moves for the other seats until the agent's turn or the game's end."""
        done = False
        while pid != self._agent_seat and not done:
            moves = self._moves(text)
            if not moves:
                raise EnvError(f"textarena:{self.game}: opponent=random needs the legal moves, which this adapter "
                               "cannot list for this game; use env.opponent=self")
            done, _ = self._call(self._ta.step, self._opp_rng.choice(moves))
            pid, text = self._call(self._observe)  # the agent's stream holds the opponent's move and the board
        return pid, text, done

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self._done:
            raise EnvError(f"textarena:{self.game}: step() after the game ended (or before reset())")
        acting = self._ta.state.current_player_id
        self._steps += 1
        self._invalid = False
        done, _ = self._call(self._ta.step, str(action))
        invalid = self._invalid
        pid, text = self._call(self._observe)
        if not done and not self.multiseat and self.num_players > 1 and pid != self._agent_seat:
            pid, text, done = self._opponents_move(pid, text)
        truncated = not done and self._steps >= self.max_steps
        self._done = bool(done) or truncated
        info = self._info(pid, text)
        info.update(action_valid=not invalid, won=False, score=0.0, truncated=truncated)
        reward = 0.0
        if self._done:
            rewards = (self._ta.state.rewards or {}) if done else {}
            me = acting if self.multiseat else self._agent_seat
            per_seat = [float(rewards.get(s, 0.0)) for s in range(self.num_players)]
            outcomes = [self._outcome(r) for r in per_seat]
            reward = per_seat[me]
            info.update(won=outcomes[me][0] == "win", outcome=outcomes[me][0], score=outcomes[me][1])
            if self.multiseat:
                info.update(seat_rewards=per_seat, seat_won=[o[0] == "win" for o in outcomes],
                            seat_scores=[o[1] for o in outcomes], seat_outcomes=[o[0] for o in outcomes])
        return text, reward, self._done, info

    def _outcome(self, reward: float) -> tuple[str, float]:
        if self.num_players == 1:
            return ("win" if reward >= 1.0 else "loss"), min(max(reward, 0.0), 1.0)
        return ("win", 1.0) if reward > 0 else ("draw", 0.5) if reward == 0 else ("loss", 0.0)

    def close(self) -> None:
        pass
