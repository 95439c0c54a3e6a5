"""Tags of the independent random streams derived from the run seed (``np.random.default_rng([seed, ..., TAG])``).

Each stream has its own tag so that, e.g., drawing more evaluation seeds never shifts the training tasks, and a
resumed run replays exactly the streams of the run it continues. Changing a value changes every run's draws.
Also the task seeds drawn from them: :func:`train_seeds` and :func:`eval_seeds` (re-exported by
:mod:`gigpo.train.compose`).
"""

import numpy as np

#: [seed, iteration, TRAIN_TASKS]: the task seeds of one iteration (dynamic sampling appends its round)
TRAIN_TASKS = 1
EVAL_TASKS = 2  #: [seed, EVAL_TASKS]: the held-out evaluation seeds
TORCH_SEED = 3  #: [seed, iteration, TORCH_SEED]: torch's sampling seed for one iteration
MINIBATCH_ORDER = 4  #: [seed, iteration, MINIBATCH_ORDER]: the order of rows in the PPO mini-batches
ROLLOUT_SHARD = 5  #: [seed, iteration, ROLLOUT_SHARD, shard]: torch's sampling seed of one rollout shard (S > 1)

#: Train task seeds live in [0, 2^30); held-out evaluation seeds in [2^30, 2^31) — disjoint by construction.
EVAL_SEED_BASE = 2**30


def train_seeds(seed: int, iteration: int, n: int) -> list[int]:
    """Task seeds of one iteration, a pure function of (run seed, iteration) so resumes replay them."""
    rng = np.random.default_rng([seed, iteration, TRAIN_TASKS])
    return rng.integers(0, EVAL_SEED_BASE, size=n).tolist()


def eval_seeds(seed: int, n: int) -> list[int]:
    """``n`` held-out seeds; the first k of ``eval_seeds(s, n)`` are the same for every n ≥ k."""
    rng = np.random.default_rng([seed, EVAL_TASKS])
    return (EVAL_SEED_BASE + rng.integers(0, EVAL_SEED_BASE, size=n)).tolist()
