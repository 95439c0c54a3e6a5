"""Text environments: the Env contract, the registry and built-in envs. Imports nothing of models."""

from gigpo.envs.base import Env, EnvError
from gigpo.envs.registry import get_spec, list_envs, make, register

__all__ = ["Env", "EnvError", "get_spec", "list_envs", "make", "register"]
