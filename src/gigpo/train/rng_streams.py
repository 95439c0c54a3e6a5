"""Tags of the independent random streams derived from the run seed (``np.random.default_rng([seed, ..., TAG])``).

Each stream has its own tag so that, e.g., drawing more evaluation seeds never shifts the training tasks, and a
resumed run replays exactly the streams of the run it continues. Changing a value changes every run's draws.
"""

#: [seed, iteration, TRAIN_TASKS]: the task seeds of one iteration (dynamic sampling appends its round)
TRAIN_TASKS = 1
EVAL_TASKS = 2  #: [seed, EVAL_TASKS]: the held-out evaluation seeds
TORCH_SEED = 3  #: [seed, iteration, TORCH_SEED]: torch's sampling seed for one iteration
MINIBATCH_ORDER = 4  #: [seed, iteration, MINIBATCH_ORDER]: the order of rows in the PPO mini-batches
ROLLOUT_SHARD = 5  #: [seed, iteration, ROLLOUT_SHARD, shard]: torch's sampling seed of one rollout shard (S > 1)
