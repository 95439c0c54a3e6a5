"""Checks made before training: the env's action spec and prompt length, held-out seeds that are really held out,
whether the rollout fits in memory, whether the policy can act at all."""
