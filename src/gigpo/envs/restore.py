"""Bringing an env back to a visited state of an episode — by its own snapshot, or by verified replay (any env) —
the basis of branch rollouts (docs/design.md "Branch rollouts").

An env is restored to the state before step ``t`` of an episode by ``reset(seed)`` and the ``t`` recorded actions
that reached the env (an invalid response never steps it). Replay is only as good as the env's determinism given
its seed and actions, so it is **verified**: every replayed observation and state key must equal the recorded
one, else :class:`ReplayDivergence` — one line naming the env, the seed and the step. :func:`determinism_problem`
is the check made before training: a short random episode replayed twice, on the same instance and on a fresh
one (an env that keeps an RNG across episodes, or one per instance, fails it). An env with the optional
``snapshot()`` / ``restore(snapshot)`` pair is restored by it instead (any env state, RNGs included; no replay),
checked by :func:`snapshot_round_trip`.

Envs know nothing of models; this module only calls ``reset``, ``step``, ``snapshot`` and ``restore``. Steps in
its messages count env steps (an invalid response is an agent turn but no env step).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from gigpo.envs.base import Env, EnvError
from gigpo.envs.faults import can_snapshot


class ReplayDivergence(EnvError):
    """A replayed episode left its recording: the env is not deterministic given its seed and actions."""


@dataclass(frozen=True)
class Visit:
    """What the episode showed at one state: the observation text and the state key (the anchor of exact
    grouping: ``info["state_key"]``, else the observation)."""

    observation: str
    state_key: Hashable

    @staticmethod
    def of(observation: str, info: dict[str, Any]) -> Visit:
        """The visit an env's output shows. An env that adds per-instance noise to what it shows (the ads wrapper,
        :mod:`gigpo.envs.wrappers`) gives the noise-free text as ``info["clean_observation"]``: that is what is
        compared, since a restored copy is another instance with its own noise."""
        clean = info.get("clean_observation")
        return Visit(clean if isinstance(clean, str) else observation, Env.state_key_of(info, observation))


def divergence(name: str, seed: int, step: int, recorded: Visit, replayed: Visit, how: str = "replay") -> str:
    """The one line that says where a replay left its recording (``step`` = env steps replayed; 0 = the reset);
    ``how="snapshot"``: a restored snapshot did not show the state it was taken in."""
    what = "observation" if recorded.observation != replayed.observation else "state key"
    got, want = ((replayed.observation, recorded.observation) if what == "observation"
                 else (replayed.state_key, recorded.state_key))
    at = "after reset" if step == 0 else f"after step {step}"
    diff = f"({_short(got)} != {_short(want)}); it cannot be branched (rollout.branch=off)"
    if how == "snapshot":
        return (f"env {name!r} does not restore its snapshots: seed {seed}, the {what} restored from a snapshot "
                f"taken {at} differs from the recorded one {diff}")
    return (f"env {name!r} is not deterministic given its seed and actions: replaying seed {seed}, the {what} "
            f"{at} differs from the recorded one {diff}")


def check_visit(name: str, seed: int, step: int, recorded: Visit, replayed: Visit, how: str = "replay") -> None:
    """Raise :class:`ReplayDivergence` unless ``replayed`` equals ``recorded``."""
    if replayed != recorded:
        raise ReplayDivergence(divergence(name, seed, step, recorded, replayed, how))


def replay(env: Env, seed: int, actions: Sequence[str], recorded: Sequence[Visit], name: str = "") -> tuple[str, dict]:
    """Reset ``env`` with ``seed`` and step it with ``actions``, checking each visit against ``recorded``
    (``len(actions) + 1`` visits: after the reset and after each step). Returns the last ``(observation, info)``:
    the env now stands where the recording ended."""
    if len(recorded) != len(actions) + 1:
        raise ValueError(f"replay needs one recorded visit per action plus the reset's, got {len(recorded)} for "
                         f"{len(actions)} actions")
    name = name or type(env).__name__
    obs, info = env.reset(seed)
    check_visit(name, seed, 0, recorded[0], Visit.of(obs, info))
    for t, action in enumerate(actions, start=1):
        obs, _, _, info = env.step(action)
        check_visit(name, seed, t, recorded[t], Visit.of(obs, info))
    return obs, info


def random_episode(env: Env, seed: int, steps: int, rng: random.Random) -> tuple[list[str], list[Visit]]:
    """Play up to ``steps`` steps from ``reset(seed)``, each action drawn by ``rng`` from the admissible ones
    (the oracle's when the env lists none, else a fixed word); returns the actions and the visits."""
    obs, info = env.reset(seed)
    visits, actions = [Visit.of(obs, info)], []
    for _ in range(steps):
        choices = info.get("admissible_actions") or []
        if choices:
            action = rng.choice(list(choices))
        elif callable(getattr(env, "oracle_action", None)):
            action = env.oracle_action()
        else:
            action = "look"
        obs, _, done, info = env.step(action)
        actions.append(action)
        visits.append(Visit.of(obs, info))
        if done:
            break
    return actions, visits


def snapshot_round_trip(first: Env, second: Env, seed: int, steps: int, rng: random.Random, name: str) -> None:
    """Play from ``reset(seed)``, snapshot ``first`` midway, restore the snapshot into ``second`` and play both on
    with the same actions: every visit of ``second`` must equal ``first``'s (the snapshot holds the whole state,
    RNGs included), else :class:`ReplayDivergence`."""
    half = max(steps // 2, 1)
    actions, visits = random_episode(first, seed, half, rng)
    obs, info = second.restore(first.snapshot())  # type: ignore[attr-defined]
    check_visit(name, seed, len(actions), visits[-1], Visit.of(obs, info), "snapshot")
    if len(actions) < half:  # the episode ended: nothing to play on from
        return
    for k in range(len(actions) + 1, steps + 1):
        choices = info.get("admissible_actions") or ["look"]
        a = rng.choice(list(choices))
        o1, _, done, i1 = first.step(a)
        obs, _, _, info = second.step(a)
        check_visit(name, seed, k, Visit.of(o1, i1), Visit.of(obs, info), "snapshot")
        if done:
            break


def determinism_problem(make_env: Callable[[], Env], name: str, seeds: Sequence[int] = (11, 12),
                        steps: int = 8) -> str | None:
    """None when ``make_env``'s envs can be restored, else the one line :func:`divergence` gives. An env with
    ``snapshot()`` / ``restore()`` must restore a snapshot into a fresh instance that then plays on as the original
    does; any other env must replay a short random episode per seed exactly — on the instance that played it
    (after another episode) and on a fresh instance. An env whose methods raise during the check is reported the
    same way (it cannot be branched either)."""
    first, second = make_env(), make_env()
    try:
        rng = random.Random(0)
        for seed in seeds:
            if can_snapshot(first):
                snapshot_round_trip(first, second, seed, steps, rng, name)
                continue
            actions, visits = random_episode(first, seed, steps, rng)
            for env in (second, first):
                replay(env, seed, actions, visits, name)
    except ReplayDivergence as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - a user env: whatever it raises means it cannot be branched
        how = "restoring a snapshot" if can_snapshot(first) else "replaying a recorded episode"
        return (f"env {name!r} cannot be branched: {how} raised {type(e).__name__}: "
                f"{' '.join(str(e).split())[:200]} (rollout.branch=off)")
    finally:
        first.close()
        second.close()
    return None


def _short(x: Any, limit: int = 60) -> str:
    text = " ".join(repr(x).split())
    return text if len(text) <= limit else text[:limit] + "..."
