"""gigpo: reinforcement learning for multi-turn LLM agents with Group-in-Group Policy Optimization."""

__version__ = "0.1.0"
