"""How a policy plays TicTacToe as the second player (issue 42's diagnosis), from ``gigpo eval --output`` files:
wins / draws / losses, and per move whether it used the two one-move tactics a random opponent leaves open —
taking a winning cell when one exists, blocking the opponent's line when it threatens one and there is no win —
plus how often it takes the centre on its first move and which cells its first move picks.

    gigpo eval --checkpoint RUN/checkpoints/iter_000020 --episodes 64 --output /tmp/t20.json
    python benchmarks/tictactoe_tactics.py /tmp/t0.json /tmp/t20.json

Board text as TextArena's TicTacToe-v0 prints it (``" O | 1 | X "`` rows); the agent's mark is the one with fewer
cells on the board before its move (the opponent moved first).
"""

from __future__ import annotations

import collections
import json
import re
import sys

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def board(observation: str) -> list[str] | None:
    """The last board in the observation, 9 cells of 'X', 'O' or the cell's digit."""
    rows = [line for line in observation.splitlines() if line.count("|") == 2]
    if len(rows) < 3:
        return None
    cells = [c.strip() for line in rows[-3:] for c in line.split("|")]
    return cells if len(cells) == 9 else None


def completing(cells: list[str], mark: str) -> set[int]:
    """Empty cells that would complete a line of ``mark``."""
    out = set()
    for line in LINES:
        marks = [cells[i] for i in line]
        if marks.count(mark) == 2:
            out |= {i for i in line if cells[i] not in ("X", "O")}
    return out


def summarise(path: str) -> str:
    data = json.load(open(path))
    s = data["summary"]
    wins, losses = s["success_rate"], s["success_rate"] - s["episode_return"]
    counts: collections.Counter[str] = collections.Counter()
    first: collections.Counter[int] = collections.Counter()
    for traj in data["trajectories"]:
        for k, step in enumerate(traj["steps"]):
            cells, m = board(step["observation"]), re.search(r"\d", str(step["action"]))
            if cells is None or m is None:
                continue
            move, n_x, n_o = int(m.group()), cells.count("X"), cells.count("O")
            me, them = ("X", "O") if n_x < n_o else ("O", "X")
            win, block = completing(cells, me), completing(cells, them)
            if k == 0:
                first[move] += 1
                counts["first"] += 1
                counts["first_centre"] += move == 4
            if win:
                counts["win_chance"] += 1
                counts["win_taken"] += move in win
            elif block:
                counts["block_needed"] += 1
                counts["blocked"] += move in block

    def rate(a: str, b: str) -> str:
        return f"{counts[a] / counts[b]:.2f} of {counts[b]}" if counts[b] else "-"

    top = ", ".join(f"{cell}: {n}" for cell, n in first.most_common(3))
    return (f"| {path} | {wins:.3f} | {1 - wins - losses:.3f} | {losses:.3f} | {rate('win_taken', 'win_chance')} | "
            f"{rate('blocked', 'block_needed')} | {rate('first_centre', 'first')} | {top} |")


def main() -> None:
    print("| eval file | wins | draws | losses | wins taken | blocks made | centre first | commonest first moves |")
    print("|---|---|---|---|---|---|---|---|")
    for path in sys.argv[1:]:
        print(summarise(path))


if __name__ == "__main__":
    main()
