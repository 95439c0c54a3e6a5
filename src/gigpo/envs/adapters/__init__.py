"""Adapters for environments written for other packages, registered by prefix (``env=PREFIX:ID``).

Each adapter is one module, imported only when an env of its prefix is asked for; this module imports none of
them (``gigpo envs`` lists the families and the extra each needs). Every adapter follows the Env contract of
:mod:`gigpo.envs.base`: ``done`` = terminated or truncated, ``info["truncated"]`` marks a time/step limit, and
``state_key`` is what the package exposes as the true state (``env.state_key=observation`` overrides it).
A package's own network fetches (word lists, hub data) never run: an env that would need one is refused with a
one-line error saying what is missing.

verifiers: the adapter drives verifiers 0.3.1's classic ``MultiTurnEnv`` (``verifiers.legacy``); 0.4 keeps only
its v1 agent stack (tasksets, harnesses), with no ``env_response`` to drive turn by turn, so the extra pins 0.3.1.
"""

from gigpo.envs.registry import register_prefix

register_prefix("textarena", "gigpo.envs.adapters.textarena:resolve",
                "TextArena game; N-player games by self-play or vs env.opponent", package="textarena",
                extra="textarena", example="textarena:TicTacToe-v0")
register_prefix("gym", "gigpo.envs.adapters.gym:resolve",
                "gymnasium env with a discrete action space (text or ANSI render)", package="gymnasium",
                extra="", example="gym:FrozenLake-v1")  # gymnasium is a core dependency: no extra
register_prefix("reasoning-gym", "gigpo.envs.adapters.reasoning_gym:resolve",
                "reasoning-gym dataset as a multi-turn env (retries with the scorer's feedback)",
                package="reasoning_gym", extra="reasoning-gym", example="reasoning-gym:basic_arithmetic")
register_prefix("verifiers", "gigpo.envs.adapters.verifiers:resolve",
                "verifiers 0.3.1 environment module (its load_environment, env.args.*)", package="verifiers",
                extra="verifiers", example="verifiers:my_env_module")
register_prefix("openenv", "gigpo.envs.adapters.openenv:resolve",
                "OpenEnv server over HTTP (a URL on 127.0.0.1) or an env class started locally",
                package="openenv", extra="openenv", example="openenv:http://127.0.0.1:8000")
