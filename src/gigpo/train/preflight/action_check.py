"""Stop a run that cannot act: responses that never form a move the env accepts.

A response budget too short for the env's moves, or free text where the env needs its exact move syntax, gives a
valid-action rate of exactly 0 — every step invalid, every episode run to its step cap, nothing to learn. Training
stops after ``train.stop_without_valid_actions`` such iterations at its start, and ``gigpo eval`` after its first
:data:`EVAL_FIRST_EPISODES` episodes, each with one line naming the keys to change (:func:`advice`). A run that
has made one valid move at its start is never stopped by this (a policy may still learn to be invalid later; that
is the health alerts' business).

A model may well make no valid move for a while although one fits (an untrained model's greedy move: ``gigpo eval
--model tiny --env gridgoal``, the README's baseline, is 0.00 valid, a true baseline). So both stop only when the
settings are the cause: free decoding with a response budget shorter, in the model's own tokens, than the env's
shortest move (:func:`no_move_fits`), which the keys named fix.
"""

from __future__ import annotations

from typing import Any

#: ``gigpo eval`` checks its first this many episodes (the same first seeds for every ``--episodes``)
EVAL_FIRST_EPISODES = 8


class NoValidActions(RuntimeError):
    """No step of the run's start was a valid action (module docstring); the message names the keys to change.
    ``gigpo train`` reports it as one line and exits 1, ``gigpo eval`` exits 2."""


def advice(cfg: Any) -> str:
    """Which keys to change so the responses can form the env's moves, from the env's own spec."""
    from gigpo.train.config.env_settings import probe_action_spec, settings_for

    r = cfg.rollout
    spec = probe_action_spec(cfg.env.name, dict(cfg.env.options))
    fits = settings_for(spec) if spec is not None else {}
    keys = []
    if fits.get("rollout.decoding") == "constrained" and r.decoding != "constrained":
        keys.append("rollout.decoding=constrained (the env lists its legal moves)")
    need = fits.get("rollout.max_response_tokens")
    if need and r.max_response_tokens < need:
        example = max(spec.examples, key=len) if spec is not None and spec.examples else ""
        keys.append(f"rollout.max_response_tokens={need} (now {r.max_response_tokens}; a move such as "
                    f"{example!r} takes up to {need - 1} tokens)")
    if not keys:
        keys.append(f"rollout.max_response_tokens (now {r.max_response_tokens}), prompt.format / "
                    "prompt.instructions (the env's rules and move format in the prompt)")
    return "; ".join(keys)


def no_move_fits(cfg: Any, tokenizer: Any) -> bool:
    """Whether, under free decoding, no legal move of the env (its reset's ``admissible_actions``, else its
    declared examples) fits in ``rollout.max_response_tokens`` of ``tokenizer``'s tokens. False when the env names
    no move (nothing to measure) or decoding is constrained (every sampled move is legal)."""
    from gigpo.envs.registry import make
    from gigpo.train.config.env_settings import PROBE_SEED, probe_action_spec
    from gigpo.train.preflight.env_probe import probe

    if cfg.rollout.decoding == "constrained":
        return False

    def listed() -> list[str]:
        env = make(cfg.env.name, **dict(cfg.env.options))
        try:
            _, info = env.reset(PROBE_SEED)
            return list((info or {}).get("admissible_actions") or [])
        finally:
            env.close()

    moves = probe(listed)[1] or []
    if not moves:
        spec = probe_action_spec(cfg.env.name, dict(cfg.env.options))
        moves = list(spec.examples) if spec is not None else []
    if not moves:
        return False
    shortest = min(len(tokenizer.encode(str(m), add_special_tokens=False)) for m in moves)
    return shortest > int(cfg.rollout.max_response_tokens)


def check_training_start(cfg: Any, it: int, rec: dict, history: list[float], tokenizer: Any) -> None:
    """Raise :class:`NoValidActions` when iterations 1..K (K = ``train.stop_without_valid_actions``) all had a
    valid-action rate of 0 and no move fits the response budget (:func:`no_move_fits`: a key change is known to
    help); ``history`` keeps the rates seen so far (the caller's list)."""
    k = int(cfg.train.stop_without_valid_actions)
    if not k or it > k or "rollout/valid_action_rate" not in rec:
        return
    history.append(float(rec["rollout/valid_action_rate"]))
    if len(history) == k and max(history) == 0.0 and no_move_fits(cfg, tokenizer):
        raise NoValidActions(
            f"no valid action in the first {k} iterations (rollout/valid_action_rate 0.00): the responses never "
            f"form a move env {cfg.env.name!r} accepts; set {advice(cfg)} (train.stop_without_valid_actions=0 "
            "trains on regardless)")


def check_evaluation_start(cfg: Any, summary: dict, episodes: int, total: int, tokenizer: Any) -> None:
    """Raise :class:`NoValidActions` when the first ``episodes`` of an evaluation of ``total`` made no valid action
    and no move fits the response budget (:func:`no_move_fits`; off with ``train.stop_without_valid_actions=0``)."""
    if not int(cfg.train.stop_without_valid_actions) or summary.get("valid_action_rate", 1.0) != 0.0:
        return
    if not no_move_fits(cfg, tokenizer):  # a true baseline of a model that cannot play yet (module docstring)
        return
    raise NoValidActions(
        f"no valid action in the first {episodes} of {total} episodes (valid_action_rate 0.00, success "
        f"{summary.get('success_rate', 0.0):.3f}): the responses never form a move env {cfg.env.name!r} accepts; "
        f"set {advice(cfg)} (train.stop_without_valid_actions=0 evaluates every episode regardless)")
