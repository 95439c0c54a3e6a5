"""What a policy's held-out gridgoal moves look like (issue 42's diagnosis): from ``gigpo eval --output`` files, the
share of each move word, and of moves that bring P closer to G (Manhattan distance falls), keep it (a move
into the wall) or take it further — the quantity the learner would have to raise for held-out success to rise.

    gigpo eval --checkpoint RUN/checkpoints/iter_000060 --episodes 64 --output /tmp/e60.json
    python benchmarks/gridgoal_moves.py /tmp/e0.json /tmp/e60.json

A step is counted when its observation holds both P and G (the grid text of ``GridGoalEnv.render``); ties among
several closer moves all count as closer.
"""

from __future__ import annotations

import collections
import json
import sys

MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def positions(grid: str) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """(P, G) as (row, col) from the grid text, or None when either is missing."""
    found: dict[str, tuple[int, int]] = {}
    rows = [line.split() for line in grid.strip().splitlines() if line.strip()]
    for r, cells in enumerate(rows):
        for c, cell in enumerate(cells):
            if cell in ("P", "G"):
                found[cell] = (r, c)
    return (found["P"], found["G"]) if len(found) == 2 else None


def move_effect(p: tuple[int, int], g: tuple[int, int], move: str, size: int) -> int:
    """-1 closer, 0 same distance (off the grid), +1 further."""
    dr, dc = MOVES[move]
    q = (min(max(p[0] + dr, 0), size - 1), min(max(p[1] + dc, 0), size - 1))
    before = abs(p[0] - g[0]) + abs(p[1] - g[1])
    after = abs(q[0] - g[0]) + abs(q[1] - g[1])
    return (after > before) - (after < before)


def summarise(path: str) -> str:
    data = json.load(open(path))
    words: collections.Counter[str] = collections.Counter()
    effects: collections.Counter[int] = collections.Counter()
    for traj in data["trajectories"]:
        for step in traj["steps"]:
            obs, action = step["observation"], str(step["action"]).strip().lower()
            pg = positions(obs)  # gridgoal's observation is the grid text itself
            if pg is None or action not in MOVES:
                continue
            size = len([line for line in obs.strip().splitlines() if line.strip()])
            words[action] += 1
            effects[move_effect(*pg, action, size)] += 1
    n = sum(words.values())
    share = ", ".join(f"{w} {words[w] / n:.2f}" for w in MOVES)
    return (f"| {path} | {data['summary']['success_rate']:.3f} | {n} | {share} | {effects[-1] / n:.2f} | "
            f"{effects[0] / n:.2f} | {effects[1] / n:.2f} |")


def main() -> None:
    print("| eval file | success | moves | share of each move | closer | same | further |")
    print("|---|---|---|---|---|---|---|")
    for path in sys.argv[1:]:
        print(summarise(path))


if __name__ == "__main__":
    main()
