"""Training: config, the trainer loop, checkpoints, metrics and evaluation. Composes envs, rollout and algo."""
