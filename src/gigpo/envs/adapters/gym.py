"""``env=gym:ENV_ID``: a gymnasium env with a discrete action space as a text env.

* **Observation**: a text description. The toy-text envs get one made for them from their state (Taxi: the map
  with ``T`` on the taxi and where the passenger and destination are; FrozenLake: the map with ``P``; CliffWalking:
  its own render; Blackjack: the sums), because their ANSI renders mark positions by colour alone, which
  stripping the escape codes would erase. Any other env: its ``ansi`` render (escape codes stripped) when it
  has one, and ``state: <observation>``.
* **Actions**: named for the toy-text envs (Taxi: south, north, east, west, pickup, dropoff), else ``0``..``n-1``;
  all are admissible at every step (an illegal pickup is a legal gym action with its own penalty).
* **Termination vs truncation**: gymnasium's ``terminated`` / ``truncated``; ``done`` = either, and
  ``info["truncated"]`` marks the time limit (the spec's ``max_episode_steps``, also the env's ``max_steps``).
* **won**: the episode terminated with a positive final reward (Taxi's drop-off, FrozenLake's goal, a Blackjack
  win); CliffWalking, whose every step costs -1, is won when it terminates (the goal). ``score`` = ``won``.
  Other envs have no success notion gigpo could know (CartPole's termination is its failure): ``won`` is always
  False there and the episode return is the measure.
* **state_key**: the gym observation (Taxi's state number, FrozenLake's cell, Blackjack's tuple), hashable.
* **Groups**: ``reset(seed=seed)`` seeds the env's own generator, so envs reset with one seed and given the same
  actions stay identical (tested). A retired version (``Taxi-v3`` in gymnasium 1.4) is run as the current one,
  with one warning naming it.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from gigpo.envs.adapters._common import check_state_key, hashable_state, strip_ansi, unknown_id
from gigpo.envs.base import Env, EnvError

log = logging.getLogger(__name__)

#: Action names of the toy-text envs (by id family), in gym's action order.
ACTION_NAMES: dict[str, list[str]] = {
    "FrozenLake8x8": ["left", "down", "right", "up"],
    "Taxi": ["south", "north", "east", "west", "pickup", "dropoff"],
    "FrozenLake": ["left", "down", "right", "up"],
    "CliffWalking": ["up", "right", "down", "left"],
    "CliffWalkingSlippery": ["up", "right", "down", "left"],
    "Blackjack": ["stick", "hit"],
}
TASKS: dict[str, str] = {
    "FrozenLake8x8": "Reach the goal G without falling into a hole H.",
    "Taxi": "Pick up the passenger and drop them off at their destination.",
    "FrozenLake": "Reach the goal G without falling into a hole H.",
    "CliffWalking": "Walk from x's start to the goal T without stepping onto the cliff C.",
    "CliffWalkingSlippery": "Walk from x's start to the goal T without stepping onto the cliff C.",
    "Blackjack": "Beat the dealer: get closer to 21 than the dealer without going over.",
}
_LOCS = "RGYB"
_WARNED: set[str] = set()


def family(env_id: str) -> str:
    """``Taxi-v4`` -> ``Taxi`` (namespace and version dropped)."""
    return re.sub(r"-v\d+$", "", env_id.split("/")[-1])


def resolve(ident: str) -> tuple[str, dict[str, Any]]:
    import gymnasium

    if ident not in gymnasium.envs.registry:
        current = _current_version(ident, gymnasium.envs.registry)
        if current is None:
            raise unknown_id("gymnasium env", ident, gymnasium.envs.registry, "gym")
    return "gigpo.envs.adapters.gym:GymEnv", {"env_id": ident}


def _current_version(ident: str, registry: Any) -> str | None:
    """The registered id of ``ident``'s family with the highest version, when ``ident`` is a retired version."""
    fam = re.sub(r"-v\d+$", "", ident)
    versions = [k for k in registry if re.fullmatch(re.escape(fam) + r"-v\d+", k)]
    return max(versions, key=lambda k: int(k.rsplit("-v", 1)[1])) if versions and fam != ident else None


class GymEnv(Env):
    """A gymnasium env (discrete actions) behind the Env contract; see the module docstring.

    ``env_id``: a gymnasium id; ``state_key``: ``auto`` (the gym observation) or ``observation`` (the text);
    ``max_steps``: the step cap (default: the spec's ``max_episode_steps``, else 100). Any other keyword
    (``env.is_slippery=false``, ``env.map_name=8x8``) is passed to ``gymnasium.make``, checked first against what
    the env's constructor accepts (:func:`gym_make_options`); ``make_kwargs`` (a mapping, also
    ``env.make_kwargs.KEY=VALUE``) is the same, kept for old configs."""

    def __init__(self, env_id: str, *, state_key: str = "auto", max_steps: int | None = None,
                 make_kwargs: dict | None = None, **gym_kwargs: Any):
        import gymnasium

        self.state_key_mode = check_state_key(state_key)
        registry = gymnasium.envs.registry
        if env_id not in registry:
            current = _current_version(env_id, registry)
            if current is None:
                raise unknown_id("gymnasium env", env_id, registry, "gym")
            if env_id not in _WARNED:  # once per process, not once per env instance
                _WARNED.add(env_id)
                log.warning("gym:%s is retired in gymnasium %s; running %s", env_id, gymnasium.__version__, current)
            env_id = current
        self.env_id, self.family = env_id, family(env_id)
        spec = registry[env_id]
        kwargs = {**dict(make_kwargs or {}), **gym_kwargs}
        accepted = gym_make_options(env_id)
        unknown = sorted(set(kwargs) - set(accepted)) if accepted is not None else []
        if unknown:
            raise ValueError(f"gym:{env_id} does not accept {', '.join(unknown)}; its options are: "
                             f"{', '.join(sorted(accepted)) or '(none)'} (and the adapter's state_key, max_steps)")
        try:
            self._gym = gymnasium.make(env_id, **kwargs)
            self._ansi = "ansi" in (self._gym.metadata.get("render_modes") or [])
            if self._ansi:  # the same env, made to render text
                self._gym.close()
                self._gym = gymnasium.make(env_id, render_mode="ansi", **kwargs)
        except gymnasium.error.Error as err:
            raise ValueError(f"gym:{env_id}: {err}") from None
        space = self._gym.action_space
        if not isinstance(space, gymnasium.spaces.Discrete):
            raise ValueError(f"gym:{env_id} has a {type(space).__name__} action space; the gym adapter needs a "
                             "Discrete one (a text action per choice)")
        image = image_space(self._gym.observation_space)
        if image is not None:
            self._gym.close()
            raise ValueError(f"gym:{env_id} observes images ({image}); a language agent reads text, and a dump of "
                             "the pixels is no description: the env needs a text wrapper (a gigpo Env whose "
                             "observation describes the state, registered with gigpo.envs.register; "
                             "docs/envs/adapters.md)")
        names = ACTION_NAMES.get(self.family)
        self.actions = names if names and len(names) == space.n else [str(int(space.start) + i) for i in range(space.n)]
        self._start = int(space.start)
        limit = spec.max_episode_steps
        self.max_steps = int(max_steps or limit or 100)
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.task = TASKS.get(self.family, f"Play {env_id} well: maximise the reward.")
        self.instructions = (f"gymnasium {env_id}. {self.task} Each turn answer one action: "
                             f"{', '.join(self.actions)}.")
        self._obs: Any = None
        self._steps = 0
        self._done = True

    # ----------------------------------------------------------------------------------------------- text
    def render_text(self) -> str:
        u, obs = self._gym.unwrapped, self._obs
        if self.family == "Taxi":
            row, col, passenger, dest = u.decode(int(obs))
            lines = ["".join(c.decode() if isinstance(c, bytes) else c for c in line) for line in u.desc.tolist()]
            cells = list(lines[row + 1])
            cells[2 * col + 1] = "T"
            lines[row + 1] = "".join(cells)
            where = "in the taxi" if passenger == 4 else f"waiting at {_LOCS[passenger]}"
            return "\n".join(lines) + f"\nT = taxi. Passenger: {where}. Destination: {_LOCS[dest]}."
        if self.family.startswith("FrozenLake"):
            rows = [[c.decode() if isinstance(c, bytes) else c for c in r] for r in u.desc.tolist()]
            r, c = divmod(int(obs), len(rows[0]))
            rows[r][c] = "P"
            return "\n".join("".join(x) for x in rows) + "\nP = you."
        if self.family == "Blackjack":
            total, dealer, ace = obs
            return f"Your sum: {total}. Dealer shows: {dealer}. Usable ace: {'yes' if ace else 'no'}."
        text = strip_ansi(str(self._gym.render())).strip("\n") if self._ansi else ""
        if self.family.startswith("CliffWalking"):
            return text + "\nx = you."
        return (text + "\n" if text else "") + f"state: {_short(obs)}"

    def _info(self, **extra: Any) -> dict[str, Any]:
        key = hashable_state(self._obs) if self.state_key_mode == "auto" else None
        return {"task": self.task, "state_key": key, "admissible_actions": list(self.actions), **extra}

    # --------------------------------------------------------------------------------------------- contract
    def reset(self, seed: int) -> tuple[str, dict[str, Any]]:
        self._obs, _ = self._gym.reset(seed=int(seed) & 0xFFFF_FFFF_FFFF_FFFF)
        self._steps, self._done = 0, False
        text = self.render_text()
        info = self._info()
        if info["state_key"] is None:
            info["state_key"] = text
        return text, info

    def step(self, action: str) -> tuple[str, float, bool, dict[str, Any]]:
        if self._done:
            raise EnvError(f"gym:{self.env_id}: step() after the episode ended (or before reset())")
        self._steps += 1
        a = action.strip().lower() if isinstance(action, str) else ""
        if a not in self.actions:
            truncated = self._steps >= self.max_steps
            self._done = truncated
            text = self.render_text()
            info = self._info(won=False, action_valid=False, score=0.0, truncated=truncated)
            info["state_key"] = text if info["state_key"] is None else info["state_key"]
            return text, 0.0, truncated, info
        self._obs, reward, terminated, truncated, _ = self._gym.step(self._start + self.actions.index(a))
        truncated = bool(truncated) or (not terminated and self._steps >= self.max_steps)
        self._done = bool(terminated) or truncated
        won = bool(terminated) and self.family in TASKS and (float(reward) > 0 or self.family.startswith("Cliff"))
        text = self.render_text()
        info = self._info(won=won, action_valid=True, score=float(won), truncated=truncated)
        info["state_key"] = text if info["state_key"] is None else info["state_key"]
        return text, float(reward), self._done, info

    def close(self) -> None:
        self._gym.close()


def image_space(space: Any) -> str | None:
    """A description of the image in an observation space (a Box of 2+ dimensions of bytes, or 3 dimensions
    with 1-4 channels; also inside Dict/Tuple spaces), None when it holds none."""
    import gymnasium
    import numpy as np

    if isinstance(space, gymnasium.spaces.Dict):
        parts = [image_space(s) for s in space.spaces.values()]
    elif isinstance(space, gymnasium.spaces.Tuple):
        parts = [image_space(s) for s in space.spaces]
    elif isinstance(space, gymnasium.spaces.Box):
        shape = tuple(space.shape)
        channels = len(shape) == 3 and (shape[-1] in (1, 3, 4) or shape[0] in (1, 3, 4))
        if (len(shape) >= 2 and space.dtype == np.uint8) or channels:
            return f"Box {'x'.join(map(str, shape))} of {space.dtype}"
        return None
    else:
        return None
    return next((p for p in parts if p is not None), None)


def gym_make_options(env_id: str) -> list[str] | None:
    """The keywords ``gymnasium.make(env_id, ...)`` passes on to the env's constructor (its named parameters, the
    spec's own kwargs) plus make's wrappers' options; None when the constructor takes ``**kwargs`` (anything)."""
    import inspect

    import gymnasium

    spec = gymnasium.envs.registry[env_id]
    try:
        creator = gymnasium.envs.registration.load_env_creator(spec.entry_point) \
            if isinstance(spec.entry_point, str) else spec.entry_point
        params = inspect.signature(creator).parameters
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return None
    named = {n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)} - {"self"}
    # render_mode is the adapter's own (ansi where the env has it)
    return sorted((named | set(spec.kwargs) | {"max_episode_steps", "disable_env_checker"}) - {"render_mode"})


def _short(obs: Any) -> str:
    text = " ".join(str(obs.tolist() if hasattr(obs, "tolist") else obs).split())
    return text if len(text) <= 400 else text[:400] + "..."
