"""One iteration's batch: the engine's lifecycle for every rollout.engine (remote.py), collection rounds, DAPO dynamic sampling and concat folding (dynamic_sampling.py)."""
