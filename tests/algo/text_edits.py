"""Random text edits shared by the similarity tests."""

from __future__ import annotations

import random


def random_edits(
    rng: random.Random, s: str, n_edits: int, alphabet: str, max_insert: int, max_delete: int
) -> str:
    """Apply ``n_edits`` edits to ``s``: at a random position, insert up to ``max_insert`` characters drawn from
    ``alphabet`` and delete up to ``max_delete`` characters."""
    for _ in range(n_edits):
        pos = rng.randrange(len(s) + 1)
        ins = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, max_insert)))
        s = s[:pos] + ins + s[pos + rng.randint(0, max_delete) :]
    return s
