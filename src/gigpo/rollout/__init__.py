"""Multi-turn collection: groups of envs, one batched generation per turn for the still-active envs."""

from gigpo.rollout.batch import RolloutBatch, Trajectory
from gigpo.rollout.collector import Collector
from gigpo.rollout.engine import Engine, Generation, HFEngine

__all__ = ["Collector", "Engine", "Generation", "HFEngine", "RolloutBatch", "Trajectory"]
