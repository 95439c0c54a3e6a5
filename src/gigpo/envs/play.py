"""A person plays any text env in the terminal (the body of `gigpo play`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gigpo.envs.base import Env

QUIT_WORDS = frozenset({"quit", "exit", ":q"})


@dataclass
class PlayResult:
    """Outcome of one played episode."""

    steps: int
    total_reward: float
    won: bool
    done: bool  # False when the player quit (or input ended) before the episode ended


def play(
    env: Env,
    seed: int,
    input_fn: Callable[[str], str] = input,
    print_fn: Callable[..., None] = print,
) -> PlayResult:
    """Play one episode of ``env`` from ``seed``, reading actions with ``input_fn`` and showing text with ``print_fn``.

    Shows the instructions and task once, then per turn the observation and the admissible actions; after each
    action the reward, whether the action was valid, and the running return. ``quit`` (or ``exit``, or end of input)
    stops early. Returns a :class:`PlayResult`.
    """
    observation, info = env.reset(seed)
    if env.instructions:
        print_fn(env.instructions)
    if info.get("task"):
        print_fn(f"Task: {info['task']}")
    steps, total, won, done = 0, 0.0, False, False
    while not done:
        print_fn(f"\n--- step {steps} ---\n{observation}")
        actions = info.get("admissible_actions")
        if actions:
            print_fn("Actions: " + ", ".join(actions))
        try:
            action = input_fn("> ").strip()
        except (EOFError, KeyboardInterrupt):
            print_fn("")
            break
        if action.lower() in QUIT_WORDS:
            break
        observation, reward, done, info = env.step(action)
        steps += 1
        total += reward
        won = bool(info.get("won", False))
        valid = "" if info.get("action_valid", True) else "  (invalid action: state unchanged)"
        print_fn(f"reward {reward:+g}  return {total:+g}{valid}")
    if done:
        print_fn(
            f"\n{observation}\n{'You won!' if won else 'Episode over.'} Return {total:+g} in {steps} steps."
        )
    else:
        print_fn(f"Stopped after {steps} steps. Return {total:+g}.")
    return PlayResult(steps=steps, total_reward=total, won=won, done=done)
