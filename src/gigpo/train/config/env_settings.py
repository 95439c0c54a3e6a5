"""Settings that fit the env, for runs that name an env without a preset of their own.

``gigpo train env=textarena:ConnectFour-v0`` reads the quickstart preset, written for gridgoal: one free-text token
per response, which can never spell ``[col 4]``. The rule (docs/configuration.md "Settings from the env"): when the
env of a run is not the env of its config file (the env was named on the command line, or by ``gigpo eval --env``),
the env's own :class:`gigpo.envs.base.ActionSpec` sets the keys of :data:`ENV_KEYS`, except those the user gave
as ``key=value``. The file's values stay when the file names the env itself (it was written for it).

The spec is the env's :meth:`~gigpo.envs.base.Env.action_spec` after one reset, or, for an env that declares none
and is not one of gigpo's built-ins (an env of your own, ``--import``-ed or from a plugin), read from that reset:
``admissible_actions`` listed → constrained decoding over them. The built-in envs declare none: each has presets
of its own (``gigpo train --config sokoban``), and their tests and documented figures use those. The budget is
the longest example move's length in characters plus one (a token of these tokenizers spells at least one
character; the end token) — an upper bound, so a legal move always fits; constrained decoding stops as soon as a
move is complete, so a larger budget costs nothing there.
"""

from __future__ import annotations

from typing import Any

from gigpo.envs.base import ActionSpec

#: the keys an env's spec may set (and nothing else: model, prompt and optimiser settings stay the preset's)
ENV_KEYS = ("rollout.decoding", "rollout.max_response_tokens")
#: reset seed of the probe: a held-out seed (gigpo.train.compose.EVAL_SEED_BASE), never a training task
PROBE_SEED = 2**30


def probe_action_spec(name: str, options: dict[str, Any]) -> ActionSpec | None:
    """The :class:`ActionSpec` of env ``name`` built with ``options``, after one reset; None when the env declares
    none and lists no admissible actions, or cannot be built here (its own error comes from the env checks)."""
    from gigpo.envs.registry import make
    from gigpo.train.preflight.env_probe import probe

    def spec_after_reset() -> ActionSpec | None:
        env = make(name, **options)
        try:
            _, info = env.reset(PROBE_SEED)
            declared = getattr(env, "action_spec", None)
            spec = declared() if callable(declared) else None
            if spec is None and not builtin(name) and isinstance(info, dict) and info.get("admissible_actions"):
                spec = ActionSpec(legal_actions=True, examples=tuple(str(a) for a in info["admissible_actions"]))
            return spec
        finally:
            env.close()

    # an env that cannot be built, raises or hangs: no settings here; validate() / preflight / the rollout's env
    # guard report it with its own message
    return probe(spec_after_reset)[1]


def builtin(name: str) -> bool:
    """Whether env ``name`` is one of gigpo's own (module ``gigpo.envs.*``, the adapters excepted)."""
    from gigpo.envs.registry import get_spec

    entry = get_spec(name).entry_point
    module = entry.partition(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
    return module.startswith("gigpo.envs.") and not module.startswith("gigpo.envs.adapters.")


def settings_for(spec: ActionSpec) -> dict[str, Any]:
    """``{key: value}`` for :data:`ENV_KEYS` that fit ``spec`` (module docstring)."""
    out: dict[str, Any] = {"rollout.decoding": "constrained" if spec.legal_actions else "free"}
    if spec.examples:
        out["rollout.max_response_tokens"] = max(len(a) for a in spec.examples) + 1
    return out


def fitted_settings(cfg: Any, user_keys: set[str]) -> dict[str, Any]:
    """``{key: value}`` of :data:`ENV_KEYS` that ``cfg``'s env's spec sets and that differ from ``cfg``, except
    ``user_keys``; the caller applies them (:func:`gigpo.train.config.load.fit_to_env`)."""
    spec = probe_action_spec(cfg.env.name, dict(cfg.env.options))
    if spec is None:
        return {}
    changed = {}
    for key, value in settings_for(spec).items():
        section, _, field = key.partition(".")
        if key not in user_keys and getattr(getattr(cfg, section), field) != value:
            changed[key] = value
    return changed


class EnvSettingsNote(UserWarning):
    """The one-line note of :func:`fit_to_env`: which keys the env's spec set."""
