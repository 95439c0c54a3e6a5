"""ALFWorld on TextWorld's PDDL engine: the real games (``alfworld``) and generated ones (``alfworld-gen``)."""

from gigpo.envs.alfworld.env import AlfWorldGenEnv
from gigpo.envs.alfworld.real import AlfWorldEnv
from gigpo.envs.alfworld.tasks import PAPER_ORDER, TASK_TYPES

__all__ = ["AlfWorldEnv", "AlfWorldGenEnv", "PAPER_ORDER", "TASK_TYPES"]
