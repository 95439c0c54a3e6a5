"""ALFWorld env speed: game load + reset, cached reset, and step rates of alfworld-gen on TextWorld's PDDL engine.

    python benchmarks/alfworld_speed.py --games 6 [--output docs/results/alfworld_speed.md]

Each held-out game (one per task type) is reset twice (the first reset loads the game into the engine, the
second reuses it, as a group's resets do) and played by its walkthrough. Wall and CPU (process) seconds are both
reported: on a shared machine the wall time includes waiting for a core.
"""

from __future__ import annotations

import argparse
import time

from gigpo.envs.alfworld.env import AlfWorldGenEnv


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def measure(games: int) -> dict[str, tuple[float, float, int]]:
    """name -> (wall s, cpu s, count) summed over the games."""
    env = AlfWorldGenEnv(split="test", heldout_games=games)
    rows = {"load + reset": [0.0, 0.0, 0], "reset (game loaded)": [0.0, 0.0, 0], "step": [0.0, 0.0, 0],
            "inadmissible step": [0.0, 0.0, 0]}

    def add(name, w, c):
        rows[name][0] += w
        rows[name][1] += c
        rows[name][2] += 1

    for seed in range(games):
        _, w, c = _timed(lambda s=seed: env.reset(s))
        add("load + reset", w, c)
        _, w, c = _timed(lambda s=seed: env.reset(s))
        add("reset (game loaded)", w, c)
        _, w, c = _timed(lambda: env.step("fly to the moon"))
        add("inadmissible step", w, c)
        for cmd in env.make_game(seed).walkthrough:
            _, w, c = _timed(lambda cmd=cmd: env.step(cmd))
            add("step", w, c)
    return {k: tuple(v) for k, v in rows.items()}


def table(rows: dict[str, tuple[float, float, int]]) -> str:
    lines = ["| call | n | wall ms / call | CPU ms / call | calls / CPU s |", "|---|---|---|---|---|"]
    for name, (w, c, n) in rows.items():
        lines.append(f"| {name} | {n} | {1000 * w / n:.1f} | {1000 * c / n:.1f} | {n / max(c, 1e-9):.1f} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--games", type=int, default=6)
    p.add_argument("--output")
    args = p.parse_args()
    text = table(measure(args.games))
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
